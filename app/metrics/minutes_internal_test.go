package metrics

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/dataplane"
)

// fakeMinutes records AddMinute calls; fail makes the next ones fail.
type fakeMinutes struct {
	mu   sync.Mutex
	got  []dataplane.MinuteCounts
	tops []string
	fail bool
}

func (f *fakeMinutes) AddMinute(_ context.Context, topic string, m dataplane.MinuteCounts) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return errors.New("redis down")
	}
	f.got, f.tops = append(f.got, m), append(f.tops, topic)
	return nil
}

func (f *fakeMinutes) take() (map[string]dataplane.MinuteCounts, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]dataplane.MinuteCounts)
	for i, m := range f.got {
		out[f.tops[i]] = m
	}
	n := len(f.got)
	f.got, f.tops = nil, nil
	return out, n
}

// A flush writes what changed since the last written flush, per topic; a
// topic that counted nothing is not written; a failed write is kept for
// the next; the backlog is sampled once a minute.
func TestMinuteFlush(t *testing.T) {
	m := New(logrus.New())
	w := &fakeMinutes{}
	backlogReads := 0
	f := &minuteFlusher{m: m, written: m.liveTotals(), cfg: MinutesConfig{Writer: w, Logger: logrus.New(),
		Backlog: func(context.Context) (map[string]int64, error) {
			backlogReads++
			return map[string]int64{"a": 7, "idle": 0}, nil
		}}}
	ctx := context.Background()
	at := time.Date(2026, 12, 5, 11, 0, 10, 0, time.UTC)
	minute := at.Unix() / 60

	m.Enqueued("a", 3)
	m.Completed("a", 2)
	m.Dead("b", 1)
	f.flush(ctx, at)
	got, n := w.take()
	if n != 3 || got["a"] != (dataplane.MinuteCounts{Minute: minute, Enqueued: 3, Done: 2, Backlog: 7}) ||
		got["b"] != (dataplane.MinuteCounts{Minute: minute, Dead: 1, Backlog: -1}) ||
		got["idle"] != (dataplane.MinuteCounts{Minute: minute, Backlog: 0}) {
		t.Fatalf("first flush: %d writes %+v", n, got)
	}

	// Same minute: no backlog read again; only a's retry is new.
	m.Retried("a", 4)
	f.flush(ctx, at.Add(5*time.Second))
	got, n = w.take()
	if n != 1 || got["a"] != (dataplane.MinuteCounts{Minute: minute, Retried: 4, Backlog: -1}) || backlogReads != 1 {
		t.Fatalf("second flush: %d writes %+v, %d backlog reads", n, got, backlogReads)
	}

	// A failed write is kept: the next flush carries it.
	w.fail = true
	m.Completed("a", 1)
	f.flush(ctx, at.Add(10*time.Second))
	w.fail = false
	m.Completed("a", 1)
	f.flush(ctx, at.Add(15*time.Second))
	got, n = w.take()
	if n != 1 || got["a"].Done != 2 {
		t.Fatalf("after a failed write: %d writes %+v", n, got)
	}

	// The next minute samples the backlog again.
	f.flush(ctx, at.Add(time.Minute))
	got, _ = w.take()
	if backlogReads != 2 || got["a"] != (dataplane.MinuteCounts{Minute: minute + 1, Backlog: 7}) {
		t.Fatalf("next minute: %+v, %d backlog reads", got, backlogReads)
	}
}

// RunMinutes writes what is left when its context ends.
func TestRunMinutesFlushesAtTheEnd(t *testing.T) {
	m := New(logrus.New())
	w := &fakeMinutes{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.RunMinutes(ctx, MinutesConfig{Writer: w, Every: time.Hour}) }()
	m.Enqueued("a", 5)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, _ := w.take()
	if got["a"].Enqueued != 5 {
		t.Fatalf("final flush: %+v", got)
	}
}

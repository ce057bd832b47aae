package dataplane

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// The pool's rule, slots set by hand: a member takes the free slots but
// those owed to members that want work and hold less than their weight's
// share, and always what it is owed itself.
func TestPoolReserveOwesEachWantingMemberItsShare(t *testing.T) {
	_, w := idleWorker(t, &memLedger{rows: map[string]int{}})
	for _, topic := range []string{"a", "b", "c"} {
		if err := w.Handle(topic, HandlerFunc(nil), TopicConfig{Concurrency: 2}); err != nil {
			t.Fatal(err)
		}
	}
	pools, err := newPools([]queue.Pool{{Name: "p", Concurrency: 12, Weights: map[string]int{"a": 3, "b": 1}}}, w.topics)
	if err != nil {
		t.Fatal(err)
	}
	p := pools[0]
	a, b := w.topics["a"], w.topics["b"]
	if a.cfg.Concurrency != 12 || cap(a.work) < 12 || w.topics["c"].pool != nil {
		t.Fatalf("a member's concurrency %d (work %d), want the pool's 12; c in a pool: %v", a.cfg.Concurrency, cap(a.work), w.topics["c"].pool != nil)
	}
	take := func(tr *topicRunner, want int) int {
		return p.reserve(tr.member, tr.testPart(), want, func(n int) { tr.busy.Add(int64(n)) })
	}
	set := func(busyA, busyB int64, wantsA, wantsB bool) {
		a.busy.Store(busyA)
		b.busy.Store(busyB)
		a.testPart().wants.Store(wantsA)
		b.testPart().wants.Store(wantsB)
	}
	for _, c := range []struct {
		what           string
		busyA, busyB   int64
		wantsA, wantsB bool
		who            *topicRunner
		want, got      int
		wantsAfter     bool
	}{
		{"alone, a takes the whole pool", 0, 0, false, false, a, 100, 12, true},
		{"alone, a takes what it asks", 0, 0, false, false, a, 5, 5, false},
		{"b idle: a takes b's share too", 9, 0, true, false, a, 100, 3, true},
		{"b wants: a, at its share, takes none", 9, 0, true, true, a, 100, 0, true},
		{"b wants: b takes its share", 9, 0, true, true, b, 100, 3, true},
		{"a over its share: b gets what frees, up to its own", 11, 0, true, true, b, 100, 1, true},
		{"b wants: a under its share takes the rest but b's", 2, 0, true, true, a, 100, 7, true},
		{"the pool full: nothing", 8, 4, true, true, a, 100, 0, true},
	} {
		set(c.busyA, c.busyB, c.wantsA, c.wantsB)
		if n := take(c.who, c.want); n != c.got {
			t.Errorf("%s: took %d, want %d", c.what, n, c.got)
		}
		if c.who.member.wanting() != c.wantsAfter {
			t.Errorf("%s: wants %v after, want %v", c.what, c.who.member.wanting(), c.wantsAfter)
		}
	}

	if _, err := newPools([]queue.Pool{{Name: "p", Concurrency: 4, Weights: map[string]int{"a": 1, "nope": 1}}}, w.topics); err == nil ||
		!strings.Contains(err.Error(), "topic nope has no handler") {
		t.Errorf("a pool topic without a handler: %v", err)
	}
	// NewWorker refuses bad pools, naming the pool and the field.
	c, _ := idleWorker(t, &memLedger{rows: map[string]int{}})
	for _, bad := range []struct {
		pools []queue.Pool
		want  string
	}{
		{[]queue.Pool{{Name: "a b", Concurrency: 4, Weights: map[string]int{"a": 1}}}, `pool name "a b"`},
		{[]queue.Pool{{Name: "p", Concurrency: 0, Weights: map[string]int{"a": 1}}}, "pool p: concurrency 0"},
		{[]queue.Pool{{Name: "p", Concurrency: 4}}, "pool p: weights"},
		{[]queue.Pool{{Name: "p", Concurrency: 4, Weights: map[string]int{"a": 0}}}, "pool p: weight of a 0"},
		{[]queue.Pool{{Name: "p", Concurrency: 4, Weights: map[string]int{"a": 1}}, {Name: "q", Concurrency: 4, Weights: map[string]int{"a": 1}}}, "topic a is in pool p already"},
		{[]queue.Pool{{Name: "p", Concurrency: 4, Weights: map[string]int{"a": 1}}, {Name: "p", Concurrency: 4, Weights: map[string]int{"b": 1}}}, "pool p: named twice"},
	} {
		if _, err := NewWorker(c, &memLedger{rows: map[string]int{}}, WorkerConfig{Pools: bad.pools}); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("NewWorker with pools %+v: %v, want %q", bad.pools, err, bad.want)
		}
	}
}

// A worker's pool of 8 over two backlogged topics of weights 3 and 1, on
// real Redis: never more than 8 of their jobs run at once, and while both
// have due jobs the first gets about three quarters of the starts (each
// topic alone would get half, with its own concurrency). Then one topic
// alone uses the whole pool. Also with the heavier topic over 8
// partitions, all its jobs on one of them and idle fetchers waking every
// 5 ms: its empty partitions' claims must not say it wants nothing (they
// did, and the weights inverted: light finished first).
func TestPoolSplitsHandlersByWeight(t *testing.T) {
	t.Run("one partition each", func(t *testing.T) { poolSplit(t, 1, time.Second) })
	t.Run("heavy over 8 partitions, its jobs on one", func(t *testing.T) { poolSplit(t, 8, 5*time.Millisecond) })
}

func poolSplit(t *testing.T, heavyParts int, maxIdle time.Duration) {
	c, w := idleWorker(t, &memLedger{rows: map[string]int{}})
	w.cfg.Pools = []queue.Pool{{Name: "shared", Concurrency: 8, Weights: map[string]int{"heavy": 3, "light": 1}}}
	w.cfg.MaxIdle = maxIdle
	ctx := testenv.Context(t)
	if heavyParts > 1 {
		if _, err := c.SetPartitions(ctx, "heavy", heavyParts); err != nil {
			t.Fatal(err)
		}
	}
	const perTopic = 300
	for _, topic := range []string{"heavy", "light"} {
		jobs := make([]NewJob, perTopic)
		for i := range jobs {
			jobs[i] = NewJob{ID: fmt.Sprintf("%s-%d", topic, i), PartitionKey: "one"}
		}
		if _, err := c.EnqueueBatch(ctx, topic, jobs); err != nil {
			t.Fatal(err)
		}
	}
	var running, maxRunning, heavyStarts, lightStarts, lightAlone, maxLight, lightRunning atomic.Int64
	var lightAtHeavysEnd atomic.Int64
	lightAtHeavysEnd.Store(-1)
	raise := func(m *atomic.Int64, v int64) {
		for old := m.Load(); v > old && !m.CompareAndSwap(old, v); old = m.Load() {
		}
	}
	done := make(chan struct{})
	var doneOnce sync.Once
	run := func(f func()) HandlerFunc {
		return func(ctx context.Context, j *Job) error {
			raise(&maxRunning, running.Add(1))
			defer running.Add(-1)
			f()
			time.Sleep(5 * time.Millisecond) // the work: equal for both topics
			return nil
		}
	}
	if err := w.Handle("heavy", run(func() {
		if heavyStarts.Add(1) == perTopic {
			lightAtHeavysEnd.Store(lightStarts.Load())
		}
	}), TopicConfig{Concurrency: 1, Prefetch: -1}); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("light", HandlerFunc(func(ctx context.Context, j *Job) error {
		raise(&maxLight, lightRunning.Add(1))
		defer lightRunning.Add(-1)
		err := run(func() {
			n := lightStarts.Add(1)
			if heavyStarts.Load() == perTopic {
				lightAlone.Add(1)
			}
			if n == perTopic {
				doneOnce.Do(func() { close(done) })
			}
		})(ctx, j)
		return err
	}), TopicConfig{Concurrency: 1, Prefetch: -1}); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- w.Run(runCtx) }()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("not every job ran: heavy %d, light %d", heavyStarts.Load(), lightStarts.Load())
	}
	stop()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if m := maxRunning.Load(); m > 8 {
		t.Errorf("%d jobs ran at once, over the pool's 8", m)
	}
	light := lightAtHeavysEnd.Load()
	if light < 0 {
		t.Fatalf("light ran all its %d jobs before heavy (weight 3) started its %d: heavy had %d", perTopic, perTopic, heavyStarts.Load())
	}
	share := float64(perTopic) / float64(perTopic+light)
	t.Logf("heavy's share of the starts while both had work: %.2f (light %d); light alone: %d starts, at most %d at once", share, light, lightAlone.Load(), maxLight.Load())
	if share < 0.65 || share > 0.85 {
		t.Errorf("heavy got %.2f of the starts while both had due jobs (light started %d of its %d meanwhile), want about 0.75 (weights 3:1)", share, light, perTopic)
	}
	if lightAlone.Load() > 50 && maxLight.Load() < 7 {
		t.Errorf("light alone ran at most %d at once, want the whole pool of 8 (its share is 2)", maxLight.Load())
	}
}

package dataplane_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
)

// keyRuns records the runs of jobs of ordering keys: a key's runs that
// overlap, and a job that started before an earlier job of its key
// (earlier in due order) had finished for good.
type keyRuns struct {
	mu       sync.Mutex
	running  map[string]string // key -> the job running
	finished map[string]int    // key -> the highest index finished for good
	faults   []string
}

func (r *keyRuns) start(key, id string, index int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if other, ok := r.running[key]; ok {
		r.faults = append(r.faults, fmt.Sprintf("%s started while %s of key %s ran", id, other, key))
	}
	if index != r.finished[key]+1 && index != r.finished[key] {
		r.faults = append(r.faults, fmt.Sprintf("%s (index %d) started after index %d of key %s finished", id, index, r.finished[key], key))
	}
	r.running[key] = id
}

func (r *keyRuns) end(key string, index int, final bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.running, key)
	if final {
		r.finished[key] = index
	}
}

// Three workers run 600 jobs over 20 keys, enqueued latest first: no two
// jobs of a key ever run at once, and each key's jobs start in due order
// (enqueue order among equal due times). One key's jobs fail once each
// before they succeed: the key is held through each retry (the retry runs
// before the key's next job).
func TestOrderingAcrossWorkers(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	const keys, perKey = 20, 30
	runs := &keyRuns{running: map[string]string{}, finished: map[string]int{}}
	var done atomic.Int64
	var failedOnce sync.Map
	handler := dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		key, n, _ := strings.Cut(strings.TrimPrefix(j.ID, "j:"), ":")
		index, _ := strconv.Atoi(n)
		// The key's due order: n = 2 and 3 share a due time, and 3 was
		// enqueued first, so the order is 1, 3, 2, 4, 5, ...
		switch index {
		case 2:
			index = 3
		case 3:
			index = 2
		}
		runs.start(key, j.ID, index)
		time.Sleep(time.Millisecond) // long enough for another worker to try
		if key == "k0" {
			if _, again := failedOnce.LoadOrStore(j.ID, true); !again {
				runs.end(key, index, false)
				return errors.New("fails once")
			}
		}
		runs.end(key, index, true)
		done.Add(1)
		return nil
	})
	for i := range 3 {
		c, err := dataplane.New(e.rdb, dataplane.Config{Namespace: e.ns})
		if err != nil {
			t.Fatal(err)
		}
		w := newWorkerWith(t, wenv{env: env{c: c, rdb: e.rdb, ns: e.ns}, db: e.db, led: e.led}, ledgerops.Of(e.led), dataplane.WorkerConfig{ID: fmt.Sprintf("w:%d", i)})
		if err := w.Handle("t", handler, dataplane.TopicConfig{Concurrency: 8, MaxAttempts: 3,
			Backoff: dataplane.Backoff{Base: 5 * time.Millisecond, Cap: 5 * time.Millisecond, Jitter: -1}}); err != nil {
			t.Fatal(err)
		}
		startWorker(t, w)
	}
	// Enqueued last index first, each due 1 ms after the one before it
	// (two share a due time: enqueue order decides), so that due order and
	// enqueue order differ; in one batch, so that no job is due before
	// every job is in.
	base := time.Now().Add(300 * time.Millisecond).UnixMilli()
	batch := make([]dataplane.NewJob, 0, keys*perKey)
	for n := perKey; n >= 1; n-- {
		for k := range keys {
			due := base + int64(n)
			if n == 2 {
				due = base + 3 // n 2 and 3 share it; 3 was enqueued first
			}
			batch = append(batch, dataplane.NewJob{ID: fmt.Sprintf("j:k%d:%d", k, n), OrderingKey: fmt.Sprintf("k%d", k), RunAt: due})
		}
	}
	if _, err := e.c.EnqueueBatch(ctx, "t", batch); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(ctx, t, "every job to succeed", func() bool { return done.Load() == keys*perKey })
	runs.mu.Lock()
	defer runs.mu.Unlock()
	if faults := runs.faults; len(faults) > 0 {
		t.Fatalf("%d faults, the first: %v", len(faults), faults[:min(5, len(faults))])
	}
}

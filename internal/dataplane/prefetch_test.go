package dataplane_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
)

// prefetchRun starts a worker with two handlers and the given prefetch;
// with quick, ten jobs that return at once run first (the handlers are
// then known to be quick). Then a backlog of 20 due jobs whose handlers
// block: it waits until both handlers run and the worker holds want
// claimed jobs, then lets every handler finish and checks that each job
// ran once.
func prefetchRun(t *testing.T, tc dataplane.TopicConfig, quick bool, want int) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	const jobs = 20
	release := make(chan struct{})
	var running, ran testenv.Counter
	var mu sync.Mutex
	seen := map[string]bool{}
	h := dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		if j.ID[0] == 'q' {
			return nil
		}
		running.Add(1)
		<-release
		mu.Lock()
		twice := seen[j.ID]
		seen[j.ID] = true
		mu.Unlock()
		if twice {
			t.Errorf("job %s ran twice", j.ID)
		}
		ran.Add(1)
		return nil
	})
	obs := &settled{}
	w := newWorker(t, e, dataplane.WorkerConfig{Observer: obs})
	tc.Concurrency = 2
	if err := w.Handle("t", h, tc); err != nil {
		t.Fatal(err)
	}
	stop := startWorker(t, w)
	settledBefore := int64(0)
	if quick {
		enqueueMany(t, e.c, "t", "q", 10, nil)
		testenv.WaitFor(ctx, t, "the quick jobs settled", func() bool { return obs.completed.Load() == 10 })
		settledBefore = 10
	}
	enqueueMany(t, e.c, "t", "j", jobs, nil)
	held := func() int64 {
		st, err := e.c.Stats(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		return st.InFlight
	}
	testenv.WaitFor(ctx, t, fmt.Sprintf("2 handlers running and %d jobs claimed", want),
		func() bool { return running.Load() == 2 && held() == int64(want) },
		func() string { return fmt.Sprintf("%d running, %d claimed", running.Load(), held()) })
	// Nothing frees a slot while the handlers block: the fetcher cannot
	// claim more, and the count stays what the prefetch allows.
	if n, err := e.led.Count(ctx); err != nil || n != int64(want) {
		t.Fatalf("ledger rows = %d, %v; want %d: every claimed job is recorded", n, err, want)
	}
	close(release)
	testenv.WaitFor(ctx, t, "every job settled", func() bool { return obs.completed.Load() == settledBefore+jobs },
		func() string { return fmt.Sprint(obs.completed.Load(), " settled") })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if ran.Load() != jobs {
		t.Fatalf("%d jobs ran, want %d", ran.Load(), jobs)
	}
}

func TestPrefetchOffClaimsOnlyFreeSlots(t *testing.T) {
	prefetchRun(t, dataplane.TopicConfig{Prefetch: -1}, true, 2)
}

func TestRateLimitedTopicDoesNotPrefetch(t *testing.T) {
	prefetchRun(t, dataplane.TopicConfig{Prefetch: 3, RateLimit: 1000, RateBurst: 100}, true, 2)
}

// Handlers not known to be quick (none ran yet, or they are slow) get no
// prefetched jobs: those would wait behind them while another process
// might have a free slot.
func TestNoPrefetchBehindHandlersNotKnownQuick(t *testing.T) {
	prefetchRun(t, dataplane.TopicConfig{Prefetch: 3}, false, 2)
}

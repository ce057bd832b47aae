package dataplane_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
)

// Shutdown with handlers that finish in time: they are acked; the jobs never
// started stay due; nothing is left leased or in the ledger; a second worker
// handles the rest. Every job is handled exactly once.
func TestShutdownLetsRunningHandlersFinish(t *testing.T) {
	e := newWEnv(t)
	enqueueMany(t, e.c, "t", "j", 20, nil)
	started := make(chan string, 20)
	release := make(chan struct{})
	var mu sync.Mutex
	handled := map[string]int{}
	var changed testenv.Event
	h := dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		started <- j.ID
		<-release
		mu.Lock()
		handled[j.ID]++
		mu.Unlock()
		changed.Notify()
		return nil
	})
	w := newWorker(t, e, dataplane.WorkerConfig{ShutdownTimeout: time.Minute})
	if err := w.Handle("t", h, dataplane.TopicConfig{Concurrency: 4}); err != nil {
		t.Fatal(err)
	}
	run := testenv.Start(t, w.Run)
	for i := 0; i < 4; i++ {
		<-started
	}
	// Shutdown has begun before the handlers may finish, so a freed slot
	// cannot take another job; it hands back what was claimed unstarted and
	// waits on the four running handlers. Redis's state is the one witness
	// of that hand-back.
	run.Cancel()
	testenv.WaitFor(testenv.Context(t), t, "no further claims", func() bool {
		st, _ := e.c.Stats(testenv.Context(t), "t")
		return st.InFlight == 4 && st.Due == 16
	})
	close(release)
	if err := run.Wait(); err != nil {
		t.Fatal(err)
	}
	st, _ := e.c.Stats(testenv.Context(t), "t")
	if st.InFlight != 0 || st.Due != 16 {
		t.Fatalf("after shutdown: %+v; want the 4 running acked and 16 due", st)
	}
	if n, _ := e.led.Count(testenv.Context(t)); n != 0 {
		t.Fatalf("ledger holds %d rows after shutdown", n)
	}

	w2 := newWorker(t, e, dataplane.WorkerConfig{})
	if err := w2.Handle("t", h, dataplane.TopicConfig{Concurrency: 4}); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w2)
	changed.Wait(testenv.Context(t), t, "the rest handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) == 20
	})
	for id, n := range handled {
		if n != 1 {
			t.Fatalf("%s handled %d times", id, n)
		}
	}
}

// Shutdown whose timeout runs out: the handlers' contexts end with
// ErrShutdown, and their jobs go back to due without spending an attempt.
func TestShutdownTimeoutHandsRunningJobsBack(t *testing.T) {
	e := newWEnv(t)
	enqueueMany(t, e.c, "t", "j", 6, func(j *dataplane.NewJob) { j.MaxAttempts = 1 })
	var running testenv.Counter
	var causes sync.Map
	w := newWorker(t, e, dataplane.WorkerConfig{ShutdownTimeout: 50 * time.Millisecond})
	err := w.Handle("t", dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		running.Add(1)
		<-ctx.Done()
		causes.Store(j.ID, context.Cause(ctx))
		return ctx.Err()
	}), dataplane.TopicConfig{Concurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	stop := startWorker(t, w)
	running.WaitAtLeast(testenv.Context(t), t, 3, "3 handlers running")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	n := 0
	causes.Range(func(k, v any) bool {
		n++
		if v != dataplane.ErrShutdown {
			t.Errorf("%s: handler context ended by %v, want ErrShutdown", k, v)
		}
		return true
	})
	if n != 3 {
		t.Fatalf("%d handlers saw their context end", n)
	}
	st, _ := e.c.Stats(testenv.Context(t), "t")
	if st.InFlight != 0 || st.Dead != 0 || st.DueNow != 6 {
		t.Fatalf("after shutdown: %+v; want all 6 due again, none dead (max attempts 1)", st)
	}
	if n, _ := e.led.Count(testenv.Context(t)); n != 0 {
		t.Fatalf("ledger holds %d rows", n)
	}
	for i := 0; i < 6; i++ {
		info := mustGet(t, e.env, "t", "j"+string(rune('0'+i)))
		if info.Job.Attempt != 0 {
			t.Fatalf("%s attempt %d after shutdown, want 0", info.Job.ID, info.Job.Attempt)
		}
	}
}

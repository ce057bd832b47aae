package dataplane_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
)

// cancelCounts is settled that also counts the jobs that ended cancelled
// while held (queue.CancelObserver).
type cancelCounts struct {
	settled
	cancelled testenv.Counter
}

func (c *cancelCounts) CancelledRunning(_ string, n int) { c.cancelled.Add(int64(n)) }

// TestCancelRunning: a cancel asked through another client of the same
// Redis (as another process would) ends a running handler's context with
// cause ErrCancelRequested; the run that then fails ends cancelled, not
// retried: no trace in Redis, no ledger row, history outcome cancelled.
// A handler that ignores its context and succeeds ends succeeded, and a
// cancel of a job no worker holds is ErrNotFound.
func TestCancelRunning(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	other, err := dataplane.New(e.rdb, dataplane.Config{Namespace: e.ns})
	if err != nil {
		t.Fatal(err)
	}
	led := ledgerops.Of(e.led)

	started := make(chan string, 4)
	causes := make(chan error, 4)
	release := make(chan struct{})
	obs := &cancelCounts{}
	w := newWorker(t, e, dataplane.WorkerConfig{Observer: obs, Topic: dataplane.TopicConfig{Concurrency: 2}})
	err = w.Handle("orders", dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		started <- j.ID
		if j.ID == "stubborn" {
			<-release // it ignores its context
			return nil
		}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	}), dataplane.TopicConfig{MaxAttempts: 5})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)

	if _, _, err := other.CancelRunning(ctx, led, "orders", "nobody"); !errors.Is(err, dataplane.ErrNotFound) {
		t.Fatalf("cancel of an unknown job's run: %v, want ErrNotFound", err)
	}
	mustEnqueue(t, e.env, "orders", dataplane.NewJob{ID: "o1"})
	if id := testenv.Receive(ctx, t, started, "the handler to start"); id != "o1" {
		t.Fatalf("started %s", id)
	}
	j, at, err := other.CancelRunning(ctx, led, "orders", "o1")
	if err != nil || j.ID != "o1" || j.Attempt != 1 || at <= 0 || j.LeaseUntil <= at {
		t.Fatalf("CancelRunning: %+v at %d, %v", j, at, err)
	}
	if cause := testenv.Receive(ctx, t, causes, "the handler's context to end"); !errors.Is(cause, dataplane.ErrCancelRequested) {
		t.Fatalf("the handler's context ended with %v, want ErrCancelRequested", cause)
	}
	obs.cancelled.WaitAtLeast(ctx, t, 1, "the run settled cancelled")
	if n := obs.retried.Load(); n != 0 {
		t.Errorf("%d retries: a cancelled run must not be retried", n)
	}
	info, err := e.c.Get(ctx, "orders", "o1")
	if err != nil || info.State != dataplane.StateUnknown {
		t.Errorf("after the cancel Redis has the job as %v (%v), want no trace", info, err)
	}
	if row, err := e.led.Row(ctx, "orders", "o1"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("ledger row after the cancel: %+v, %v; want none", row, err)
	}
	rows, _, err := e.led.History(ctx, ledger.HistoryFilter{Topic: "orders", ID: "o1", Limit: 5})
	if err != nil || len(rows) != 1 || rows[0].Outcome != ledger.OutcomeCancelled {
		t.Errorf("history of o1: %+v, %v; want one row, cancelled", rows, err)
	}
	marks, err := e.rdb.HLen(ctx, e.ns+":{orders}:cancel").Result()
	if err != nil || marks != 0 {
		t.Errorf("%d cancel marks left (%v), want the settled job's gone", marks, err)
	}
	// A cancel asked again once it ended: nothing holds it.
	if _, _, err := other.CancelRunning(ctx, led, "orders", "o1"); !errors.Is(err, dataplane.ErrNotFound) {
		t.Errorf("a second cancel after it ended: %v, want ErrNotFound", err)
	}

	// A waiting job is not running: Cancel's, not CancelRunning's.
	mustEnqueue(t, e.env, "orders", dataplane.NewJob{ID: "later", Delay: time.Hour})
	if _, _, err := other.CancelRunning(ctx, led, "orders", "later"); !errors.Is(err, dataplane.ErrNotFound) {
		t.Errorf("cancel of a waiting job's run: %v, want ErrNotFound", err)
	}

	// A handler that ignores its context runs on: the job stays held,
	// its cancel asked; asking again keeps the first time.
	mustEnqueue(t, e.env, "orders", dataplane.NewJob{ID: "stubborn"})
	testenv.Receive(ctx, t, started, "the stubborn handler to start")
	_, first, err := other.CancelRunning(ctx, led, "orders", "stubborn")
	if err != nil {
		t.Fatal(err)
	}
	_, again, err := e.c.CancelRunning(ctx, led, "orders", "stubborn")
	if err != nil || again != first {
		t.Errorf("asked again: at %d (%v), want the first ask's %d", again, err, first)
	}
	if info, err := e.c.Get(ctx, "orders", "stubborn"); err != nil || info.State != dataplane.StateInFlight || info.CancelRequestedAt != first {
		t.Errorf("the stubborn job: %+v, %v; want still in flight, its cancel asked at %d", info, err, first)
	}
	// When it returns nil its work is done: it ends succeeded.
	close(release)
	obs.completed.WaitAtLeast(ctx, t, 1, "the stubborn job settled")
	rows, _, err = e.led.History(ctx, ledger.HistoryFilter{Topic: "orders", ID: "stubborn", Limit: 5})
	if err != nil || len(rows) != 1 || rows[0].Outcome != ledger.OutcomeSucceeded {
		t.Errorf("history of the stubborn job: %+v, %v; want one row, succeeded", rows, err)
	}
	if n := obs.cancelled.Load(); n != 1 {
		t.Errorf("%d jobs ended cancelled, want 1", n)
	}
}

// TestCancelAskedOfADeadWorkersJob: a cancel asked while a worker that
// then died held the job (its lease runs out unsettled) is honoured by the
// next claim: the job is settled cancelled and its handler never runs.
func TestCancelAskedOfADeadWorkersJob(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	led := ledgerops.Of(e.led)
	mustEnqueue(t, e.env, "orders", dataplane.NewJob{ID: "o1"})
	// The "dead worker": a claim whose lease is over almost at once, never
	// settled.
	if cl, err := e.c.Claim(ctx, "orders", 1, time.Millisecond); err != nil || len(cl.Jobs) != 1 {
		t.Fatalf("claim: %+v, %v", cl, err)
	}
	if _, _, err := e.c.CancelRunning(ctx, led, "orders", "o1"); err != nil {
		t.Fatal(err)
	}
	var ran testenv.Counter
	obs := &cancelCounts{}
	w := newWorker(t, e, dataplane.WorkerConfig{Observer: obs})
	if err := w.Handle("orders", dataplane.HandlerFunc(func(context.Context, *dataplane.Job) error {
		ran.Add(1)
		return nil
	}), dataplane.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	testenv.WaitFor(ctx, t, "the job settled", func() bool { return obs.cancelled.Load()+obs.completed.Load() > 0 })
	if n, c := ran.Load(), obs.cancelled.Load(); n != 0 || c != 1 {
		t.Fatalf("the handler ran %d times after its cancel was asked, %d settled cancelled; want 0 and 1", n, c)
	}
	rows, _, err := e.led.History(ctx, ledger.HistoryFilter{Topic: "orders", ID: "o1", Limit: 5})
	if err != nil || len(rows) != 1 || rows[0].Outcome != ledger.OutcomeCancelled || rows[0].Attempts != 2 {
		t.Errorf("history of o1: %+v, %v; want one row, cancelled at attempt 2", rows, err)
	}
	if info, err := e.c.Get(ctx, "orders", "o1"); err != nil || info.State != dataplane.StateUnknown {
		t.Errorf("o1 after: %+v, %v; want no trace", info, err)
	}
}

// TestCancelAskHandedBackAndRequeued: a job whose cancel was asked and
// that then went back unstarted (released: attempt given back) is settled
// cancelled by the next claim without running; a dead job whose old ask's
// mark remains runs normally once requeued (the requeue drops the mark,
// which would otherwise match: a requeue keeps the enqueued time).
func TestCancelAskHandedBackAndRequeued(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	led := ledgerops.Of(e.led)
	ask := func(topic, id string) *dataplane.Job {
		t.Helper()
		mustEnqueue(t, e.env, topic, dataplane.NewJob{ID: id})
		cl, err := e.c.Claim(ctx, topic, 1, time.Hour)
		if err != nil || len(cl.Jobs) != 1 {
			t.Fatalf("claim %s: %+v, %v", topic, cl, err)
		}
		if _, _, err := e.c.CancelRunning(ctx, led, topic, id); err != nil {
			t.Fatal(err)
		}
		return cl.Jobs[0]
	}
	released := ask("released", "r1")
	if n, err := e.c.Release(ctx, []dataplane.Ref{released.Ref()}); err != nil || n != 1 {
		t.Fatalf("release: %d, %v", n, err)
	}
	buried := ask("requeued", "q1")
	if _, _, err := e.c.Bury(ctx, []dataplane.DeadJob{{Job: buried, Error: "failed for good before the ask arrived"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.c.RequeueDead(ctx, "requeued", "q1"); err != nil {
		t.Fatal(err)
	}

	var ranReleased testenv.Counter
	causes := make(chan error, 1)
	obs := &cancelCounts{}
	w := newWorker(t, e, dataplane.WorkerConfig{Observer: obs})
	for topic, h := range map[string]dataplane.HandlerFunc{
		"released": func(context.Context, *dataplane.Job) error { ranReleased.Add(1); return nil },
		"requeued": func(ctx context.Context, _ *dataplane.Job) error { causes <- context.Cause(ctx); return nil },
	} {
		if err := w.Handle(topic, h, dataplane.TopicConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	startWorker(t, w)
	if cause := testenv.Receive(ctx, t, causes, "the requeued job to run"); cause != nil {
		t.Errorf("the requeued job ran with its context ended by %v: an old ask cancelled its new run", cause)
	}
	testenv.WaitFor(ctx, t, "both settled", func() bool { return obs.cancelled.Load()+ranReleased.Load() > 0 && obs.completed.Load() > 0 })
	if n, c := ranReleased.Load(), obs.cancelled.Load(); n != 0 || c != 1 {
		t.Errorf("the released job ran %d times and %d settled cancelled; want 0 and 1", n, c)
	}
}

// TestCancelAskMissedByTheWorker: an ask whose message the holding worker
// never got (here the mark alone is written, as a worker whose
// subscription was down would see it) is noticed by its heartbeat: the
// lease renewal reports the mark and the handler's context is cancelled.
func TestCancelAskMissedByTheWorker(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	started := make(chan *dataplane.Job, 1)
	causes := make(chan error, 1)
	w := newWorker(t, e, dataplane.WorkerConfig{})
	if err := w.Handle("orders", dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		started <- j
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	}), dataplane.TopicConfig{Lease: 3 * time.Second, Heartbeat: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	mustEnqueue(t, e.env, "orders", dataplane.NewJob{ID: "o1"})
	j := testenv.Receive(ctx, t, started, "the handler to start")
	// The mark as cancelrun.lua writes it, without its message.
	if err := e.rdb.HSet(ctx, e.ns+":{orders}:cancel", "o1", fmt.Sprintf("%d|%d", j.EnqueuedAt, time.Now().UnixMilli())).Err(); err != nil {
		t.Fatal(err)
	}
	if cause := testenv.Receive(ctx, t, causes, "the heartbeat to cancel the run"); !errors.Is(cause, dataplane.ErrCancelRequested) {
		t.Fatalf("the handler's context ended with %v, want ErrCancelRequested", cause)
	}
}

package dataplane_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
)

// claimRecord claims one job of topic and records it, as a worker does.
func claimRecord(t *testing.T, e wenv, topic, id string) *dataplane.Job {
	t.Helper()
	j := claimOne(t, e.env, topic, id, time.Minute)
	if err := ledgerops.Of(e.led).Record(testenv.Context(t), []*dataplane.Job{j}, "w:1"); err != nil {
		t.Fatal(err)
	}
	return j
}

// failRetry fails a held job into a retry due at runAt, in both stores, as
// the worker does.
func failRetry(t *testing.T, e wenv, j *dataplane.Job, runAt int64) {
	t.Helper()
	ctx := testenv.Context(t)
	if err := ledgerops.Of(e.led).MarkRetrying(ctx, []dataplane.RetryRequest{{Ref: j.Ref(), RunAt: runAt, LeaseUntil: runAt + 60_000, Error: "x"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Retry(ctx, []dataplane.RetryRequest{{Ref: j.Ref(), RunAt: runAt, Error: "x"}}); err != nil {
		t.Fatal(err)
	}
}

// hasRow reports whether the ledger holds a row of topic/id.
func hasRow(t *testing.T, e wenv, topic, id string) bool {
	t.Helper()
	_, err := e.led.Row(testenv.Context(t), topic, id)
	if err != nil && !errors.Is(err, ledger.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

func TestCancel(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	later := time.Now().Add(time.Hour).UnixMilli()

	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "waiting", Payload: []byte("w"), Delay: time.Hour})
	j, err := e.c.Cancel(ctx, ledgerops.Of(e.led), "t", "waiting")
	if err != nil || j.ID != "waiting" || string(j.Payload) != "w" || j.Attempt != 0 {
		t.Fatalf("cancel = %+v, %v", j, err)
	}
	if info := mustGet(t, e.env, "t", "waiting"); info.State != dataplane.StateUnknown {
		t.Fatalf("cancelled job is %s", info.State)
	}
	if _, err := e.c.Cancel(ctx, ledgerops.Of(e.led), "t", "waiting"); !errors.Is(err, dataplane.ErrNotFound) {
		t.Fatalf("second cancel: %v, want ErrNotFound", err)
	}

	// Held by a worker, then dead: refused, and the row stays.
	held := claimRecord(t, e, "t", "held")
	if _, err := e.c.Cancel(ctx, ledgerops.Of(e.led), "t", "held"); !errors.Is(err, dataplane.ErrInFlight) {
		t.Fatalf("cancel in flight: %v, want ErrInFlight", err)
	}
	if !hasRow(t, e, "t", "held") {
		t.Fatal("the running job lost its row")
	}
	if _, _, err := e.c.Bury(ctx, []dataplane.DeadJob{{Job: held, Error: "r"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Cancel(ctx, ledgerops.Of(e.led), "t", "held"); !errors.Is(err, dataplane.ErrDead) {
		t.Fatalf("cancel dead: %v, want ErrDead", err)
	}

	// Waiting for a retry: the row goes too, or a recovery run would bring
	// the job back.
	failRetry(t, e, claimRecord(t, e, "t", "retrying"), later)
	if j, err := e.c.Cancel(ctx, ledgerops.Of(e.led), "t", "retrying"); err != nil || j.Attempt != 1 || j.LastError != "x" {
		t.Fatalf("cancel retrying = %+v, %v", j, err)
	}
	if hasRow(t, e, "t", "retrying") || mustGet(t, e.env, "t", "retrying").State != dataplane.StateUnknown {
		t.Fatal("the cancelled retrying job left a trace")
	}

	if _, err := e.c.Cancel(ctx, ledgerops.Of(e.led), "bad topic", "x"); !errors.Is(err, dataplane.ErrInvalidTopic) {
		t.Fatalf("bad topic: %v", err)
	}
	if _, err := e.c.Cancel(ctx, nil, "t", "x"); err == nil {
		t.Fatal("cancel without a ledger succeeded")
	}
}

// A job Redis has no trace of but the ledger holds (Redis lost it): a row
// waiting for a retry is cancelled from the row; one a worker holds is not.
func TestCancelJobRedisLost(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	later := time.Now().Add(time.Hour).UnixMilli()
	failRetry(t, e, claimRecord(t, e, "t", "lost-retrying"), later)
	claimRecord(t, e, "t", "lost-running")
	if err := e.rdb.Del(ctx, e.ns+":{t}:due", e.ns+":{t}:lease", e.ns+":{t}:job").Err(); err != nil {
		t.Fatal(err)
	}

	j, err := e.c.Cancel(ctx, ledgerops.Of(e.led), "t", "lost-retrying")
	if err != nil || j.Attempt != 1 || j.RunAt != later || j.LastError != "x" || string(j.Payload) != "p-lost-retrying" {
		t.Fatalf("cancel of a lost retrying job = %+v, %v", j, err)
	}
	if hasRow(t, e, "t", "lost-retrying") {
		t.Fatal("its row is still there")
	}
	if _, err := e.c.Cancel(ctx, ledgerops.Of(e.led), "t", "lost-running"); !errors.Is(err, dataplane.ErrInFlight) {
		t.Fatalf("cancel of a lost running job: %v, want ErrInFlight", err)
	}
	if !hasRow(t, e, "t", "lost-running") {
		t.Fatal("the running job lost its row")
	}
}

// hookLedger runs before on the first CancelRows call (Cancel's delete of
// the row), once.
type hookLedger struct {
	dataplane.Ledger
	before func()
}

func (h *hookLedger) CancelRows(ctx context.Context, refs []dataplane.Ref) error {
	if f := h.before; f != nil {
		h.before = nil
		f()
	}
	return h.Ledger.CancelRows(ctx, refs)
}

// A job claimed, failed and retried between Cancel's look at Redis and its
// Redis step waits at a newer attempt with a newer row: Cancel looks again
// and removes both, rather than the Redis entries alone.
func TestCancelJobRetriedMeanwhile(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	later := time.Now().Add(time.Hour).UnixMilli()
	first := claimRecord(t, e, "t", "j")
	failRetry(t, e, first, time.Now().Add(-time.Second).UnixMilli())
	led := &hookLedger{Ledger: ledgerops.Of(e.led), before: func() {
		c := mustClaim(t, e.env, "t", 1, time.Minute)
		if len(c.Jobs) != 1 || c.Jobs[0].Attempt != 2 {
			t.Fatalf("claim again: %+v", c.Jobs)
		}
		if err := ledgerops.Of(e.led).Record(ctx, c.Jobs, "w:2"); err != nil {
			t.Fatal(err)
		}
		failRetry(t, e, c.Jobs[0], later)
	}}
	j, err := e.c.Cancel(ctx, led, "t", "j")
	if err != nil || j.Attempt != 2 {
		t.Fatalf("cancel = %+v, %v; want attempt 2 cancelled", j, err)
	}
	if hasRow(t, e, "t", "j") || mustGet(t, e.env, "t", "j").State != dataplane.StateUnknown {
		t.Fatal("the job retried meanwhile left a trace")
	}
}

// failingCancel is a ledger whose cancel writes (the row's delete with
// its history, or the history of a job without a row) fail.
type failingCancel struct{ dataplane.Ledger }

func (failingCancel) CancelRows(context.Context, []dataplane.Ref) error {
	return errors.New("sql is down")
}

func (failingCancel) Cancelled(context.Context, []*dataplane.Job) error {
	return errors.New("sql is down")
}

// A ledger that fails before the Redis step leaves the job waiting, whole,
// and says which store failed: a retrying job (its row's delete fails)
// and a first run of a redis topic (its history row's insert fails).
func TestCancelLedgerFails(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	failRetry(t, e, claimRecord(t, e, "t", "j"), time.Now().Add(time.Hour).UnixMilli())
	if _, err := e.c.Cancel(ctx, failingCancel{ledgerops.Of(e.led)}, "t", "j"); !errors.Is(err, dataplane.ErrLedger) {
		t.Fatalf("cancel: %v, want ErrLedger", err)
	}
	if mustGet(t, e.env, "t", "j").State != dataplane.StateRetrying || !hasRow(t, e, "t", "j") {
		t.Fatal("a failed cancel changed the job")
	}
	if _, err := e.c.Enqueue(ctx, "t", dataplane.NewJob{ID: "first", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Cancel(ctx, failingCancel{ledgerops.Of(e.led)}, "t", "first"); !errors.Is(err, dataplane.ErrLedger) {
		t.Fatalf("cancel of a first run: %v, want ErrLedger", err)
	}
	if mustGet(t, e.env, "t", "first").State != dataplane.StateWaiting {
		t.Fatal("a failed cancel of a first run changed the job")
	}
}

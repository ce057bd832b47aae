package dataplane_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
)

// durableT is the durable topic of the worker tests.
const durableT = "dur"

// newDurableWEnv is newWEnv with durableT durable, its rows in the test's
// ledger.
func newDurableWEnv(t *testing.T) wenv {
	t.Helper()
	e := newWEnv(t)
	c, err := dataplane.New(e.rdb, dataplane.Config{Namespace: e.ns, Store: e.led,
		TopicDurability: map[string]dataplane.Durability{durableT: dataplane.DurabilityDurable}})
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	return e
}

// row returns a job's ledger row, or ok false when it has none.
func (e wenv) row(t *testing.T, id string) (ledger.Entry, bool) {
	t.Helper()
	r, err := e.led.Row(testenv.Context(t), durableT, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return r, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return r, true
}

// Claim marks a durable topic's jobs Durable, and a redis topic's not, so
// that the ledger records the claims of durable jobs with one UPDATE of
// their waiting rows: whatever wraps the ledger passes the jobs on.
func TestDurableClaimIsRecordedByUpdate(t *testing.T) {
	e := newDurableWEnv(t)
	ctx := testenv.Context(t)
	var last int64
	for _, id := range []string{"a", "b"} {
		last = mustEnqueue(t, e.env, durableT, dataplane.NewJob{ID: id, MaxAttempts: 3}).RunAt
	}
	mustEnqueue(t, e.env, "plain", dataplane.NewJob{ID: "c"})
	waitRedisPast(t, e.env, last)
	c := mustClaim(t, e.env, durableT, 10, time.Minute)
	p := mustClaim(t, e.env, "plain", 10, time.Minute)
	if len(c.Jobs) != 2 || len(p.Jobs) != 1 {
		t.Fatalf("claimed %d durable and %d redis-topic jobs, want 2 and 1", len(c.Jobs), len(p.Jobs))
	}
	for _, j := range c.Jobs {
		if !j.Durable {
			t.Errorf("%s of durable topic %s claimed without Durable", j.ID, durableT)
		}
	}
	if p.Jobs[0].Durable {
		t.Error("a redis topic's job claimed as Durable")
	}
	log := &testenv.StatementLog{}
	led, err := ledger.New(e.db.Session(&gorm.Session{Logger: log}), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ledgerops.Of(led).Record(ctx, c.Jobs, "w:1"); err != nil {
		t.Fatal(err)
	}
	if v := testenv.Verbs(log.Take()); fmt.Sprint(v) != "[UPDATE]" {
		t.Errorf("Record of the durable claims ran %v, want one UPDATE", v)
	}
	for _, j := range c.Jobs {
		if r, ok := e.row(t, j.ID); !ok || r.State != dataplane.StateInFlight || r.Attempt != 1 || r.Worker != "w:1" {
			t.Errorf("%s after the claim's record: %+v %v", j.ID, r, ok)
		}
	}
}

// A durable job's row lives from its enqueue to its end: scheduled, in
// progress while its handler runs (the claim's Record rewrites it),
// retrying between attempts, gone once it succeeded or died (archived).
func TestDurableJobRowFollowsItsLife(t *testing.T) {
	e := newDurableWEnv(t)
	ctx := testenv.Context(t)
	for _, id := range []string{"ok", "flaky", "doomed"} {
		mustEnqueue(t, e.env, durableT, dataplane.NewJob{ID: id, Payload: []byte(`{}`), MaxAttempts: 3})
		if r, ok := e.row(t, id); !ok || r.State != dataplane.StateWaiting || r.Attempt != 0 {
			t.Fatalf("%s after enqueue: %+v %v", id, r, ok)
		}
	}
	type seen struct {
		id    string
		state dataplane.State
		att   int
	}
	during := make(chan seen, 10)
	retried := make(chan struct{})
	obs := &settled{}
	w := newWorker(t, e, dataplane.WorkerConfig{Observer: obs})
	err := w.Handle(durableT, dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		r, _ := e.led.Row(ctx, durableT, j.ID)
		during <- seen{j.ID, r.State, r.Attempt}
		switch {
		case j.ID == "flaky" && j.Attempt == 1:
			// An hour: the test reads the retrying row, then moves the
			// retry to now (a short backoff let a loaded host claim it
			// again before the test looked).
			return dataplane.RetryAfter(errors.New("not yet"), time.Hour)
		case j.ID == "flaky":
			<-retried // the test looked at the retrying row
		case j.ID == "doomed":
			return dataplane.SkipRetry(errors.New("never"))
		}
		return nil
	}), dataplane.TopicConfig{})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	obs.retried.WaitAtLeast(ctx, t, 1, "flaky's retry settled")
	if r, ok := e.row(t, "flaky"); !ok || r.State != dataplane.StateRetrying || r.Attempt != 1 || r.LastError != "not yet" {
		t.Fatalf("flaky between attempts: %+v %v", r, ok)
	}
	close(retried)
	if _, err := e.c.Reschedule(ctx, ledgerops.Of(e.led), durableT, "flaky", dataplane.RescheduleIn(0)); err != nil {
		t.Fatal(err)
	}
	obs.completed.WaitAtLeast(ctx, t, 2, "two jobs completed")
	obs.dead.WaitAtLeast(ctx, t, 1, "doomed dead")
	close(during)
	for s := range during {
		if s.state != dataplane.StateInFlight || s.att < 1 {
			t.Errorf("%s's row while its handler ran: %s attempt %d", s.id, s.state, s.att)
		}
	}
	if n, err := e.led.Count(ctx); err != nil || n != 0 {
		t.Fatalf("ledger rows at the end: %d %v", n, err)
	}
	dead, err := e.led.DeadLetters(ctx, durableT, 0, math.MaxInt64, 10)
	if err != nil || len(dead) != 1 || dead[0].JobID != "doomed" {
		t.Fatalf("dead letters: %+v %v", dead, err)
	}
}

// Jobs handed back at shutdown (here: cut off by the shutdown timeout)
// keep their rows, back to scheduled with the attempt
// given back: the row is a durable job's only durable copy.
func TestDurableReleaseHandsTheRowBack(t *testing.T) {
	e := newDurableWEnv(t)
	ctx := testenv.Context(t)
	for _, id := range []string{"a", "b", "c", "d"} {
		mustEnqueue(t, e.env, durableT, dataplane.NewJob{ID: id})
	}
	started := make(chan struct{}, 4)
	obs := &settled{}
	w := newWorker(t, e, dataplane.WorkerConfig{Observer: obs, ShutdownTimeout: 100 * time.Millisecond})
	err := w.Handle(durableT, dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		started <- struct{}{}
		<-ctx.Done() // runs until the shutdown timeout cuts it off
		return ctx.Err()
	}), dataplane.TopicConfig{Concurrency: 4, BatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	stop := startWorker(t, w)
	for range 4 {
		<-started
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		if r, ok := e.row(t, id); !ok || r.State != dataplane.StateInFlight || r.Attempt != 1 {
			t.Fatalf("%s while running: %+v %v", id, r, ok)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		r, ok := e.row(t, id)
		if !ok || r.State != dataplane.StateWaiting || r.Attempt != 0 || r.LeaseUntil != ledger.NeverStale {
			t.Errorf("%s after shutdown: %+v %v; want scheduled, attempt 0", id, r, ok)
		}
		info, err := e.c.Get(ctx, durableT, id)
		if err != nil || info.State != dataplane.StateWaiting || info.Job.Attempt != 0 {
			t.Errorf("%s in Redis after shutdown: %+v %v", id, info, err)
		}
	}
}

// A dead job of a durable topic requeued is a new scheduled row, then due
// in Redis, where the dead envelope was.
func TestDurableRequeueDeadWritesTheRowFirst(t *testing.T) {
	e := newDurableWEnv(t)
	ctx := testenv.Context(t)
	mustEnqueue(t, e.env, durableT, dataplane.NewJob{ID: "x", Payload: []byte(`{"n":1}`), MaxAttempts: 2})
	cl := mustClaim(t, e.env, durableT, 1, time.Minute)
	if err := ledgerops.Of(e.led).Bury(ctx, []dataplane.DeadJob{{Job: cl.Jobs[0], Error: "boom"}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.c.Bury(ctx, []dataplane.DeadJob{{Job: cl.Jobs[0], Error: "boom"}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.row(t, "x"); ok {
		t.Fatal("a dead job kept its row")
	}
	if err := e.c.RequeueDead(ctx, durableT, "x"); err != nil {
		t.Fatal(err)
	}
	r, ok := e.row(t, "x")
	if !ok || r.State != dataplane.StateWaiting || string(r.Payload) != `{"n":1}` || r.MaxAttempts != 2 {
		t.Fatalf("row after requeue: %+v %v", r, ok)
	}
	info, err := e.c.Get(ctx, durableT, "x")
	if err != nil || info.State != dataplane.StateWaiting || info.Job.Attempt != 0 || string(info.Job.Payload) != `{"n":1}` {
		t.Fatalf("Redis after requeue: %+v %v", info, err)
	}
}

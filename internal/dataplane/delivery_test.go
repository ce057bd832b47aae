package dataplane_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// runsField reads a job's field of the topic's runs HASH (0 when absent)
// and the hash's length.
func runsField(t *testing.T, e env, topic, id string) (n, fields int64) {
	t.Helper()
	ctx := testenv.Context(t)
	key := e.ns + ":{" + topic + "}:runs"
	n, err := e.rdb.HGet(ctx, key, id).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	fields, err = e.rdb.HLen(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n, fields
}

// Job.Delivery counts runs that ended with an answer, not claims: a claim
// lost to a dead worker spends an attempt but is no delivery, a retried
// failure is one. The count goes with the job when it is acked, buried or
// cancelled, so the HASH holds only live jobs that failed before.
func TestDeliveryCountsRunsNotClaims(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "j", MaxAttempts: 9})
		claim := func(want, wantDelivery int, lease time.Duration) *dataplane.Job {
			t.Helper()
			c := mustClaim(t, e, "t", 1, lease)
			if len(c.Jobs) != 1 {
				t.Fatalf("claimed %v, want j", ids(c.Jobs))
			}
			j := c.Jobs[0]
			if j.Attempt != want || j.Delivery != wantDelivery {
				t.Fatalf("claim: attempt %d delivery %d, want %d and %d", j.Attempt, j.Delivery, want, wantDelivery)
			}
			return j
		}
		retry := func(j *dataplane.Job) {
			t.Helper()
			if _, err := e.c.Retry(ctx, []dataplane.RetryRequest{{Ref: j.Ref(), RunAt: 1, Error: "boom"}}); err != nil {
				t.Fatal(err)
			}
		}
		lose := func(j *dataplane.Job) { t.Helper(); waitRedisPast(t, e, j.LeaseUntil) }

		j := claim(1, 1, time.Millisecond)
		lose(j) // the worker died before its handler answered
		j = claim(2, 1, time.Minute)
		retry(j) // this run failed: one delivery ended
		if n, _ := runsField(t, e, "t", "j"); n != 1 {
			t.Fatalf("runs after one failed run: %d, want 1", n)
		}
		j = claim(3, 2, time.Millisecond)
		lose(j)
		j = claim(4, 2, time.Minute)
		// A stale claim's retry (fenced by attempt) counts nothing.
		if _, err := e.c.Retry(ctx, []dataplane.RetryRequest{{Ref: dataplane.Ref{Topic: "t", ID: "j", Attempt: 3}, RunAt: 1, Error: "late"}}); err != nil {
			t.Fatal(err)
		}
		retry(j)
		j = claim(5, 3, time.Minute)
		if n, err := e.c.Ack(ctx, []dataplane.Ref{j.Ref()}); err != nil || n != 1 {
			t.Fatalf("ack: %d %v", n, err)
		}
		if _, fields := runsField(t, e, "t", "j"); fields != 0 {
			t.Fatalf("runs HASH keeps %d fields after the ack, want none", fields)
		}

		// Enqueued again under the same id, it starts from 1.
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "j", MaxAttempts: 2})
		retry(claim(1, 1, time.Minute))
		j = claim(2, 2, time.Minute)
		if n, _, err := e.c.Bury(ctx, []dataplane.DeadJob{{Job: j, Error: "for good"}}); err != nil || n != 1 {
			t.Fatalf("bury: %d %v", n, err)
		}
		if _, fields := runsField(t, e, "t", "j"); fields != 0 {
			t.Fatalf("runs HASH keeps %d fields after the burial, want none", fields)
		}
		// Requeued from the dead, its count starts again.
		if err := e.c.RequeueDead(ctx, "t", "j"); err != nil {
			t.Fatal(err)
		}
		claim(1, 1, time.Minute)
	})
}

// A poison job buried by the claim (its claims ran out, each worker died)
// and a retried job cancelled while it waits leave no runs field behind.
func TestDeliveryCountGoesWithTheJob(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "poison", MaxAttempts: 2})
		c := mustClaim(t, e, "t", 1, time.Minute)
		if _, err := e.c.Retry(ctx, []dataplane.RetryRequest{{Ref: c.Jobs[0].Ref(), RunAt: 1, Error: "x"}}); err != nil {
			t.Fatal(err)
		}
		c = mustClaim(t, e, "t", 1, time.Millisecond)
		if len(c.Jobs) != 1 || c.Jobs[0].Delivery != 2 {
			t.Fatalf("second claim: %+v", c.Jobs)
		}
		waitRedisPast(t, e, c.Jobs[0].LeaseUntil)
		if c = mustClaim(t, e, "t", 1, time.Minute); len(c.Buried) != 1 {
			t.Fatalf("third claim buried %v, want poison", ids(c.Buried))
		}
		if _, fields := runsField(t, e, "t", "poison"); fields != 0 {
			t.Fatalf("runs HASH keeps %d fields after the claim buried the job", fields)
		}

		led := sqliteLedger(t)
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "waits", MaxAttempts: 5})
		c = mustClaim(t, e, "t", 1, time.Minute)
		if _, err := e.c.Retry(ctx, []dataplane.RetryRequest{{Ref: c.Jobs[0].Ref(), Delay: time.Hour, Error: "x"}}); err != nil {
			t.Fatal(err)
		}
		if n, _ := runsField(t, e, "t", "waits"); n != 1 {
			t.Fatalf("runs of waits: %d, want 1", n)
		}
		if _, err := e.c.Cancel(ctx, ledgerops.Of(led), "t", "waits"); err != nil && !errors.Is(err, dataplane.ErrNotFound) {
			t.Fatal(err)
		}
		if _, fields := runsField(t, e, "t", "waits"); fields != 0 {
			t.Fatalf("runs HASH keeps %d fields after the cancel", fields)
		}
	})
}

// A worker's handler sees Delivery 1 on its first call even though a worker
// that claimed the job before died (Attempt 2), and 2 after a failure.
func TestWorkerHandlerSeesDelivery(t *testing.T) {
	e := newWEnv(t)
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "j", MaxAttempts: 5})
	dead := mustClaim(t, e.env, "t", 1, time.Millisecond) // a worker that died holding it
	waitRedisPast(t, e.env, dead.Jobs[0].LeaseUntil)

	type call struct{ attempt, delivery int }
	calls := make(chan call, 4)
	w := newWorker(t, e, dataplane.WorkerConfig{})
	if err := w.Handle("t", dataplane.HandlerFunc(func(_ context.Context, j *dataplane.Job) error {
		calls <- call{j.Attempt, j.Delivery}
		if j.Delivery == 1 {
			return dataplane.RetryAfter(errors.New("first call fails"), time.Millisecond)
		}
		return nil
	}), dataplane.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	ctx := testenv.Context(t)
	for _, want := range []call{{2, 1}, {3, 2}} {
		select {
		case got := <-calls:
			if got != want {
				t.Fatalf("handler called with attempt %d delivery %d, want %d and %d", got.attempt, got.delivery, want.attempt, want.delivery)
			}
		case <-ctx.Done():
			t.Fatalf("handler not called with attempt %d", want.attempt)
		}
	}
}

// A handler's recorded result reaches its job's history row through the
// worker's batched completion; a failed run's result is dropped with it.
func TestWorkerKeepsHandlerResult(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "with", MaxAttempts: 5})
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "without", MaxAttempts: 5})
	obs := &settled{}
	w := newWorker(t, e, dataplane.WorkerConfig{Observer: obs})
	if err := w.Handle("t", dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		if j.ID == "without" {
			return nil
		}
		if err := queue.RecordResult(ctx, map[string]int{"delivery": j.Delivery}); err != nil {
			return err
		}
		if j.Delivery == 1 {
			return dataplane.RetryAfter(errors.New("first run fails"), time.Millisecond)
		}
		return nil
	}), dataplane.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	obs.completed.WaitAtLeast(ctx, t, 2, "both jobs completed")
	for id, want := range map[string]string{"with": `{"delivery":2}`, "without": ""} {
		rows, _, err := e.led.History(ctx, ledger.HistoryFilter{Topic: "t", ID: id, Limit: 5})
		if err != nil || len(rows) != 1 {
			t.Fatalf("history of %s: %+v %v", id, rows, err)
		}
		if got := string(rows[0].Result); got != want {
			t.Errorf("history of %s: result %q, want %q", id, got, want)
		}
	}
}

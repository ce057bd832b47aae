package queue_test

import (
	"errors"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

func TestCancel(t *testing.T) {
	forEachBackend(t, queue.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		mustEnqueue(t, e, "t", queue.NewJob{ID: "waiting", Payload: []byte("w"), Delay: time.Hour})
		j, err := e.c.Cancel(ctx, "t", "waiting")
		if err != nil || j.ID != "waiting" || string(j.Payload) != "w" || j.Attempt != 0 {
			t.Fatalf("cancel = %+v, %v", j, err)
		}
		if info := mustGet(t, e, "t", "waiting"); info.State != queue.StateUnknown {
			t.Fatalf("cancelled job is %s", info.State)
		}
		if _, err := e.c.Cancel(ctx, "t", "waiting"); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("second cancel: %v, want ErrNotFound", err)
		}
		held := claimOne(t, e, "t", "held", time.Minute)
		if _, err := e.c.Cancel(ctx, "t", "held"); !errors.Is(err, queue.ErrInFlight) {
			t.Fatalf("cancel in flight: %v, want ErrInFlight", err)
		}
		if _, _, err := e.c.Bury(ctx, []queue.BuryRequest{{Ref: held.Ref(), Reason: "r"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.Cancel(ctx, "t", "held"); !errors.Is(err, queue.ErrDead) {
			t.Fatalf("cancel dead: %v, want ErrDead", err)
		}
		// A job waiting for a retry reports its attempt, so the caller
		// knows a ledger row exists.
		r := claimOne(t, e, "t", "retrying", time.Minute)
		if _, err := e.c.Retry(ctx, []queue.RetryRequest{{Ref: r.Ref(), Delay: time.Hour, Error: "x"}}); err != nil {
			t.Fatal(err)
		}
		if j, err := e.c.Cancel(ctx, "t", "retrying"); err != nil || j.Attempt != 1 {
			t.Fatalf("cancel retrying = %+v, %v", j, err)
		}
		if _, err := e.c.Cancel(ctx, "bad topic", "x"); !errors.Is(err, queue.ErrInvalidTopic) {
			t.Fatalf("bad topic: %v", err)
		}
	})
}

func TestGetUnknown(t *testing.T) {
	forEachBackend(t, queue.Config{}, func(t *testing.T, e env) {
		if info := mustGet(t, e, "t", "nope"); info.State != queue.StateUnknown || info.Job != nil {
			t.Fatalf("unknown job: %+v", info)
		}
	})
}

func TestStats(t *testing.T) {
	forEachBackend(t, queue.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		st, err := e.c.Stats(ctx, "empty")
		if err != nil || st.Due != 0 || st.NextDue != 0 || st.OldestOverdueMs != 0 {
			t.Fatalf("empty topic stats %+v, %v", st, err)
		}
		mustEnqueue(t, e, "t", queue.NewJob{ID: "a"})
		mustEnqueue(t, e, "t", queue.NewJob{ID: "b"})
		mustEnqueue(t, e, "t", queue.NewJob{ID: "c", Delay: time.Hour})
		if c := mustClaim(t, e, "t", 1, time.Minute); len(c.Jobs) != 1 || c.Jobs[0].ID != "a" {
			t.Fatalf("claimed %v", c.Jobs)
		}
		mustEnqueue(t, e, "t", queue.NewJob{ID: "d"})
		next := mustGet(t, e, "t", "b").Score
		waitRedisPast(t, e, next+5)
		st, err = e.c.Stats(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		if st.Due != 3 || st.DueNow != 2 || st.InFlight != 1 || st.Dead != 0 {
			t.Fatalf("stats %+v", st)
		}
		if st.OldestOverdueMs < 5 || st.OldestOverdueMs != st.Now-st.NextDue {
			t.Fatalf("oldest overdue %d ms (now %d, next due %d)", st.OldestOverdueMs, st.Now, st.NextDue)
		}
	})
}

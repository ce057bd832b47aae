package dataplane_test

import (
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
)

// claimOne enqueues id due now and claims it.
func claimOne(t *testing.T, e env, topic, id string, lease time.Duration) *dataplane.Job {
	t.Helper()
	mustEnqueue(t, e, topic, dataplane.NewJob{ID: id, Payload: []byte("p-" + id), MaxAttempts: 3})
	c := mustClaim(t, e, topic, 1, lease)
	if len(c.Jobs) != 1 || c.Jobs[0].ID != id {
		t.Fatalf("claim of %s got %v", id, ids(c.Jobs))
	}
	return c.Jobs[0]
}

func TestAckRemovesEveryTrace(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		a := claimOne(t, e, "t1", "a", time.Minute)
		b := claimOne(t, e, "t2", "b", time.Minute)
		n, err := e.c.Ack(testenv.Context(t), []dataplane.Ref{a.Ref(), b.Ref(), {Topic: "t1", ID: "never", Attempt: 1}})
		if err != nil || n != 2 {
			t.Fatalf("ack = %d, %v; want 2 across two topics", n, err)
		}
		for _, k := range keysOf(t, e) {
			if k != e.ns+":topics" {
				t.Fatalf("key %s left after ack", k)
			}
		}
	})
}

func TestAckIsFencedByAttempt(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		old := claimOne(t, e, "t", "j", time.Millisecond)
		waitRedisPast(t, e, old.LeaseUntil)
		c := mustClaim(t, e, "t", 1, time.Minute) // another worker takes it over
		if len(c.Jobs) != 1 || c.Jobs[0].Attempt != 2 {
			t.Fatalf("takeover claim %v", c.Jobs)
		}
		if n, _ := e.c.Ack(testenv.Context(t), []dataplane.Ref{old.Ref()}); n != 0 {
			t.Fatal("a stale claim acked the job another worker holds")
		}
		if _, err := e.c.Retry(testenv.Context(t), []dataplane.RetryRequest{{Ref: old.Ref(), Error: "stale"}}); err != nil {
			t.Fatal(err)
		}
		if n, _, _ := e.c.Bury(testenv.Context(t), []dataplane.DeadJob{{Job: old, Error: "stale"}}); n != 0 {
			t.Fatal("a stale claim buried the job")
		}
		if n, _ := e.c.Release(testenv.Context(t), []dataplane.Ref{old.Ref()}); n != 0 {
			t.Fatal("a stale claim released the job")
		}
		if info := mustGet(t, e, "t", "j"); info.State != dataplane.StateInFlight || info.Job.Attempt != 2 || info.Job.LastError != "" {
			t.Fatalf("the new claim's job was touched: %+v %+v", info, info.Job)
		}
		if n, _ := e.c.Ack(testenv.Context(t), []dataplane.Ref{c.Jobs[0].Ref()}); n != 1 {
			t.Fatal("the owning claim could not ack")
		}
	})
}

// A claim whose lease expired but that nobody took over yet still owns the
// job: its ack removes it.
func TestAckAfterLeaseExpiredBeforeTakeover(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		j := claimOne(t, e, "t", "j", time.Millisecond)
		waitRedisPast(t, e, j.LeaseUntil)
		if n, err := e.c.Ack(testenv.Context(t), []dataplane.Ref{j.Ref()}); err != nil || n != 1 {
			t.Fatalf("ack = %d, %v", n, err)
		}
		if c := mustClaim(t, e, "t", 1, time.Minute); len(c.Jobs) != 0 {
			t.Fatalf("acked job handed out again: %v", ids(c.Jobs))
		}
	})
}

func TestReleaseDoesNotSpendAnAttempt(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		r := mustEnqueue(t, e, "t", dataplane.NewJob{ID: "j", MaxAttempts: 1})
		for i := 0; i < 3; i++ { // three releases of a 1-attempt job: still alive
			c := mustClaim(t, e, "t", 1, time.Minute)
			if len(c.Jobs) != 1 || c.Jobs[0].Attempt != 1 {
				t.Fatalf("round %d: claimed %v", i, c.Jobs)
			}
			if n, err := e.c.Release(testenv.Context(t), refs(c.Jobs)); err != nil || n != 1 {
				t.Fatalf("release = %d, %v", n, err)
			}
			info := mustGet(t, e, "t", "j")
			if info.State != dataplane.StateWaiting || info.Job.Attempt != 0 || info.Score != r.RunAt {
				t.Fatalf("after release: %s attempt %d score %d, want scheduled, 0, at its own due time %d",
					info.State, info.Job.Attempt, info.Score, r.RunAt)
			}
		}
	})
}

func TestRetrySchedulesWithError(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		j := claimOne(t, e, "t", "j", time.Minute)
		at, err := e.c.Retry(testenv.Context(t), []dataplane.RetryRequest{{Ref: j.Ref(), Delay: 2 * time.Second, Error: "db timeout"}})
		if err != nil || len(at) != 1 || at[0] == 0 {
			t.Fatalf("retry = %v, %v", at, err)
		}
		info := mustGet(t, e, "t", "j")
		if info.State != dataplane.StateRetrying || info.Score != at[0] || info.Job.RunAt != at[0] ||
			info.Job.LastError != "db timeout" || info.Job.Attempt != 1 || string(info.Job.Payload) != "p-j" {
			t.Fatalf("after retry: %+v %+v", info, info.Job)
		}
		if at[0]-j.LeaseUntil+60_000 < 2000 {
			t.Fatalf("retry due %d is less than 2 s after the claim (%d)", at[0], j.LeaseUntil-60_000)
		}
		// An absolute time works too, and the next claim bumps the attempt.
		c := mustClaim(t, e, "t", 1, time.Minute)
		if len(c.Jobs) != 0 {
			t.Fatal("claimed during backoff")
		}
		k := claimOne(t, e, "t", "k", time.Minute)
		past := time.Now().Add(-time.Hour).UnixMilli()
		at, _ = e.c.Retry(testenv.Context(t), []dataplane.RetryRequest{{Ref: k.Ref(), RunAt: past, Error: "e"}})
		c = mustClaim(t, e, "t", 1, time.Minute)
		if len(c.Jobs) != 1 || c.Jobs[0].ID != "k" || c.Jobs[0].Attempt != 2 || c.Jobs[0].RunAt != at[0] {
			t.Fatalf("retry at a past time: claimed %+v (due %d)", c.Jobs, at[0])
		}
	})
}

func TestBuryKeepsEnvelopeAndReason(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		j := claimOne(t, e, "t", "j", time.Minute)
		n, at, err := e.c.Bury(testenv.Context(t), []dataplane.DeadJob{{Job: j, Error: "permanent: no such order"}})
		if err != nil || n != 1 {
			t.Fatalf("bury = %d, %v", n, err)
		}
		info := mustGet(t, e, "t", "j")
		if info.State != dataplane.StateDead || info.Score != at || info.Job.LastError != "permanent: no such order" || string(info.Job.Payload) != "p-j" {
			t.Fatalf("dead job %+v %+v", info, info.Job)
		}
		if st, _ := e.c.Stats(testenv.Context(t), "t"); st.Dead != 1 || st.InFlight != 0 || st.Due != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}

func TestExtendOnlyLeasedAndNeverShorter(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		long := claimOne(t, e, "t", "long", time.Hour)
		short := claimOne(t, e, "t", "short", time.Second)
		done := claimOne(t, e, "t", "done", time.Second)
		if _, err := e.c.Ack(testenv.Context(t), []dataplane.Ref{done.Ref()}); err != nil {
			t.Fatal(err)
		}
		n, deadline, err := e.c.Extend(testenv.Context(t), []dataplane.Ref{long.Ref(), short.Ref(), done.Ref()}, time.Minute)
		if err != nil || n != 1 {
			t.Fatalf("extend = %d, %v; want only the short lease moved", n, err)
		}
		if info := mustGet(t, e, "t", "short"); info.Score != deadline || deadline < short.LeaseUntil+50_000 {
			t.Fatalf("short lease %d, want %d", info.Score, deadline)
		}
		if info := mustGet(t, e, "t", "long"); info.Score != long.LeaseUntil {
			t.Fatalf("long lease shortened from %d to %d", long.LeaseUntil, info.Score)
		}
		if info := mustGet(t, e, "t", "done"); info.State != dataplane.StateUnknown {
			t.Fatalf("extend resurrected an acked job: %s", info.State)
		}
	})
}

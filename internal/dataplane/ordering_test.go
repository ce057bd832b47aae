package dataplane_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// claimIDs claims up to n due jobs of topic and returns their ids sorted.
func claimIDs(t *testing.T, e env, topic string, n int) ([]string, []*dataplane.Job) {
	t.Helper()
	cl := mustClaim(t, e, topic, n, time.Minute)
	got := ids(cl.Jobs)
	slices.Sort(got)
	return got, cl.Jobs
}

// Jobs of one ordering key run one at a time, in due order, enqueue order
// among equal due times; other keys and jobs without one are not held
// back. The key is held through a retry and handed on by an ack, a
// burial and a cancel.
func TestOrderingOneAtATimeInDueOrder(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		for _, j := range []dataplane.NewJob{
			{ID: "x2", OrderingKey: "X", Delay: time.Hour},
			{ID: "a1", OrderingKey: "A"}, {ID: "a2", OrderingKey: "A"}, {ID: "a3", OrderingKey: "A", Priority: 3},
			{ID: "b1", OrderingKey: "B"}, {ID: "c1"},
			// due before x2, which has not started: it takes X
			{ID: "x1", OrderingKey: "X"},
		} {
			mustEnqueue(t, e, "t", j)
		}
		if info := mustGet(t, e, "t", "a2"); info.State != dataplane.StateWaiting || !info.Parked || info.Job.OrderingKey != "A" {
			t.Fatalf("a2: %s parked %v key %q", info.State, info.Parked, info.Job.OrderingKey)
		}
		if info := mustGet(t, e, "t", "x2"); !info.Parked || info.Score != info.Job.RunAt {
			t.Fatalf("x2: parked %v score %d run at %d", info.Parked, info.Score, info.Job.RunAt)
		}
		if st, err := e.c.Stats(ctx, "t"); err != nil || st.Parked != 3 || st.Due != 7 || st.DueNow != 4 {
			t.Fatalf("stats: %+v %v, want 3 parked of 7 due, 4 due now", st, err)
		}
		got, jobs := claimIDs(t, e, "t", 10)
		if !slices.Equal(got, []string{"a1", "b1", "c1", "x1"}) {
			t.Fatalf("claimed %v, want [a1 b1 c1 x1]", got)
		}
		byID := map[string]*dataplane.Job{}
		for _, j := range jobs {
			byID[j.ID] = j
		}
		if byID["a1"].OrderingKey != "A" || byID["c1"].OrderingKey != "" {
			t.Fatalf("claimed keys: a1 %q c1 %q", byID["a1"].OrderingKey, byID["c1"].OrderingKey)
		}
		// x1 succeeds: x2 takes X but is not due for an hour.
		if _, err := e.c.Ack(ctx, []dataplane.Ref{byID["x1"].Ref(), byID["b1"].Ref()}); err != nil {
			t.Fatal(err)
		}
		if info := mustGet(t, e, "t", "x2"); info.Parked {
			t.Fatal("x2 still parked after x1's ack")
		}
		if got, _ := claimIDs(t, e, "t", 10); len(got) != 0 {
			t.Fatalf("claimed %v while a1 runs", got)
		}
		// a1 fails and retries: it holds A.
		if _, err := e.c.Retry(ctx, []dataplane.RetryRequest{{Ref: byID["a1"].Ref(), Error: "x"}}); err != nil {
			t.Fatal(err)
		}
		got, jobs = claimIDs(t, e, "t", 10)
		if !slices.Equal(got, []string{"a1"}) {
			t.Fatalf("after a1's retry claimed %v, want [a1]", got)
		}
		// a1 dies: a2 takes A (due order wins over a3's priority).
		if _, _, err := e.c.Bury(ctx, []dataplane.DeadJob{{Job: jobs[0], Error: "boom"}}); err != nil {
			t.Fatal(err)
		}
		if got, jobs = claimIDs(t, e, "t", 10); !slices.Equal(got, []string{"a2"}) {
			t.Fatalf("after a1's death claimed %v, want [a2]", got)
		}
		// The dead a1 requeued waits behind a3.
		if err := e.c.RequeueDead(ctx, "t", "a1"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.Ack(ctx, refs(jobs)); err != nil {
			t.Fatal(err)
		}
		if got, jobs = claimIDs(t, e, "t", 10); !slices.Equal(got, []string{"a3"}) || jobs[0].Priority != 3 {
			t.Fatalf("after a2 claimed %v, want [a3] at priority 3", got)
		}
		if _, err := e.c.Ack(ctx, refs(jobs)); err != nil {
			t.Fatal(err)
		}
		if got, jobs = claimIDs(t, e, "t", 10); !slices.Equal(got, []string{"a1"}) {
			t.Fatalf("after a3 claimed %v, want [a1], requeued", got)
		}
		if _, err := e.c.Ack(ctx, refs(jobs)); err != nil {
			t.Fatal(err)
		}
		if st, err := e.c.Stats(ctx, "t"); err != nil || st.Parked != 0 || st.Due != 1 {
			t.Fatalf("stats at the end: %+v %v, want x2 alone", st, err)
		}
		for _, k := range keysOf(t, e) {
			if k == e.ns+":{t}:ohold" {
				if n, _ := e.rdb.HLen(ctx, k).Result(); n != 1 {
					t.Fatalf("ohold has %d keys, want X's alone", n)
				}
			}
		}
	})
}

// A cancelled or rescheduled job of a key keeps the key's order: a parked
// job cancelled leaves its place, a holder cancelled hands the key on, and
// a parked job rescheduled before a holder that has not started takes the
// key.
func TestOrderingCancelAndReschedule(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	l := ledgerops.Of(e.led)
	for _, j := range []dataplane.NewJob{
		{ID: "k1", OrderingKey: "K", Delay: time.Hour},
		{ID: "k2", OrderingKey: "K", Delay: 2 * time.Hour},
		{ID: "k3", OrderingKey: "K", Delay: 3 * time.Hour},
	} {
		mustEnqueue(t, e.env, "t", j)
	}
	if _, err := e.c.Cancel(ctx, l, "t", "k2"); err != nil {
		t.Fatal(err)
	}
	// k3 moved to now: before k1, which has not started, so it takes K.
	if _, err := e.c.Reschedule(ctx, l, "t", "k3", dataplane.RescheduleIn(0)); err != nil {
		t.Fatal(err)
	}
	if info := mustGet(t, e.env, "t", "k1"); !info.Parked {
		t.Fatal("k1 not parked behind k3")
	}
	got, _ := claimIDs(t, e.env, "t", 10)
	if !slices.Equal(got, []string{"k3"}) {
		t.Fatalf("claimed %v, want [k3]", got)
	}
	// A parked job rescheduled stays parked, at its new time.
	r, err := e.c.Reschedule(ctx, l, "t", "k1", dataplane.RescheduleIn(0))
	if err != nil {
		t.Fatal(err)
	}
	if info := mustGet(t, e.env, "t", "k1"); !info.Parked || !r.Parked || info.Score != r.RunAt || r.Job.OrderingKey != "K" {
		t.Fatalf("k1 after its reschedule: parked %v (answer %v) score %d, want %d; key %q", info.Parked, r.Parked, info.Score, r.RunAt, r.Job.OrderingKey)
	}
	// The holder cancelled while waiting (enqueue one more behind k1 first).
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "k4", OrderingKey: "K"})
	if got, _ := claimIDs(t, e.env, "t", 10); len(got) != 0 {
		t.Fatalf("claimed %v while k3 runs", got)
	}
}

// After Redis lost a key's state, the ledger keeps a key's jobs one at a
// time: a claim of the key's next job while another is in flight in the
// ledger is not recorded (GoneError.Held), and handed back to wait; the
// job in flight, restored from its row, takes the key back.
func TestOrderingLedgerHoldsAKeyAfterRedisLoss(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	l := ledgerops.Of(e.led)
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "a1", OrderingKey: "A"})
	cl := mustClaim(t, e.env, "t", 10, time.Minute)
	if err := l.Record(ctx, cl.Jobs, "w:1"); err != nil {
		t.Fatal(err)
	}
	// Redis loses everything; a2 comes (say, the relay's reload).
	wipeRedis(t, e.env)
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "a2", OrderingKey: "A"})
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "a3", OrderingKey: "A", Delay: time.Minute})
	cl = mustClaim(t, e.env, "t", 10, time.Minute)
	if !slices.Equal(ids(cl.Jobs), []string{"a2"}) {
		t.Fatalf("claimed %v, want [a2]", ids(cl.Jobs))
	}
	err := l.Record(ctx, cl.Jobs, "w:2")
	var gone *queue.GoneError
	if !errors.As(err, &gone) || len(gone.Held) != 1 || gone.Held[0].ID != "a2" || len(gone.Refs) != 0 {
		t.Fatalf("record of a2 while a1 is in flight in the ledger: %v, want a2 held", err)
	}
	if row, err := e.led.Row(ctx, "t", "a2"); err == nil {
		t.Fatalf("a2 recorded anyway: %+v", row)
	}
	if n, err := e.c.ReleaseLater(ctx, gone.Held, gone.HeldBy, time.Hour); err != nil || n != 1 {
		t.Fatalf("release later: %d %v", n, err)
	}
	// a2 waits an hour for its key, but a3, due after it, does not pass
	// it: the key goes by due times, not by the wait.
	if info := mustGet(t, e.env, "t", "a3"); !info.Parked {
		t.Fatal("a3 took the key from a2, which waits for a1")
	}
	// a1's worker dies: the recoverer restores its row, and a1 takes the
	// key back from a2, which has not started.
	row, err := e.led.Row(ctx, "t", "a1")
	if err != nil || row.OrderingKey != "A" {
		t.Fatalf("a1's row: %+v %v, want ordering key A", row, err)
	}
	if out, err := e.c.Restore(ctx, []dataplane.RestoreRow{row.RestoreRow()}, dataplane.RestoreOptions{}); err != nil || out[0] != dataplane.RestoreCreated {
		t.Fatalf("restore a1: %v %v", out, err)
	}
	if info := mustGet(t, e.env, "t", "a2"); !info.Parked {
		t.Fatal("a2 not parked behind the restored a1")
	}
	cl = mustClaim(t, e.env, "t", 10, time.Minute)
	if !slices.Equal(ids(cl.Jobs), []string{"a1"}) {
		t.Fatalf("claimed %v, want [a1]", ids(cl.Jobs))
	}
	if err := l.Record(ctx, cl.Jobs, "w:3"); err != nil {
		t.Fatalf("record of a1 again: %v", err)
	}
}

// On a topic of several partitions a key's jobs share one (the ordering
// key is the partition key). Across a raise of the partition count, a key
// held in the old layout keeps its new jobs there, behind the old ones,
// until it is free; a key free there goes to the new layout.
func TestOrderingAcrossAPartitionRaise(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		if _, err := e.c.SetPartitions(ctx, "pt", 2); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			mustEnqueue(t, e, "pt", dataplane.NewJob{ID: fmt.Sprintf("a%d", i), OrderingKey: "A"})
		}
		// A partition key other than the ordering key is refused.
		if res, err := e.c.EnqueueBatch(ctx, "pt", []dataplane.NewJob{
			{ID: "x", OrderingKey: "A", PartitionKey: "B"},
		}); err != nil || res[0].Status != dataplane.BatchInvalid || !errors.Is(res[0].Err, dataplane.ErrInvalidOrderingKey) {
			t.Fatalf("a partition key other than the ordering key: %+v %v", res, err)
		}
		old, err := e.c.Partitions(ctx, "pt") // the two, and the topic's own
		if err != nil || len(old) != 3 {
			t.Fatalf("partitions: %v %v", old, err)
		}
		if _, err := e.c.SetPartitions(ctx, "pt", 8); err != nil {
			t.Fatal(err)
		}
		// A is held in the old layout: a3 goes there, behind a0-a2; B,
		// never used, goes to the new one.
		if _, err := e.c.EnqueueBatch(ctx, "pt", []dataplane.NewJob{
			{ID: "a3", OrderingKey: "A"}, {ID: "b0", OrderingKey: "B"},
		}); err != nil {
			t.Fatal(err)
		}
		a3, b0 := mustGet(t, e, "pt", "a3"), mustGet(t, e, "pt", "b0")
		if !slices.Contains(old, a3.Job.Partition) || !a3.Parked {
			t.Fatalf("a3 in %q (parked %v), want parked in the old layout %v", a3.Job.Partition, a3.Parked, old)
		}
		if slices.Contains(old, b0.Job.Partition) {
			t.Fatalf("b0 in the old layout's %q", b0.Job.Partition)
		}
		// A's jobs run one at a time, in order, from the old partition.
		for i := range 4 {
			var got []*dataplane.Job
			names, _ := e.c.Partitions(ctx, "pt")
			for _, name := range names {
				for _, j := range mustClaim(t, e, name, 10, time.Minute).Jobs {
					if j.OrderingKey == "A" {
						got = append(got, j)
					} else if _, err := e.c.Ack(ctx, []dataplane.Ref{j.Ref()}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if len(got) != 1 || got[0].ID != fmt.Sprintf("a%d", i) {
				t.Fatalf("claim %d of A: %v, want [a%d]", i, ids(got), i)
			}
			if _, err := e.c.Ack(ctx, refs(got)); err != nil {
				t.Fatal(err)
			}
		}
		// A drained from the old layout: its next job goes to the new one.
		mustEnqueue(t, e, "pt", dataplane.NewJob{ID: "a4", OrderingKey: "A"})
		if a4 := mustGet(t, e, "pt", "a4"); slices.Contains(old, a4.Job.Partition) {
			t.Fatalf("a4 in the old layout's %q after A drained there", a4.Job.Partition)
		}
	})
}

// A job of a key restored from its ledger row in flight (its worker died
// and Redis lost the key) while the key's next job is being claimed: the
// claim is refused by the ledger and handed back, and the restored job,
// due before it, takes the key, whatever the time of its restore.
func TestOrderingRestoredJobPassesAClaimRefusedForIt(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	l := ledgerops.Of(e.led)
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "a1", OrderingKey: "A"})
	if err := l.Record(ctx, mustClaim(t, e.env, "t", 10, time.Minute).Jobs, "w:1"); err != nil {
		t.Fatal(err)
	}
	wipeRedis(t, e.env)
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "a2", OrderingKey: "A", RunAt: time.Now().Add(-time.Hour).UnixMilli()})
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "a3", OrderingKey: "A"})
	cl := mustClaim(t, e.env, "t", 10, time.Minute) // a2, in lease
	// a1 restored while a2 is in lease: parked, first in line.
	restoreRow(t, e, "t", "a1", dataplane.RestoreCreated)
	handBack(t, e, cl.Jobs, "w:2", "", time.Second)
	if got := ids(mustClaim(t, e.env, "t", 10, time.Minute).Jobs); !slices.Equal(got, []string{"a1"}) {
		t.Fatalf("claimed %v, want [a1], restored, before a2 and a3", got)
	}
}

// The same with a job retrying in the ledger, due again in an hour: the
// refused claim gives it the key back, and it keeps its retry time.
func TestOrderingRestoredRetryTakesItsKeyBack(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	l := ledgerops.Of(e.led)
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "a1", OrderingKey: "A"})
	j := mustClaim(t, e.env, "t", 10, time.Minute).Jobs[0]
	if err := l.Record(ctx, []*dataplane.Job{j}, "w:1"); err != nil {
		t.Fatal(err)
	}
	retryAt := time.Now().Add(time.Hour).UnixMilli()
	if err := l.MarkRetrying(ctx, []dataplane.RetryRequest{{Ref: j.Ref(), RunAt: retryAt, LeaseUntil: retryAt + 60_000, Error: "x"}}); err != nil {
		t.Fatal(err)
	}
	wipeRedis(t, e.env)
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "a2", OrderingKey: "A"})
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "a3", OrderingKey: "A", Delay: time.Minute})
	cl := mustClaim(t, e.env, "t", 10, time.Minute) // a2, in lease
	restoreRow(t, e, "t", "a1", dataplane.RestoreCreated)
	handBack(t, e, cl.Jobs, "w:2", "", time.Second)
	a1, a2 := mustGet(t, e.env, "t", "a1"), mustGet(t, e.env, "t", "a2")
	if a1.Parked || !a2.Parked || a1.Score != retryAt {
		t.Fatalf("a1 parked %v due %d (want %d), a2 parked %v: want a1 holding A at its retry time", a1.Parked, a1.Score, retryAt, a2.Parked)
	}
}

// A duplicate enqueue of a parked job answers as a duplicate of a waiting
// job, due at its own time (its score is 2^51 + that), on the plain path
// and the grouped one.
func TestOrderingDuplicateOfAParkedJob(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "k1", OrderingKey: "K"})
		r2 := mustEnqueue(t, e, "t", dataplane.NewJob{ID: "k2", OrderingKey: "K", Delay: time.Hour})
		for _, j := range []dataplane.NewJob{{ID: "k2"}, {ID: "k2", OrderingKey: "K"}} {
			r, err := e.c.Enqueue(ctx, "t", j)
			if err != nil || !r.Duplicate || r.Finished != nil || r.RunAt != r2.RunAt {
				t.Errorf("duplicate of the parked k2 (key %q): %+v %v, want a waiting duplicate due at %d", j.OrderingKey, r, err, r2.RunAt)
			}
		}
	})
}

// A batch of one key's jobs of several priorities and one due time keeps
// their enqueue order (the script enters them in the caller's order, not
// by priority group).
func TestOrderingBatchAcrossPrioritiesKeepsEnqueueOrder(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		at := time.Now().Add(-time.Second).UnixMilli()
		if _, err := e.c.EnqueueBatch(ctx, "t", []dataplane.NewJob{
			{ID: "first", OrderingKey: "K", Priority: 2, RunAt: at}, {ID: "second", OrderingKey: "K", RunAt: at},
		}); err != nil {
			t.Fatal(err)
		}
		if got := ids(mustClaim(t, e, "t", 10, time.Minute).Jobs); !slices.Equal(got, []string{"first"}) {
			t.Fatalf("claimed %v, want [first]: enqueued first, at the same due time", got)
		}
	})
}

// expireLease sets job id's lease deadline in the past, as a dead
// worker's would be.
func expireLease(t *testing.T, e env, topic, id string) {
	t.Helper()
	if err := e.rdb.ZAdd(testenv.Context(t), e.ns+":{"+topic+"}:lease", redisZ(1, id)).Err(); err != nil {
		t.Fatal(err)
	}
}

// With Redis intact: the claim buries a poison job and hands its key on at
// once, while the job's ledger row waits for its burial to be settled; a
// claim of the key's next job meanwhile is held and handed back to wait.
// It keeps the key: a later job of the key does not pass it.
func TestOrderingHeldClaimKeepsItsPlace(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	l := ledgerops.Of(e.led)
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "x", OrderingKey: "K", MaxAttempts: 1})
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "j", OrderingKey: "K"})
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "p", OrderingKey: "K", Delay: 200 * time.Millisecond})
	cl := mustClaim(t, e.env, "t", 10, time.Minute)
	if err := l.Record(ctx, cl.Jobs, "w:1"); err != nil {
		t.Fatal(err)
	}
	expireLease(t, e.env, "t", "x") // w:1 died
	if cl := mustClaim(t, e.env, "t", 10, time.Minute); len(cl.Buried) != 1 || cl.Buried[0].ID != "x" {
		t.Fatalf("buried %v, want [x]", ids(cl.Buried))
	}
	cl2 := mustClaim(t, e.env, "t", 10, time.Minute)
	if !slices.Equal(ids(cl2.Jobs), []string{"j"}) {
		t.Fatalf("claimed %v, want [j]", ids(cl2.Jobs))
	}
	handBack(t, e, cl2.Jobs, "w:3", "x", time.Hour)
	if j, p := mustGet(t, e.env, "t", "j"), mustGet(t, e.env, "t", "p"); j.Parked || !p.Parked {
		t.Fatalf("j parked %v, p parked %v: want j keeping K", j.Parked, p.Parked)
	}
}

// After a failover to a replica that missed the last writes: the
// replica's holder x (succeeded on the primary; started, so it holds) is
// claimed again and held by the ledger, whose holder h (retrying) the
// replica has parked. Handed back, x gives h the key.
func TestOrderingFailoverHandsTheKeyToTheLedgersHolder(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	l := ledgerops.Of(e.led)
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "x", OrderingKey: "K"})
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "h", OrderingKey: "K"})
	cl := mustClaim(t, e.env, "t", 10, time.Minute)
	if err := l.Record(ctx, cl.Jobs, "w:1"); err != nil {
		t.Fatal(err)
	}
	snap := map[string]string{} // the replica's copy, taken now
	for _, k := range keysOf(t, e.env) {
		d, err := e.rdb.Dump(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		snap[k] = d
	}
	// The primary goes on: x succeeds, h runs and fails.
	if err := l.Complete(ctx, refs(cl.Jobs)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Ack(ctx, refs(cl.Jobs)); err != nil {
		t.Fatal(err)
	}
	hc := mustClaim(t, e.env, "t", 10, time.Minute)
	if err := l.Record(ctx, hc.Jobs, "w:2"); err != nil {
		t.Fatal(err)
	}
	runAt := time.Now().Add(-time.Second).UnixMilli()
	if err := l.MarkRetrying(ctx, []dataplane.RetryRequest{{Ref: hc.Jobs[0].Ref(), RunAt: runAt, LeaseUntil: runAt + 50, Error: "boom"}}); err != nil {
		t.Fatal(err)
	}
	// Failover: the replica's copy is all Redis has; x's lease runs out.
	wipeRedis(t, e.env)
	for k, d := range snap {
		if err := e.rdb.Restore(ctx, k, 0, d).Err(); err != nil {
			t.Fatal(err)
		}
	}
	expireLease(t, e.env, "t", "x")
	restoreRow(t, e, "t", "h", dataplane.RestoreTracked) // parked on the replica
	cl = mustClaim(t, e.env, "t", 10, time.Minute)
	if !slices.Equal(ids(cl.Jobs), []string{"x"}) {
		t.Fatalf("claimed %v, want x again (the replica's holder)", ids(cl.Jobs))
	}
	handBack(t, e, cl.Jobs, "w:3", "h", 0)
	if got := ids(mustClaim(t, e.env, "t", 10, time.Minute).Jobs); !slices.Equal(got, []string{"h"}) {
		t.Fatalf("claimed %v, want [h], the ledger's holder", got)
	}
}

// A job settled by its old claim while a restore had it parked (its worker
// lived on through a Redis loss) leaves the key's queue too.
func TestOrderingParkedJobSettledByItsOldClaim(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	l := ledgerops.Of(e.led)
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "j1", OrderingKey: "K"})
	j1 := mustClaim(t, e.env, "t", 10, time.Minute).Jobs
	if err := l.Record(ctx, j1, "w:1"); err != nil {
		t.Fatal(err)
	}
	wipeRedis(t, e.env)
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "j2", OrderingKey: "K"})
	mustClaim(t, e.env, "t", 10, time.Minute) // j2, in lease
	restoreRow(t, e, "t", "j1", dataplane.RestoreCreated)
	if !mustGet(t, e.env, "t", "j1").Parked {
		t.Fatal("j1 not parked behind j2 in lease")
	}
	if n, err := e.c.Ack(ctx, refs(j1)); err != nil || n != 1 {
		t.Fatalf("the old claim's ack of j1: %d %v", n, err)
	}
	if st, err := e.c.Stats(ctx, "t"); err != nil || st.Parked != 0 {
		t.Fatalf("stats after j1's ack: %+v %v, want nothing parked", st, err)
	}
}

// wipeRedis deletes every key of the test's namespace: Redis lost its data.
func wipeRedis(t *testing.T, e env) {
	t.Helper()
	if err := e.rdb.Del(testenv.Context(t), keysOf(t, e)...).Err(); err != nil {
		t.Fatal(err)
	}
}

// restoreRow puts job id of topic back into Redis from its ledger row, as
// the recoverer does, and fails unless the outcome is want.
func restoreRow(t *testing.T, e wenv, topic, id string, want dataplane.RestoreOutcome) {
	t.Helper()
	ctx := testenv.Context(t)
	row, err := e.led.Row(ctx, topic, id)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := e.c.Restore(ctx, []dataplane.RestoreRow{row.RestoreRow()}, dataplane.RestoreOptions{}); err != nil || out[0] != want {
		t.Fatalf("restore %s: %v %v, want %s", id, out, err, want)
	}
}

// handBack records claimed jobs as worker, wants exactly one of them held
// by the ledger for another job of its key (heldFor, if not ""), and hands
// it back to wait as the worker does.
func handBack(t *testing.T, e wenv, jobs []*dataplane.Job, worker, heldFor string, wait time.Duration) {
	t.Helper()
	ctx := testenv.Context(t)
	var gone *queue.GoneError
	err := ledgerops.Of(e.led).Record(ctx, jobs, worker)
	if !errors.As(err, &gone) || len(gone.Held) != 1 || (heldFor != "" && gone.HeldBy[0] != heldFor) {
		t.Fatalf("record of %v: %v, want one held for %q", ids(jobs), err, heldFor)
	}
	if _, err := e.c.ReleaseLater(ctx, gone.Held, gone.HeldBy, wait); err != nil {
		t.Fatal(err)
	}
}

// A holder whose envelope is gone (debris of a partial delete) hands its
// key on when a claim meets it; a parked entry without an envelope is
// skipped.
func TestOrderingDebrisHandsTheKeyOn(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		for _, id := range []string{"k1", "k2", "k3"} {
			mustEnqueue(t, e, "t", dataplane.NewJob{ID: id, OrderingKey: "K"})
		}
		if err := e.rdb.HDel(ctx, e.ns+":{t}:job", "k1", "k2").Err(); err != nil {
			t.Fatal(err)
		}
		mustClaim(t, e, "t", 10, time.Minute) // meets k1's debris
		if got := ids(mustClaim(t, e, "t", 10, time.Minute).Jobs); !slices.Equal(got, []string{"k3"}) {
			t.Fatalf("claimed %v, want [k3]: k1 and k2 are debris", got)
		}
	})
}

// A pause holds a key as it is: the ack of a run that goes on during the
// pause hands the key on, nothing is claimed, and after the resume the
// key's next job alone is.
func TestOrderingThroughAPause(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		store := &memPauses{}
		for _, id := range []string{"k1", "k2", "k3"} {
			mustEnqueue(t, e, "t", dataplane.NewJob{ID: id, OrderingKey: "K"})
		}
		k1 := mustClaim(t, e, "t", 10, time.Minute).Jobs
		if _, err := e.c.Pause(ctx, store, "t", "test"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.Ack(ctx, refs(k1)); err != nil {
			t.Fatal(err)
		}
		if cl := mustClaim(t, e, "t", 10, time.Minute); !cl.Paused || len(cl.Jobs) != 0 {
			t.Fatalf("claim while paused: %+v", cl)
		}
		if _, err := e.c.Resume(ctx, store, "t", "test"); err != nil {
			t.Fatal(err)
		}
		if got := ids(mustClaim(t, e, "t", 10, time.Minute).Jobs); !slices.Equal(got, []string{"k2"}) {
			t.Fatalf("claimed %v after the resume, want [k2]", got)
		}
	})
}

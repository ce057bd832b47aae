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
)

// priorities lists the priority of each job.
func priorities(jobs []*dataplane.Job) []int {
	out := make([]int, len(jobs))
	for i, j := range jobs {
		out[i] = j.Priority
	}
	return out
}

// Due jobs of a higher priority are claimed first, each level in due
// order, then the rest by due time; a job of raised priority that is not
// due yet waits like any other.
func TestPriorityClaimsHighestFirst(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		for i := range 4 {
			mustEnqueue(t, e, "t", dataplane.NewJob{ID: fmt.Sprintf("low%d", i)})
		}
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "h1", Priority: 1})
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "h3", Priority: 3})
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "h2", Priority: 2})
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "later", Priority: 3, Delay: time.Hour})
		// A batch: a duplicate of h2 at another priority changes nothing.
		res, err := e.c.EnqueueBatch(ctx, "t", []dataplane.NewJob{
			{ID: "h3b", Priority: 3}, {ID: "h2", Priority: 1}, {ID: "low9"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Status != dataplane.BatchCreated || res[1].Status == dataplane.BatchCreated || res[2].Status != dataplane.BatchCreated {
			t.Fatalf("batch: %+v", res)
		}
		if info := mustGet(t, e, "t", "later"); info.Job.Priority != 3 || info.State != dataplane.StateWaiting {
			t.Fatalf("get later: %s priority %d", info.State, info.Job.Priority)
		}
		if st, err := e.c.Stats(ctx, "t"); err != nil || st.ByPriority != [dataplane.MaxPriority + 1]int64{5, 1, 1, 3} {
			t.Fatalf("stats by priority: %v %v, want [5 1 1 3]", st.ByPriority, err)
		}
		cl := mustClaim(t, e, "t", 7, time.Minute)
		want := []string{"h3", "h3b", "h2", "h1", "low0", "low1", "low2"}
		if got := ids(cl.Jobs); !slices.Equal(got, want) {
			t.Fatalf("claimed %v, want %v", got, want)
		}
		if got := priorities(cl.Jobs); !slices.Equal(got, []int{3, 3, 2, 1, 0, 0, 0}) {
			t.Fatalf("claimed priorities %v", got)
		}
		page, err := e.c.List(ctx, "t", dataplane.StateInFlight, 0, 10)
		if err != nil || len(page.Jobs) != 7 {
			t.Fatalf("list: %v, %+v", err, page)
		}
		for _, info := range page.Jobs {
			if want := map[string]int{"h3": 3, "h3b": 3, "h2": 2, "h1": 1}[info.Job.ID]; info.Job.Priority != want {
				t.Fatalf("listed %s with priority %d, want %d", info.Job.ID, info.Job.Priority, want)
			}
		}
		if cl := mustClaim(t, e, "t", 7, time.Minute); !slices.Equal(ids(cl.Jobs), []string{"low3", "low9"}) {
			t.Fatalf("then claimed %v, want [low3 low9] (later is not due)", ids(cl.Jobs))
		}
		if _, err := e.c.Enqueue(ctx, "t", dataplane.NewJob{ID: "x", Priority: dataplane.MaxPriority + 1}); !errors.Is(err, dataplane.ErrInvalidPriority) {
			t.Fatalf("priority 4: %v, want ErrInvalidPriority", err)
		}
		if _, err := e.c.Enqueue(ctx, "t", dataplane.NewJob{ID: "x", Priority: -1}); !errors.Is(err, dataplane.ErrInvalidPriority) {
			t.Fatalf("priority -1: %v, want ErrInvalidPriority", err)
		}
	})
}

// One due job in DefaultOldestEvery claimed is the one due longest,
// whatever its priority: a steady stream of urgent jobs does not starve a
// backlog.
func TestPriorityLeavesTheOldestItsTurn(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		every := dataplane.DefaultOldestEvery
		for i := range 3 {
			mustEnqueue(t, e, "t", dataplane.NewJob{ID: fmt.Sprintf("old%d", i)})
		}
		var got []string
		for i := range 3 * every {
			// A new urgent job before every claim: one is always waiting.
			mustEnqueue(t, e, "t", dataplane.NewJob{ID: fmt.Sprintf("hot%03d", i), Priority: 2})
			cl := mustClaim(t, e, "t", 1, time.Minute)
			if len(cl.Jobs) != 1 {
				t.Fatalf("claim %d: %d jobs", i, len(cl.Jobs))
			}
			got = append(got, cl.Jobs[0].ID)
		}
		for i, id := range got {
			old := (i+1)%every == 0
			if old != (id[:3] == "old") {
				t.Fatalf("claim %d took %s (every %d-th should be the oldest): %v", i+1, id, every, got)
			}
		}
		if got[every-1] != "old0" || got[2*every-1] != "old1" || got[3*every-1] != "old2" {
			t.Fatalf("the oldest went out of order: %v", got)
		}
	})
}

// A job keeps its priority through a retry, a release, a death and its
// requeue, a lease that expires and a reschedule: each time it is back
// in due it is claimed before the older jobs of priority 0. Ack and
// cancel leave nothing of it behind.
func TestPriorityKeptThroughTheJobsLife(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	for i := range 8 {
		mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: fmt.Sprintf("bulk%d", i)})
	}
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "vip", Priority: 2, MaxAttempts: 10})
	claimVIP := func(step string, lease time.Duration) *dataplane.Job {
		t.Helper()
		cl := mustClaim(t, e.env, "t", 1, lease)
		if len(cl.Jobs) != 1 || cl.Jobs[0].ID != "vip" || cl.Jobs[0].Priority != 2 {
			t.Fatalf("%s: claimed %v, want vip of priority 2 first", step, ids(cl.Jobs))
		}
		return cl.Jobs[0]
	}
	j := claimVIP("first claim", time.Minute)
	if _, err := e.c.Retry(ctx, []dataplane.RetryRequest{{Ref: j.Ref(), Error: "x"}}); err != nil {
		t.Fatal(err)
	}
	if info := mustGet(t, e.env, "t", "vip"); info.State != dataplane.StateRetrying || info.Job.Priority != 2 {
		t.Fatalf("after retry: %s priority %d", info.State, info.Job.Priority)
	}
	j = claimVIP("after a retry", time.Minute)
	if n, err := e.c.Release(ctx, []dataplane.Ref{j.Ref()}); err != nil || n != 1 {
		t.Fatalf("release: %d, %v", n, err)
	}
	j = claimVIP("after a release", time.Minute)
	if n, _, err := e.c.Bury(ctx, []dataplane.DeadJob{{Job: j, Error: "boom"}}); err != nil || n != 1 {
		t.Fatalf("bury: %d, %v", n, err)
	}
	if info := mustGet(t, e.env, "t", "vip"); info.State != dataplane.StateDead || info.Job.Priority != 2 {
		t.Fatalf("after bury: %s priority %d", info.State, info.Job.Priority)
	}
	if err := e.c.RequeueDead(ctx, "t", "vip"); err != nil {
		t.Fatal(err)
	}
	claimVIP("after a requeue", time.Minute)
	// Its lease runs out (set in the past, as a dead worker's would be):
	// the next claim puts it back in due, at its level, and takes it first.
	if err := e.rdb.ZAdd(ctx, e.ns+":{t}:lease", redisZ(1, "vip")).Err(); err != nil {
		t.Fatal(err)
	}
	j = claimVIP("after its lease expired", time.Minute)
	if n, err := e.c.Ack(ctx, []dataplane.Ref{j.Ref()}); err != nil || n != 1 {
		t.Fatalf("ack: %d, %v", n, err)
	}

	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "vip", Priority: 2, Delay: time.Hour})
	if _, err := e.c.Reschedule(ctx, ledgerops.Of(e.led), "t", "vip", dataplane.RescheduleAt(time.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
	j = claimVIP("after a reschedule to now", time.Minute)
	if n, err := e.c.Ack(ctx, []dataplane.Ref{j.Ref()}); err != nil || n != 1 {
		t.Fatalf("ack: %d, %v", n, err)
	}
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "gone", Priority: 3, Delay: time.Hour})
	if _, err := e.c.Cancel(ctx, ledgerops.Of(e.led), "t", "gone"); err != nil {
		t.Fatal(err)
	}
	for _, k := range keysOf(t, e.env) {
		if slices.Contains([]string{"prio", "pri:1", "pri:2", "pri:3"}, k[len(e.ns)+len(":{t}:"):]) {
			t.Errorf("key %s left after every job of raised priority was acked or cancelled", k)
		}
	}
	if cl := mustClaim(t, e.env, "t", 100, time.Minute); len(cl.Jobs) != 8 || cl.Jobs[0].ID != "bulk0" {
		t.Fatalf("the rest: %v", ids(cl.Jobs))
	}
}

// A batch spread over the partitions of a topic and over priorities is
// one call, and each partition claims its jobs highest first.
func TestPriorityOnAPartitionedTopic(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		if _, err := e.c.SetPartitions(ctx, "pt", 2); err != nil {
			t.Fatal(err)
		}
		var jobs []dataplane.NewJob
		for i := range 20 {
			jobs = append(jobs, dataplane.NewJob{ID: fmt.Sprintf("j%02d", i), Priority: i % 4})
		}
		res, err := e.c.EnqueueBatch(ctx, "pt", jobs)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Status != dataplane.BatchCreated {
				t.Fatalf("job %d: %+v", i, r)
			}
		}
		names, err := e.c.Partitions(ctx, "pt") // the old layout's too
		if err != nil || len(names) < 2 {
			t.Fatalf("partitions: %v, %v", names, err)
		}
		seen := 0
		for _, name := range names {
			cl := mustClaim(t, e, name, 20, time.Minute)
			seen += len(cl.Jobs)
			p := priorities(cl.Jobs)
			if !slices.IsSortedFunc(p, func(a, b int) int { return b - a }) {
				t.Fatalf("%s claimed priorities %v, want highest first", name, p)
			}
			for _, j := range cl.Jobs {
				var i int
				fmt.Sscanf(j.ID, "j%d", &i)
				if j.Priority != i%4 {
					t.Fatalf("%s: %s has priority %d, want %d", name, j.ID, j.Priority, i%4)
				}
			}
		}
		if seen != 20 {
			t.Fatalf("claimed %d jobs over the partitions, want 20", seen)
		}
	})
}

// A dead job of raised priority on a durable topic keeps it when
// requeued, one or all: in Redis and in its new ledger row.
func TestPriorityOfADurableJobKeptThroughARequeue(t *testing.T) {
	for _, all := range []bool{false, true} {
		e := newDurableWEnv(t)
		ctx := testenv.Context(t)
		if _, err := e.c.Enqueue(ctx, durableT, dataplane.NewJob{ID: "vip", Priority: 2, MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
		var cl *dataplane.Claimed
		testenv.WaitFor(ctx, t, "vip is due", func() bool {
			cl = mustClaim(t, e.env, durableT, 1, time.Minute)
			return len(cl.Jobs) == 1
		})
		if err := ledgerops.Of(e.led).Bury(ctx, []dataplane.DeadJob{{Job: cl.Jobs[0], Error: "boom"}}); err != nil {
			t.Fatal(err)
		}
		if n, _, err := e.c.Bury(ctx, []dataplane.DeadJob{{Job: cl.Jobs[0], Error: "boom"}}); err != nil || n != 1 {
			t.Fatalf("bury: %d, %v", n, err)
		}
		var err error
		if all {
			_, err = e.c.RequeueAllDead(ctx, durableT)
		} else {
			err = e.c.RequeueDead(ctx, durableT, "vip")
		}
		if err != nil {
			t.Fatal(err)
		}
		info := mustGet(t, e.env, durableT, "vip")
		row, _ := e.row(t, "vip")
		if info.State != dataplane.StateWaiting || info.Job.Priority != 2 || row.Priority != 2 {
			t.Errorf("requeue (all %v): %s, priority %d, its row's %d, want waiting at 2", all, info.State, info.Job.Priority, row.Priority)
		}
	}
}

// An id given twice in a batch at two priorities: the first is created
// and the second is its duplicate, as without priorities.
func TestPriorityBatchDuplicateFirstWins(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		res, err := e.c.EnqueueBatch(testenv.Context(t), "t", []dataplane.NewJob{
			{ID: "x", Priority: 2, Payload: []byte("first")}, {ID: "x", Payload: []byte("second")},
		})
		if err != nil {
			t.Fatal(err)
		}
		info := mustGet(t, e, "t", "x")
		if res[0].Status != dataplane.BatchCreated || res[1].Status != dataplane.BatchDuplicate ||
			info.Job.Priority != 2 || string(info.Job.Payload) != "first" {
			t.Fatalf("results %s, %s; x has priority %d, payload %q: want the first created", res[0].Status, res[1].Status,
				info.Job.Priority, info.Job.Payload)
		}
	})
}

// A periodic tick's job keeps the priority it was given.
func TestPriorityOfATick(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		if _, err := e.c.EnqueueTick(testenv.Context(t), nil, "t", "s", 1000, dataplane.NewJob{ID: "s:1000", Priority: 3}); err != nil {
			t.Fatal(err)
		}
		if cl := mustClaim(t, e, "t", 1, time.Minute); len(cl.Jobs) != 1 || cl.Jobs[0].Priority != 3 {
			t.Fatalf("claimed %v, want s:1000 of priority 3", cl.Jobs)
		}
	})
}

// Cancel's and reschedule's answers show the job's priority.
func TestPriorityInCancelAndRescheduleAnswers(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "a", Priority: 3, Delay: time.Hour})
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "b", Priority: 3, Delay: time.Hour})
	res, err := e.c.Reschedule(ctx, ledgerops.Of(e.led), "t", "a", dataplane.RescheduleAt(time.Now().Add(2*time.Hour).UnixMilli()))
	if err != nil {
		t.Fatal(err)
	}
	j, err := e.c.Cancel(ctx, ledgerops.Of(e.led), "t", "b")
	if err != nil {
		t.Fatal(err)
	}
	if res.Job.Priority != 3 || j.Priority != 3 {
		t.Fatalf("reschedule answers priority %d, cancel %d: want 3", res.Job.Priority, j.Priority)
	}
}

// Keys left behind by a path that missed them (an older release's scripts
// during an upgrade, debris of a partial delete) do no harm: a pri entry
// whose job is due later is not handed out early, and a prio field of a
// job gone does not give a new job of the same id its priority.
func TestPriorityStaleKeys(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		p := e.ns + ":{t}:"
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "x", Priority: 2})
		// An old claim took it out of due (not pri:2), an old retry put it
		// back in due, an hour on.
		later := time.Now().Add(time.Hour).UnixMilli()
		if err := e.rdb.ZAdd(ctx, p+"due", redisZ(float64(later), "x")).Err(); err != nil {
			t.Fatal(err)
		}
		if cl := mustClaim(t, e, "t", 10, time.Minute); len(cl.Jobs) != 0 {
			t.Fatalf("claimed %v an hour before its due time", ids(cl.Jobs))
		}
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "y", Priority: 3})
		if err := e.rdb.HDel(ctx, p+"job", "y").Err(); err != nil { // debris of a partial delete
			t.Fatal(err)
		}
		mustClaim(t, e, "t", 10, time.Minute)
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "y"})
		if got := mustGet(t, e, "t", "y").Job.Priority; got != 0 {
			t.Fatalf("a new y of priority 0 shows priority %d", got)
		}
	})
}

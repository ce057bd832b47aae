package dataplane_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
)

func TestClaimTakesDueJobsInOrder(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		// Due 1, 2 and 3 ms after Redis's clock as the batch's one script
		// call reads it: three due times in a known order, however late the
		// call runs. (Times from a clock read before the enqueues are in the
		// past once a loaded host has run them, and a past time means now:
		// equal scores, which a claim takes in id order.) Neither the ids
		// nor the order in the batch is the order of the due times.
		res, err := e.c.EnqueueBatch(testenv.Context(t), "t", []dataplane.NewJob{
			{ID: "b", Delay: 3 * time.Millisecond},
			{ID: "c", Delay: time.Millisecond},
			{ID: "a", Delay: 2 * time.Millisecond},
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Status != dataplane.BatchCreated {
				t.Fatalf("enqueue %s: %s %v", r.ID, r.Status, r.Err)
			}
		}
		dueB, dueC, dueA := res[0].RunAt, res[1].RunAt, res[2].RunAt
		if !(dueC < dueA && dueA < dueB) {
			t.Fatalf("due times c %d, a %d, b %d: want them in that order", dueC, dueA, dueB)
		}
		later := mustEnqueue(t, e, "t", dataplane.NewJob{ID: "later", Delay: time.Hour})
		waitRedisPast(t, e, dueB)
		c := mustClaim(t, e, "t", 2, 30*time.Second)
		if got := ids(c.Jobs); !slices.Equal(got, []string{"c", "a"}) {
			t.Fatalf("claimed %v, want the two earliest", got)
		}
		for _, j := range c.Jobs {
			if j.Attempt != 1 {
				t.Fatalf("%s attempt %d, want 1", j.ID, j.Attempt)
			}
			if j.LeaseUntil != c.Now+30_000 {
				t.Fatalf("%s lease until %d, want now %d + 30 s", j.ID, j.LeaseUntil, c.Now)
			}
			if info := mustGet(t, e, "t", j.ID); info.State != dataplane.StateInFlight || info.Score != j.LeaseUntil || info.Job.Attempt != 1 {
				t.Fatalf("%s after claim: %+v", j.ID, info)
			}
		}
		if c.NextDue > c.Now {
			t.Fatalf("next due %d is in the future but job b is due", c.NextDue)
		}
		if c.NextLease != c.Now+30_000 {
			t.Fatalf("next lease %d", c.NextLease)
		}
		c = mustClaim(t, e, "t", 10, time.Minute)
		if got := ids(c.Jobs); !slices.Equal(got, []string{"b"}) {
			t.Fatalf("second claim %v, want [b]", got)
		}
		if c.NextDue != later.RunAt {
			t.Fatalf("next due %d, want %d", c.NextDue, later.RunAt)
		}
		if c = mustClaim(t, e, "t", 10, time.Minute); len(c.Jobs) != 0 {
			t.Fatalf("claimed %v though nothing is due", ids(c.Jobs))
		}
	})
}

// A job due ahead is never handed out before Redis's clock reaches its due
// time, however often it is asked for. Only a claim made before the due
// time proves that, and a loaded host may make its first claim after a
// short delay has passed: the delay then doubles until one is made.
func TestClaimNeverEarly(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		for delay := 50 * time.Millisecond; ; delay *= 2 {
			if early := claimWhenDue(t, e, delay); early > 0 {
				return
			}
			if delay >= 10*time.Second {
				t.Fatalf("no claim was made before a due time %s ahead", delay)
			}
			t.Logf("the first claim came after the %s delay had passed (a loaded host): again, %s ahead", delay, 2*delay)
		}
	})
}

// claimWhenDue enqueues a job due delay ahead and claims until it is
// handed out, failing if that happens before its due time or if a claim
// at or past it does not take it. It returns how many claims came early.
func claimWhenDue(t *testing.T, e env, delay time.Duration) (early int) {
	t.Helper()
	id := fmt.Sprint("soon-", delay.Milliseconds())
	r := mustEnqueue(t, e, "t", dataplane.NewJob{ID: id, Delay: delay})
	deadline := time.Now().Add(delay + 10*time.Second)
	for time.Now().Before(deadline) {
		c := mustClaim(t, e, "t", 1, time.Minute)
		if len(c.Jobs) == 0 {
			if c.Now >= r.RunAt {
				t.Fatalf("Redis clock %d reached due time %d but the job was not claimed", c.Now, r.RunAt)
			}
			early++
			continue
		}
		j := c.Jobs[0]
		if j.ID != id {
			t.Fatalf("claimed %s, want %s", j.ID, id)
		}
		if c.Now < r.RunAt {
			t.Fatalf("claimed at Redis time %d, %d ms before its due time %d", c.Now, r.RunAt-c.Now, r.RunAt)
		}
		if j.RunAt != r.RunAt || j.RunAt-j.EnqueuedAt != delay.Milliseconds() {
			t.Fatalf("due at %d, enqueued at %d (Redis's clock): want the %s delay", j.RunAt, j.EnqueuedAt, delay)
		}
		return early
	}
	t.Fatalf("the job due %s ahead never became claimable", delay)
	return 0
}

// A worker host whose clock runs ahead cannot make a job due early: due
// times given as RunAt are compared with Redis's clock only.
func TestClaimIgnoresClientClock(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		probe := mustEnqueue(t, e, "t", dataplane.NewJob{ID: "probe"}) // RunAt = Redis now
		r := mustEnqueue(t, e, "t", dataplane.NewJob{ID: "ahead", RunAt: probe.RunAt + 60_000})
		c := mustClaim(t, e, "t", 10, time.Minute)
		if got := ids(c.Jobs); !slices.Equal(got, []string{"probe"}) {
			t.Fatalf("claimed %v; the job due a minute ahead (%d) must wait", got, r.RunAt)
		}
	})
}

func TestClaimPutsExpiredLeasesBackFirst(t *testing.T) {
	forEachBackend(t, dataplane.Config{ExpiredPerClaim: 2}, func(t *testing.T, e env) {
		for i := 0; i < 3; i++ {
			mustEnqueue(t, e, "t", dataplane.NewJob{ID: fmt.Sprintf("j%d", i), MaxAttempts: 3})
		}
		first := mustClaim(t, e, "t", 3, time.Millisecond) // expires at once
		waitRedisPast(t, e, first.Now+1)
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "fresh"})
		// At most two expired leases go back per call, before "fresh".
		c := mustClaim(t, e, "t", 10, time.Minute)
		if len(c.Jobs) != 3 {
			t.Fatalf("claimed %v, want 2 expired + fresh", ids(c.Jobs))
		}
		for _, j := range c.Jobs[:2] {
			if !strings.HasPrefix(j.ID, "j") || j.Attempt != 2 {
				t.Fatalf("expired job %s came back with attempt %d, want 2 (claimed twice)", j.ID, j.Attempt)
			}
		}
		c = mustClaim(t, e, "t", 10, time.Minute)
		if len(c.Jobs) != 1 || c.Jobs[0].Attempt != 2 {
			t.Fatalf("third expired job: %v", ids(c.Jobs))
		}
	})
}

// A poison job that kills its worker every time goes dead once it has been
// claimed max-attempts times, instead of looping forever.
func TestClaimBuriesJobOutOfAttempts(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "poison", Payload: []byte("p"), MaxAttempts: 2})
		for attempt := 1; attempt <= 2; attempt++ {
			c := mustClaim(t, e, "t", 1, time.Millisecond)
			if len(c.Jobs) != 1 || c.Jobs[0].Attempt != attempt {
				t.Fatalf("claim %d: %v", attempt, c.Jobs)
			}
			waitRedisPast(t, e, c.Now+1)
		}
		c := mustClaim(t, e, "t", 1, time.Minute)
		if len(c.Jobs) != 0 || len(c.Buried) != 1 || c.Buried[0].ID != "poison" {
			t.Fatalf("third claim handed out %v, buried %v; want it buried", ids(c.Jobs), ids(c.Buried))
		}
		b := c.Buried[0]
		if string(b.Payload) != "p" || !strings.Contains(b.LastError, "lease expired 2 times") {
			t.Fatalf("buried envelope %+v", b)
		}
		if info := mustGet(t, e, "t", "poison"); info.State != dataplane.StateDead {
			t.Fatalf("state %s, want dead", info.State)
		}
	})
}

func TestClaimDropsDueEntryWithoutEnvelope(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "ok"})
		if err := e.rdb.ZAdd(testenv.Context(t), e.ns+":{t}:due", redisZ(1, "debris")).Err(); err != nil {
			t.Fatal(err)
		}
		c := mustClaim(t, e, "t", 10, time.Minute)
		if got := ids(c.Jobs); !slices.Equal(got, []string{"ok"}) {
			t.Fatalf("claimed %v", got)
		}
		if st, _ := e.c.Stats(testenv.Context(t), "t"); st.Due != 0 {
			t.Fatalf("debris left in due: %+v", st)
		}
	})
}

// waitRedisPast waits until Redis's clock (read through Stats) passes ms.
func waitRedisPast(t *testing.T, e env, ms int64) {
	t.Helper()
	testenv.WaitFor(testenv.Context(t), t, fmt.Sprintf("Redis's clock to pass %d", ms), func() bool {
		st, err := e.c.Stats(testenv.Context(t), "clock")
		if err != nil {
			t.Fatal(err)
		}
		return st.Now > ms
	})
}

// redisNow returns Redis's clock, Unix ms.
func redisNow(t *testing.T, e env) int64 {
	t.Helper()
	st, err := e.c.Stats(testenv.Context(t), "clock")
	if err != nil {
		t.Fatal(err)
	}
	return st.Now
}

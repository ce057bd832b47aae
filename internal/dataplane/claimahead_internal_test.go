package dataplane

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

func claimedIDs(cl *Claimed) []string {
	var ids []string
	for _, j := range cl.Jobs {
		ids = append(ids, j.ID)
	}
	return ids
}

// A claim ahead takes the jobs due within it, in due order, and none
// beyond; of them it takes no more than nDue that are due already.
func TestClaimAheadTakesJobsDueWithinIt(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	c, err := New(rdb, Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	for _, j := range []NewJob{
		{ID: "due1"}, {ID: "due2"}, {ID: "due3"},
		// Due within a second of the claim, or already due if the host
		// stalls first: claimed either way.
		{ID: "soon1", Delay: 300 * time.Millisecond}, {ID: "soon2", Delay: 400 * time.Millisecond},
		{ID: "later", Delay: time.Minute},
	} {
		if _, err := c.Enqueue(ctx, "t", j); err != nil {
			t.Fatal(err)
		}
	}
	lease := 10 * time.Second
	cl, err := c.claim(ctx, "t", claimOpts{n: 10, nDue: 1, lease: lease, ahead: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got := claimedIDs(cl); !slices.Equal(got, []string{"due1"}) {
		t.Fatalf("nDue 1 with due jobs left: claimed %v, want [due1] alone (the coming ones wait behind the due ones)", got)
	}
	cl, err = c.claim(ctx, "t", claimOpts{n: 10, nDue: 10, lease: lease, ahead: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got := claimedIDs(cl); !slices.Equal(got, []string{"due2", "due3", "soon1", "soon2"}) {
		t.Fatalf("claimed %v, want [due2 due3 soon1 soon2]: those due within the second, in due order", got)
	}
	info, err := c.Get(ctx, "t", "later")
	if err != nil {
		t.Fatal(err)
	}
	if info.State != StateWaiting || cl.NextDue != info.Score {
		t.Fatalf("later: state %s, next due %d; want it left scheduled and reported next (%d)", info.State, cl.NextDue, info.Score)
	}
	// Without the claim-ahead nothing more is claimable.
	cl, err = c.Claim(ctx, "t", 10, lease)
	if err != nil {
		t.Fatal(err)
	}
	if len(cl.Jobs) != 0 {
		t.Fatalf("a plain claim took %v, want nothing (the rest is a minute away)", claimedIDs(cl))
	}
}

// With the claim-ahead on, jobs not due yet may take what quick handlers
// start in about 10ms beyond the free slots, backlog or not; behind slow
// (or not yet known) handlers claims follow the free slots alone. Due jobs
// take the free slots, plus the prefetch while there is a backlog.
func TestClaimableHoldsComingJobsOnlyForQuickHandlers(t *testing.T) {
	w := prefetchWorker(t)
	if err := w.Handle("t", HandlerFunc(nil), TopicConfig{Concurrency: 4, Prefetch: 6}); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("none", HandlerFunc(nil), TopicConfig{Concurrency: 4, Prefetch: 6, ClaimAhead: -1}); err != nil {
		t.Fatal(err)
	}
	slow := Ref{Topic: "t", ID: "slow"}
	for _, c := range []struct {
		what          string
		topic         string
		avg           time.Duration // handlers' average run; 0: none ran yet
		backlog, long bool          // long: one handler has run for a second
		busy          int64
		wantN, wantD  int
	}{
		{"no run yet", "t", 0, false, false, 0, 4, 4},
		{"slow handlers", "t", 20 * time.Millisecond, false, false, 3, 1, 1},
		{"slow handlers, slots full", "t", 20 * time.Millisecond, false, false, 4, 0, 0},
		{"quick handlers", "t", time.Millisecond, false, false, 0, 10, 4},
		{"quick handlers, slots full", "t", time.Millisecond, false, false, 4, 6, 0},
		{"quick handlers, work full", "t", time.Millisecond, false, false, 10, 0, 0},
		{"quick handlers, a backlog", "t", time.Millisecond, true, false, 4, 6, 6},
		{"quick on average, one running long", "t", time.Millisecond, false, true, 2, 2, 2},
		{"no claim-ahead, quick", "none", time.Millisecond, false, false, 1, 3, 3},
		{"no claim-ahead, a backlog", "none", time.Millisecond, true, false, 4, 6, 6},
	} {
		tr := w.topics[c.topic]
		tr.runNanos.Store(int64(c.avg))
		tr.testPart().backlog = c.backlog
		tr.busy.Store(c.busy)
		delete(tr.active, slow)
		if c.long {
			tr.active[slow] = &activeJob{timer: time.NewTimer(time.Hour), began: time.Now().Add(-time.Second)}
		}
		if n, nDue := tr.claimable(tr.testPart()); n != c.wantN || nDue != c.wantD {
			t.Errorf("%s (busy %d): claimable (%d, %d), want (%d, %d)", c.what, c.busy, n, nDue, c.wantN, c.wantD)
		}
	}
}

// gatedLedger holds each Record until the test opens its gate.
type gatedLedger struct {
	*memLedger
	gate chan struct{}
}

func (g *gatedLedger) Record(ctx context.Context, jobs []*Job, worker string) error {
	<-g.gate
	return g.memLedger.Record(ctx, jobs, worker)
}

// aheadWorker is a worker (not run) whose topic "t" claims a second
// ahead, with a gate on its ledger's records.
func aheadWorker(t *testing.T, stopping <-chan struct{}) (*Client, *gatedLedger, *topicRunner) {
	t.Helper()
	led := &gatedLedger{memLedger: &memLedger{rows: map[string]int{}}, gate: make(chan struct{})}
	c, w := idleWorker(t, led)
	if err := w.Handle("t", HandlerFunc(nil), TopicConfig{Concurrency: 2, Lease: 8 * time.Second, ClaimAhead: time.Second}); err != nil {
		t.Fatal(err)
	}
	tr := w.topics["t"]
	tr.stopping = stopping
	return c, led, tr
}

// A job claimed ahead is recorded, then queued for a handler at its due
// time on Redis's clock, never before.
func TestAJobClaimedAheadIsQueuedAtItsDueTime(t *testing.T) {
	c, led, tr := aheadWorker(t, make(chan struct{}))
	ctx := testenv.Context(t)
	if _, err := c.Enqueue(ctx, "t", NewJob{ID: "j", Delay: 500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	tr.tokens <- struct{}{} // as fetchLoop does
	if _, _, err := tr.testFetch(ctx, 2, 2); err != nil {
		t.Fatal(err)
	}
	close(led.gate)
	var j *Job
	select {
	case j = <-tr.work:
	case <-ctx.Done():
		t.Fatal("the job claimed ahead never reached the handlers")
	}
	now, err := c.Time(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if now.UnixMilli() < j.RunAt {
		t.Fatalf("queued for a handler at %d on Redis's clock, before its due time %d", now.UnixMilli(), j.RunAt)
	}
	led.mu.Lock()
	attempt, recorded := led.rows["t/j"]
	led.mu.Unlock()
	if !recorded || attempt != 1 {
		t.Fatalf("ledger row %v (attempt %d), want it recorded with attempt 1 before the job was queued", recorded, attempt)
	}
	if tr.busy.Load() != 1 {
		t.Fatalf("busy %d, want 1 once it is queued", tr.busy.Load())
	}
}

// Shutdown while a job claimed ahead waits for its due time hands it back
// at once: due again in Redis with its attempt unspent, its ledger row
// unclaimed, nothing queued for a handler.
func TestShutdownHandsBackJobsClaimedAhead(t *testing.T) {
	stop := make(chan struct{})
	c, led, tr := aheadWorker(t, stop)
	ctx := testenv.Context(t)
	if _, err := c.Enqueue(ctx, "t", NewJob{ID: "j", Delay: 900 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	tr.tokens <- struct{}{}
	if _, _, err := tr.testFetch(ctx, 2, 2); err != nil {
		t.Fatal(err)
	}
	// Stopping before the record lands: the job, 900 ms from due, is
	// handed back instead of held.
	close(stop)
	close(led.gate)
	for range RecordPipeline { // every record done
		tr.tokens <- struct{}{}
	}
	tr.holds.Wait()
	if len(tr.work) != 0 || tr.busy.Load() != 0 {
		t.Fatalf("work %d, busy %d; want both 0 after the hand-back", len(tr.work), tr.busy.Load())
	}
	info, err := c.Get(ctx, "t", "j")
	if err != nil {
		t.Fatal(err)
	}
	if info.State != StateWaiting || info.Job.Attempt != 0 {
		t.Fatalf("job %s with attempt %d, want scheduled again with its attempt unspent (0)", info.State, info.Job.Attempt)
	}
	led.mu.Lock()
	attempt := led.rows["t/j"]
	led.mu.Unlock()
	if attempt != 0 {
		t.Fatalf("ledger row at attempt %d, want it unclaimed (0)", attempt)
	}
}

// After a claim the fetcher waits for a freed slot only when claimable
// jobs were left for want of one: a handler finishing otherwise makes
// nothing claimable, and waking for it would claim the next job or two
// alone, a ledger commit each.
func TestTheFetcherWaitsForAFreedSlotOnlyWhenJobsWereLeft(t *testing.T) {
	c, led, tr := aheadWorker(t, make(chan struct{}))
	close(led.gate)
	ctx := testenv.Context(t)
	for _, id := range []string{"a", "b", "c"} {
		if _, err := c.Enqueue(ctx, "t", NewJob{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Enqueue(ctx, "t", NewJob{ID: "later", Delay: time.Minute}); err != nil {
		t.Fatal(err)
	}
	tr.tokens <- struct{}{}
	wait, until, err := tr.testFetch(ctx, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if until != untilSlot {
		t.Fatalf("two of three due jobs claimed: waits until %d, want a freed slot (%d)", until, untilSlot)
	}
	tr.tokens <- struct{}{}
	wait, until, err = tr.testFetch(ctx, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if until != untilTime || wait != tr.w.cfg.MaxIdle {
		t.Fatalf("every claimable job claimed: waits %s until %d, want the timer alone (%d) for MaxIdle %s (the next job is a minute away)", wait, until, untilTime, tr.w.cfg.MaxIdle)
	}
}

// testPart returns tr's partition: its topic's own, added on first use
// (a runner gets its partitions from Worker.Run).
func (tr *topicRunner) testPart() *part {
	if ps := tr.parts.Load(); ps != nil {
		return (*ps)[0]
	}
	return tr.addPart(tr.topic)
}

// testFetch claims as fetchLoop does: the slots reserved, then fetch.
func (tr *topicRunner) testFetch(ctx context.Context, n, nDue int) (time.Duration, untilWhat, error) {
	tr.busy.Add(int64(n))
	return tr.fetch(ctx, tr.testPart(), n, nDue)
}

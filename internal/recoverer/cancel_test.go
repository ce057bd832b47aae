package recoverer_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// interleaved is the ledger Cancel is given in these tests: a whole recovery
// run happens before and after each of its ledger calls, that is at every
// boundary between Cancel's steps.
type interleaved struct {
	dataplane.Ledger
	t testing.TB
	r *recoverer.Recoverer
}

func (l interleaved) recover(ctx context.Context) {
	if rep, err := l.r.RunOnce(ctx); err != nil || rep.Skipped {
		l.t.Errorf("recovery run: %+v, %v", rep, err)
	}
}

func (l interleaved) CancelRows(ctx context.Context, refs []queue.Ref) error {
	l.recover(ctx)
	defer l.recover(ctx)
	return l.Ledger.CancelRows(ctx, refs)
}

func (l interleaved) Lookup(ctx context.Context, topic, id string) (*dataplane.RestoreRow, error) {
	l.recover(ctx)
	defer l.recover(ctx)
	return l.Ledger.Lookup(ctx, topic, id)
}

// gone fails the test unless neither Redis nor the ledger has a trace of
// topic/id.
func (e renv) gone(t testing.TB, topic, id, when string) {
	t.Helper()
	if info := e.state(t, topic, id); info.State != queue.StateUnknown {
		t.Errorf("%s %s: %s in Redis, want no trace", when, id, info.State)
	}
	if _, err := e.led.Row(testenv.Context(t), topic, id); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("%s %s: ledger row: %v, want none", when, id, err)
	}
}

// A recovery run at any boundary between Cancel's steps never brings a
// cancelled job back, and never loses one Cancel refused. The rows are all
// stale (their lease ended long ago), so each run looks at every one of
// them. Redis first, then the row, fails here: the run between the two
// steps finds a row whose job Redis no longer tracks and puts it back.
func TestCancelAtEveryStepOfARecoveryRun(t *testing.T) {
	e := newREnv(t)
	ctx := testenv.Context(t)
	now := e.redisNow(t)
	e.ensureEpoch(t, "t")
	mustEnqueue := func(id string, delay time.Duration) {
		if _, err := e.c.Enqueue(ctx, "t", queue.NewJob{ID: id, Delay: delay}); err != nil {
			t.Fatal(err)
		}
	}
	// Held by a worker, its row stale.
	e.claimAndRecord(t, "t", []string{"held"}, now-60_000)
	// Claimed with a stale row, then failed into a retry: due again in
	// Redis, still the row of its first attempt, waiting for a retry.
	retrying := []string{"retrying", "retrying-later", "lost"}
	for _, id := range retrying {
		mustEnqueue(id, 0)
	}
	cl, err := e.c.Claim(ctx, "t", len(retrying), time.Hour)
	if err != nil || len(cl.Jobs) != len(retrying) {
		t.Fatalf("claim: %+v, %v", cl, err)
	}
	for _, j := range cl.Jobs {
		j.LeaseUntil = now - 60_000
		runAt := now - 30_000
		if j.ID == "retrying-later" {
			runAt = now + 3_600_000
		}
		if err := ledgerops.Of(e.led).Record(ctx, []*queue.Job{j}, "w:1"); err != nil {
			t.Fatal(err)
		}
		if err := ledgerops.Of(e.led).MarkRetrying(ctx, []dataplane.RetryRequest{{Ref: j.Ref(), RunAt: runAt, LeaseUntil: now - 60_000, Error: "x"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.Retry(ctx, []dataplane.RetryRequest{{Ref: j.Ref(), RunAt: runAt, Error: "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	// "lost": Redis lost it; its row waits for a retry.
	p := e.ns + ":{t}:"
	if err := e.rdb.ZRem(ctx, p+"due", "lost").Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.HDel(ctx, p+"job", "lost").Err(); err != nil {
		t.Fatal(err)
	}
	mustEnqueue("first", time.Hour) // never claimed: no row

	r := e.recoverer(t, recoverer.Config{})
	led := interleaved{Ledger: ledgerops.Of(e.led), t: t, r: r}
	for _, id := range []string{"retrying", "retrying-later", "lost", "first"} {
		if _, err := e.c.Cancel(ctx, led, "t", id); err != nil {
			t.Fatalf("cancel %s: %v", id, err)
		}
		e.gone(t, "t", id, "after cancel")
	}
	if _, err := e.c.Cancel(ctx, led, "t", "held"); !errors.Is(err, queue.ErrInFlight) {
		t.Fatalf("cancel held: %v, want ErrInFlight", err)
	}
	led.recover(ctx)
	for _, id := range []string{"retrying", "retrying-later", "lost", "first"} {
		e.gone(t, "t", id, "after another recovery run")
	}
	if info := e.state(t, "t", "held"); info.State != queue.StateInFlight {
		t.Errorf("held: %s, want in flight", info.State)
	}
	if _, err := e.led.Row(ctx, "t", "held"); err != nil {
		t.Errorf("held lost its row: %v", err)
	}
}

// Cancels, recovery runs and claims all at once, on jobs that churn between
// waiting for a retry and in flight, every row stale: a job Cancel removed
// is never claimed afterwards nor left anywhere, and every job it did not
// remove is claimed until it finishes.
func TestCancelRacingRecoveryAndClaims(t *testing.T) {
	const n = 300
	e := newREnv(t)
	ctx := testenv.Context(t)
	e.ensureEpoch(t, "t")
	r := e.recoverer(t, recoverer.Config{})
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("j%03d", i)
		if _, err := e.c.Enqueue(ctx, "t", queue.NewJob{ID: ids[i], MaxAttempts: 100}); err != nil {
			t.Fatal(err)
		}
	}

	// One clock orders the events: a claim that starts after a Cancel
	// returned must not get that job.
	var clock atomic.Int64
	var mu sync.Mutex
	cancelledAt := map[string]int64{}
	finished := map[string]bool{}
	var violations []string

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); recoverUntil(ctx, t, r, stop) }()
	claims := func(until func() bool) {
		for !until() {
			start := clock.Add(1)
			cl, err := e.c.Claim(ctx, "t", 10, time.Hour)
			if err != nil {
				t.Errorf("claim: %v", err)
				return
			}
			if len(cl.Jobs) == 0 {
				time.Sleep(time.Millisecond) // nothing due: let the others run
				continue
			}
			now := e.redisNow(t)
			for _, j := range cl.Jobs {
				mu.Lock()
				if at, ok := cancelledAt[j.ID]; ok && at < start {
					violations = append(violations, fmt.Sprintf("%s claimed (attempt %d) after its cancel returned", j.ID, j.Attempt))
				}
				mu.Unlock()
				// Every row stale at once, so each recovery run looks at it.
				j.LeaseUntil = now - 60_000
			}
			if err := ledgerops.Of(e.led).Record(ctx, cl.Jobs, "w:1"); err != nil {
				t.Errorf("record: %v", err)
				return
			}
			var retry []dataplane.RetryRequest
			var marks []dataplane.RetryRequest
			var done []queue.Ref
			for _, j := range cl.Jobs {
				if j.Attempt < 3 { // fail into a retry, due at once
					retry = append(retry, dataplane.RetryRequest{Ref: j.Ref(), RunAt: now - 30_000, Error: "again"})
					marks = append(marks, dataplane.RetryRequest{Ref: j.Ref(), RunAt: now - 30_000, LeaseUntil: now - 60_000, Error: "again"})
				} else {
					done = append(done, j.Ref())
				}
			}
			// The worker's order: the ledger first, then Redis.
			if err := ledgerops.Of(e.led).MarkRetrying(ctx, marks); err != nil {
				t.Errorf("mark retrying: %v", err)
				return
			}
			if _, err := e.c.Retry(ctx, retry); err != nil {
				t.Errorf("retry: %v", err)
				return
			}
			if err := ledgerops.Of(e.led).Complete(ctx, done); err != nil {
				t.Errorf("complete: %v", err)
				return
			}
			if _, err := e.c.Ack(ctx, done); err != nil {
				t.Errorf("ack: %v", err)
				return
			}
			mu.Lock()
			for _, d := range done {
				finished[d.ID] = true
			}
			mu.Unlock()
		}
	}
	go func() {
		defer wg.Done()
		claims(func() bool {
			select {
			case <-stop:
				return true
			default:
				return false
			}
		})
	}()

	// Cancel every other job, from four goroutines, while the rest runs.
	var cw sync.WaitGroup
	var refused atomic.Int64
	for g := range 4 {
		cw.Add(1)
		go func() {
			defer cw.Done()
			for i := g * 2; i < n; i += 8 {
				if _, err := e.c.Cancel(ctx, ledgerops.Of(e.led), "t", ids[i]); err != nil {
					if !errors.Is(err, queue.ErrInFlight) && !errors.Is(err, queue.ErrNotFound) {
						t.Errorf("cancel %s: %v", ids[i], err)
					}
					refused.Add(1)
					continue
				}
				at := clock.Add(1)
				mu.Lock()
				cancelledAt[ids[i]] = at
				mu.Unlock()
			}
		}()
	}
	cw.Wait()
	close(stop)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// Drain: claim until every job not cancelled has finished; recovery
	// runs go on meanwhile and must bring back nothing cancelled.
	drained := make(chan struct{})
	wg.Add(1)
	go func() { defer wg.Done(); recoverUntil(ctx, t, r, drained) }()
	deadline := time.Now().Add(time.Minute)
	claims(func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(finished)+len(cancelledAt) >= n || time.Now().After(deadline)
	})
	close(drained)
	wg.Wait()
	if _, err := r.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	for _, v := range violations {
		t.Error(v)
	}
	for _, id := range ids {
		_, cancelled := cancelledAt[id]
		switch {
		case cancelled && finished[id]:
			t.Errorf("%s: cancelled, and it ran to the end afterwards", id)
		case cancelled:
			e.gone(t, "t", id, "cancelled")
		case !finished[id]:
			t.Errorf("%s: not cancelled and never finished: lost (Redis: %s)", id, e.state(t, "t", id).State)
		}
	}
	t.Logf("%d cancelled, %d refused (in flight or finished), %d finished", len(cancelledAt), refused.Load(), len(finished))
	if len(cancelledAt) == 0 {
		t.Fatal("no cancel succeeded: the race was not exercised")
	}
}

// recoverUntil runs recovery back to back until done is closed.
func recoverUntil(ctx context.Context, t *testing.T, r *recoverer.Recoverer, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		default:
		}
		if _, err := r.RunOnce(ctx); err != nil {
			t.Errorf("recovery run: %v", err)
			return
		}
	}
}

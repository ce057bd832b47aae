package recoverer_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// stalePasses is the ledger Reschedule is given in the interleaving test:
// around its row update (the boundary between its SQL and Redis steps), a
// relay or recovery pass that read the job's row before the update pushes
// that old row, and a whole relay pass and recovery run happen too.
type stalePasses struct {
	dataplane.RescheduleLedger
	t     testing.TB
	c     *dataplane.Client
	relay *recoverer.Relay
	rec   *recoverer.Recoverer
	old   *dataplane.RestoreRow // the row as a pass read it before the update
	seen  int64                 // that pass's seen-at
}

func (l *stalePasses) passes(ctx context.Context) {
	if l.old != nil {
		if _, err := l.c.Restore(ctx, []dataplane.RestoreRow{*l.old}, dataplane.RestoreOptions{SeenAt: l.seen}); err != nil {
			l.t.Errorf("stale push: %v", err)
		}
	}
	if _, _, err := l.relay.RunOnce(ctx); err != nil {
		l.t.Errorf("relay pass: %v", err)
	}
	if rep, err := l.rec.RunOnce(ctx); err != nil || rep.Skipped {
		l.t.Errorf("recovery run: %+v, %v", rep, err)
	}
}

func (l *stalePasses) Reschedule(ctx context.Context, ref queue.Ref, from, runAt int64) (bool, error) {
	l.passes(ctx)
	defer l.passes(ctx)
	return l.RescheduleLedger.Reschedule(ctx, ref, from, runAt)
}

// A pass that read a job's row before Reschedule moved it, and pushes that
// old row before or after either of Reschedule's steps, never makes the job
// due at its old time: in every case the job ends in Redis at the accepted
// time, and the row agrees. The cases: a job Redis has (within the
// horizon), one beyond the horizon (SQL only), one whose push was lost, a
// retry on a redis topic whose Redis copy was lost (the recoverer's row);
// each moved later and earlier. With the Redis step first, or with a job
// Redis lacks left absent after the row moved, the stale push makes the job
// due early and this fails.
func TestRescheduleAtEveryStepOfStalePasses(t *testing.T) {
	const horizon = time.Minute
	e := newDurableEnv(t, horizon)
	ctx := testenv.Context(t)
	e.ensureEpoch(t, durableTopic, "t")
	now := e.redisNow(t)
	p := e.ns + ":{" + durableTopic + "}:"
	forget := func(prefix, id string) {
		if err := e.rdb.ZRem(ctx, prefix+"due", id).Err(); err != nil {
			t.Fatal(err)
		}
		if err := e.rdb.HDel(ctx, prefix+"job", id).Err(); err != nil {
			t.Fatal(err)
		}
	}
	enqueue := func(topic, id string, delay time.Duration) {
		if _, err := e.c.Enqueue(ctx, topic, queue.NewJob{ID: id, Payload: []byte(`{}`), Delay: delay}); err != nil {
			t.Fatal(err)
		}
	}
	type tc struct {
		topic, id string
		to        queue.When
	}
	enqueue(durableTopic, "in-later", 50*time.Second)
	enqueue(durableTopic, "in-earlier", 50*time.Second)
	enqueue(durableTopic, "beyond-later", 2*horizon)
	enqueue(durableTopic, "beyond-earlier", 2*horizon) // into the horizon
	enqueue(durableTopic, "beyond-still", 3*horizon)   // earlier, still beyond it
	enqueue(durableTopic, "lost-later", 50*time.Second)
	enqueue(durableTopic, "lost-earlier", 50*time.Second)
	forget(p, "lost-later")
	forget(p, "lost-earlier")
	cases := []tc{
		{durableTopic, "in-later", queue.RescheduleBy(20 * time.Minute)},
		{durableTopic, "in-earlier", queue.RescheduleBy(-30 * time.Second)},
		{durableTopic, "beyond-later", queue.RescheduleBy(20 * time.Minute)},
		{durableTopic, "beyond-earlier", queue.RescheduleBy(-100 * time.Second)},
		{durableTopic, "beyond-still", queue.RescheduleBy(-30 * time.Second)},
		{durableTopic, "lost-later", queue.RescheduleBy(20 * time.Minute)},
		{durableTopic, "lost-earlier", queue.RescheduleBy(-30 * time.Second)},
	}
	// Retries of a redis topic whose Redis copies were lost; their rows
	// stale, so every recovery run looks at them.
	for _, id := range []string{"retry-later", "retry-earlier"} {
		e.record(t, []row{{topic: "t", id: id, attempt: 1, runAt: now + 50_000, leaseUntil: now - 60_000, retrying: true, lastError: "x"}})
	}
	cases = append(cases, tc{"t", "retry-later", queue.RescheduleBy(20 * time.Minute)}, tc{"t", "retry-earlier", queue.RescheduleBy(-30 * time.Second)})

	relay := e.relay(t, recoverer.RelayConfig{})
	rec := e.recoverer(t, recoverer.Config{Grace: 2 * time.Millisecond, HeartbeatInterval: time.Millisecond})
	for _, c := range cases {
		t.Run(c.id, func(t *testing.T) {
			seen := e.redisNow(t)
			old, err := ledgerops.Of(e.led).Lookup(ctx, c.topic, c.id)
			if err != nil || old == nil {
				t.Fatalf("row: %v, %v", old, err)
			}
			l := &stalePasses{RescheduleLedger: ledgerops.Of(e.led), t: t, c: e.c, relay: relay, rec: rec, old: old, seen: seen}
			r, err := e.c.Reschedule(ctx, l, c.topic, c.id, c.to)
			if err != nil {
				t.Fatal(err)
			}
			if r.RunAt != old.RunAt+c.to.D.Milliseconds() {
				t.Fatalf("moved to %d, want %d + %s", r.RunAt, old.RunAt, c.to.D)
			}
			l.passes(ctx) // and once more afterwards
			at, ok := e.inRedis(t, c.topic, c.id)
			if !ok || at != r.RunAt {
				t.Fatalf("Redis has it at %d (%v), want the accepted %d (old %d)", at, ok, r.RunAt, old.RunAt)
			}
			row, err := ledgerops.Of(e.led).Lookup(ctx, c.topic, c.id)
			if err != nil || row == nil || row.RunAt != r.RunAt {
				t.Fatalf("row %+v, %v; want run_at %d", row, err, r.RunAt)
			}
		})
	}
}

// TestFaultReschedulesRacingClaimsAndPasses: durable jobs, some within the
// horizon (a third of those with their push lost) and some beyond it, fall
// due over a couple of seconds while workers claim them (every fifth fails
// its first attempt into a short retry), two recoverers and two relays pass
// in loops and the topic's epoch marker keeps disappearing (every recovery
// run is a data-loss run that resets the relay's mark: reloads). Each job is
// rescheduled, absolute, from now or by a shift, earlier and later, several
// times around its due time. Every job then runs its attempts and succeeds
// exactly once, and no claim ever comes before the last due time a
// reschedule accepted for that attempt (on Redis's clock, the claim's).
func TestFaultReschedulesRacingClaimsAndPasses(t *testing.T) {
	const horizon = 2 * time.Second
	const lease = 30 * time.Second
	n := scale(500, 2500) // two reschedules each: 1,000 (5,000)
	span := time.Duration(scale(4, 20)) * time.Second
	e := newDurableEnv(t, horizon)
	ctx := testenv.Context(t)

	base := e.redisNow(t) + 300
	jobs := make([]queue.NewJob, n)
	due := make([]int64, n)
	for i := range jobs {
		due[i] = base + int64(i)*span.Milliseconds()/int64(n)
		if i%4 == 3 {
			due[i] += horizon.Milliseconds() + 500
		}
		jobs[i] = queue.NewJob{ID: jobID(i), Payload: []byte(`{}`), RunAt: due[i]}
	}
	for lo := 0; lo < n; lo += 1000 {
		if _, err := e.c.EnqueueBatch(ctx, durableTopic, jobs[lo:min(lo+1000, n)]); err != nil {
			t.Fatal(err)
		}
	}
	p := e.ns + ":{" + durableTopic + "}:"
	for i := 0; i < n; i += 6 {
		if err := e.rdb.ZRem(ctx, p+"due", jobID(i)).Err(); err != nil {
			t.Fatal(err)
		}
		if err := e.rdb.HDel(ctx, p+"job", jobID(i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	e.ensureEpoch(t, durableTopic)

	// Accepted due times per claim to come: (id, attempt it waits at).
	type key struct {
		id      string
		attempt int
	}
	var mu sync.Mutex
	accepted := map[key]int64{}
	claimedAt := map[key]int64{} // the claim of attempt+1, on Redis's clock
	startedAt := map[key]int64{} // its handler's start, on Redis's clock
	succeeded := map[string]int{}
	var done testenv.Counter

	w, err := dataplane.NewWorker(e.c, ledgerops.Of(e.led), queue.WorkerConfig{Logger: e.log, ID: "race"})
	if err != nil {
		t.Fatal(err)
	}
	h := queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		now, err := e.rdb.Time(ctx).Result()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		k := key{j.ID, j.Attempt - 1}
		startedAt[k] = now.UnixMilli()
		if _, dup := claimedAt[k]; dup {
			t.Errorf("%s: attempt %d claimed twice", j.ID, j.Attempt)
		}
		claimedAt[k] = j.LeaseUntil - lease.Milliseconds()
		var i int
		fmt.Sscanf(j.ID, "j%d", &i)
		if i%5 == 0 && j.Attempt == 1 {
			return queue.RetryAfter(errors.New("first attempt fails"), 300*time.Millisecond)
		}
		succeeded[j.ID]++
		done.Add(1)
		return nil
	})
	if err := w.Handle(durableTopic, h, queue.TopicConfig{Concurrency: 16, Lease: lease, MaxAttempts: 5}); err != nil {
		t.Fatal(err)
	}
	testenv.Start(t, w.Run)

	loops, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	passes := map[string]int{}
	// running counts the relay and recoverer passes under way, so that a
	// reschedule can tell whether it raced one (a signal, not a clock).
	var running testenv.Counter
	loop := func(name string, pass func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for loops.Err() == nil {
				running.Add(1)
				err := pass(loops)
				running.Add(-1)
				if err != nil && loops.Err() == nil {
					t.Errorf("%s: %v", name, err)
					return
				}
				mu.Lock()
				passes[name]++
				mu.Unlock()
			}
		}()
	}
	for i := range 2 {
		r := e.recoverer(t, recoverer.Config{LockKey: fmt.Sprintf("%s:rlock-%d", e.ns, i), Grace: 2 * time.Millisecond,
			HeartbeatInterval: time.Millisecond, PageSize: 50, Chunk: 10})
		loop(fmt.Sprintf("recoverer %d", i), func(ctx context.Context) error { _, err := r.RunOnce(ctx); return err })
	}
	for i := range 2 {
		r := e.relay(t, recoverer.RelayConfig{LockKey: fmt.Sprintf("%s:relaylock-%d", e.ns, i), PageSize: 50})
		loop(fmt.Sprintf("relay %d", i), func(ctx context.Context) error { _, _, err := r.RunOnce(ctx); return err })
	}
	loop("epoch remover", func(ctx context.Context) error {
		tm := time.NewTimer(100 * time.Millisecond)
		defer tm.Stop()
		select {
		case <-tm.C:
		case <-ctx.Done():
			return nil
		}
		return e.rdb.Del(ctx, p+"epoch").Err()
	})

	// The reschedulers: job i belongs to goroutine i%movers, so one job's
	// reschedules are sequential and "the last accepted" is well defined.
	const movers = 16
	var results sync.Map // outcome name -> *testenv.Counter
	count := func(what string) {
		c, _ := results.LoadOrStore(what, new(testenv.Counter))
		c.(*testenv.Counter).Add(1)
	}
	var rwg sync.WaitGroup
	for g := range movers {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 17))
			// Two reschedules per job, around its due time as it falls:
			// 150 ms before and 30 ms after its first due time.
			type event struct {
				at int64
				i  int
			}
			var events []event
			for i := g; i < n; i += movers {
				for _, off := range []int64{-150, 30} {
					events = append(events, event{due[i] + off, i})
				}
			}
			sort.Slice(events, func(a, b int) bool { return events[a].at < events[b].at })
			for _, ev := range events {
				i := ev.i
				if d := time.Until(time.UnixMilli(ev.at)); d > 0 {
					time.Sleep(d) // pacing against the clock: act around the due time
				}
				var to queue.When
				shift := time.Duration(rng.IntN(700)-200) * time.Millisecond
				switch rng.IntN(3) {
				case 0:
					to = queue.RescheduleAt(time.Now().Add(shift).UnixMilli())
				case 1:
					to = queue.RescheduleIn(max(shift, 0))
				default:
					to = queue.RescheduleBy(shift)
				}
				racing := running.Load() > 0
				r, err := e.c.Reschedule(ctx, ledgerops.Of(e.led), durableTopic, jobID(i), to)
				switch {
				case err == nil:
					mu.Lock()
					accepted[key{jobID(i), r.Job.Attempt}] = r.RunAt
					mu.Unlock()
					count("accepted")
					if racing && running.Load() > 0 {
						count("accepted during a pass")
					}
				case errors.Is(err, queue.ErrInFlight):
					count("in flight")
				case errors.Is(err, queue.ErrNotFound):
					count("done")
				default:
					t.Errorf("reschedule %s %s: %v", jobID(i), to, err)
				}
			}
		}()
	}
	rwg.Wait()
	done.WaitAtLeast(ctx, t, int64(n), "every job to succeed")
	stop()
	wg.Wait()
	outcomes := map[string]int64{}
	results.Range(func(k, v any) bool { outcomes[k.(string)] = v.(*testenv.Counter).Load(); return true })
	t.Logf("%d jobs, reschedules %v, racing passes %v", n, outcomes, passes)
	// The race happened when reschedules were accepted while a relay or
	// recoverer pass was under way, and others met a job already claimed.
	// How many of each depends on the host's load (the reschedules are
	// paced against the clock), so the floor is low: a tenth of the jobs.
	if outcomes["accepted during a pass"] < int64(n)/10 || outcomes["in flight"] == 0 {
		t.Errorf("%d reschedules accepted during a pass, %d met a claimed job, for %d jobs: the race did not happen",
			outcomes["accepted during a pass"], outcomes["in flight"], n)
	}

	// Whatever a pass brought back would be due by now: let the relay pass
	// a few more times, then Redis and the ledger must be empty.
	relay := e.relay(t, recoverer.RelayConfig{})
	testenv.Start(t, relay.Run)
	testenv.WaitFor(ctx, t, "three more relay passes, Redis and the ledger empty", func() bool {
		st, err := e.c.Stats(ctx, durableTopic)
		return relay.Totals().Passes >= 3 && err == nil && st.Due == 0 && st.InFlight == 0 &&
			len(e.scheduledRows(t, durableTopic)) == 0
	})
	mu.Lock()
	defer mu.Unlock()
	bad := 0
	for i := range n {
		id := jobID(i)
		if succeeded[id] != 1 {
			bad++
			t.Errorf("%s succeeded %d times, want once", id, succeeded[id])
		}
	}
	early := 0
	for k, at := range accepted {
		// A worker claims up to the claim-ahead before the due time, and
		// starts the handler at it, never before.
		claimed, ok := claimedAt[k]
		switch {
		case !ok:
			bad++
			t.Errorf("%s: rescheduled at attempt %d to %d, never claimed after", k.id, k.attempt, at)
		case claimed < at-queue.DefaultClaimAhead.Milliseconds():
			early++
			t.Errorf("%s: attempt %d claimed at %d, %d ms before its accepted due time %d, more than the claim-ahead", k.id, k.attempt+1, claimed, at-claimed, at)
		case startedAt[k] < at:
			early++
			t.Errorf("%s: attempt %d started at %d, %d ms before its accepted due time %d", k.id, k.attempt+1, startedAt[k], at-startedAt[k], at)
		}
		if bad+early > 10 {
			t.FailNow()
		}
	}
	if bad+early == 0 {
		t.Logf("every job succeeded once; %d accepted due times, none started early", len(accepted))
	}
}

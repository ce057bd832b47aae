package scheduler_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/scheduler"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// env is a queue client on the test Redis with topic "dur" durable in a
// ledger on db.
type env struct {
	q   *dataplane.Client
	led *ledger.Ledger
	ns  string
}

func newEnv(t *testing.T, db *gorm.DB) env {
	t.Helper()
	rdb, ns := testenv.Redis(t)
	led, err := ledger.New(db, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := led.Migrate(testenv.Context(t)); err != nil {
		t.Fatal(err)
	}
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns, Store: led,
		TopicDurability: map[string]queue.Durability{"dur": queue.DurabilityDurable}})
	if err != nil {
		t.Fatal(err)
	}
	return env{q: q, led: led, ns: ns}
}

func tickJob(name string, tick time.Time) queue.NewJob {
	return queue.NewJob{ID: scheduler.JobID(name, tick), RunAt: tick.UnixMilli(), Payload: []byte("p")}
}

// runAll claims and acks every job of topic that is due, as a worker
// would, until none is left; it returns the ids.
func runAll(t *testing.T, e env, topic string) []string {
	t.Helper()
	ctx := testenv.Context(t)
	var ids []string
	for {
		c, err := e.q.Claim(ctx, topic, 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Jobs) == 0 {
			return ids
		}
		if err := ledgerops.Of(e.led).Record(ctx, c.Jobs, "w"); err != nil {
			t.Fatal(err)
		}
		refs := make([]queue.Ref, len(c.Jobs))
		for i, j := range c.Jobs {
			refs[i] = j.Ref()
			ids = append(ids, j.ID)
		}
		if _, err := e.q.Ack(ctx, refs); err != nil {
			t.Fatal(err)
		}
		if err := ledgerops.Of(e.led).Complete(ctx, refs); err != nil {
			t.Fatal(err)
		}
	}
}

// On a Redis topic, a tick whose job already ran and was acked is still a
// duplicate for a process that comes late to it: the ticks hash decides,
// not the (gone) job id. Earlier ticks are duplicates too.
func TestRedisTickLateEnqueueOfAnAckedTickIsADuplicate(t *testing.T) {
	e := newEnv(t, testenv.SQLite(t))
	ctx := testenv.Context(t)
	tick := time.Now().Truncate(time.Second)
	r, err := e.q.EnqueueTick(ctx, nil, "t", "s", tick.UnixMilli(), tickJob("s", tick))
	if err != nil || r.Duplicate || r.Job.Duplicate || r.Job.RunAt < tick.UnixMilli() {
		t.Fatalf("first claim: %+v %v", r, err)
	}
	if ids := runAll(t, e, "t"); len(ids) != 1 || ids[0] != scheduler.JobID("s", tick) {
		t.Fatalf("ran %v", ids)
	}
	for _, tk := range []time.Time{tick, tick.Add(-time.Second)} {
		r, err = e.q.EnqueueTick(ctx, nil, "t", "s", tk.UnixMilli(), tickJob("s", tk))
		if err != nil || !r.Duplicate || r.LastTick != tick.UnixMilli() {
			t.Fatalf("late claim of %s: %+v %v", tk, r, err)
		}
	}
	if ids := runAll(t, e, "t"); len(ids) != 0 {
		t.Fatalf("ran again: %v", ids)
	}
	next := tick.Add(time.Second)
	if r, err = e.q.EnqueueTick(ctx, nil, "t", "s", next.UnixMilli(), tickJob("s", next)); err != nil || r.Duplicate {
		t.Fatalf("next tick: %+v %v", r, err)
	}
	last, err := e.q.LastTicks(ctx, nil, "t", "s", "other")
	if err != nil || len(last) != 1 || last["s"] != next.UnixMilli() {
		t.Fatalf("last ticks %v %v", last, err)
	}
	if _, err := e.q.EnqueueTick(ctx, nil, "dur", "s", next.UnixMilli(), tickJob("s", next)); !errors.Is(err, queue.ErrTickDurable) {
		t.Fatalf("a durable topic's tick without its store: %v, want ErrTickDurable", err)
	}
	// With the store, the client sends a durable topic's tick to SQL: the
	// tick's row and its job's, then the push.
	if r, err := e.q.EnqueueTick(ctx, ledgerops.Of(e.led), "dur", "ds", next.UnixMilli(), tickJob("ds", next)); err != nil || r.Duplicate {
		t.Fatalf("a durable topic's tick through the client: %+v %v", r, err)
	}
	if row, err := e.led.Row(ctx, "dur", scheduler.JobID("ds", next)); err != nil || row.State != queue.StateWaiting {
		t.Fatalf("the tick's job row: %+v %v", row, err)
	}
	if last, err := e.q.LastTicks(ctx, ledgerops.Of(e.led), "dur", "ds"); err != nil || last["ds"] != next.UnixMilli() {
		t.Fatalf("a durable topic's last ticks through the client: %v %v", last, err)
	}
	if inRedis, err := e.q.LastTicks(ctx, nil, "t", "ds"); err != nil || len(inRedis) != 0 {
		t.Fatalf("the durable tick in the redis topic's ticks: %v %v", inRedis, err)
	}
}

// On a durable topic (MariaDB), concurrent claims of one tick enqueue it
// once, a late claim after the job ran is a duplicate, and the tick's job
// has its scheduled row.
func TestDurableTickClaimedOnceOnMariaDB(t *testing.T) {
	e := newEnv(t, testenv.MySQL(t))
	ctx := testenv.Context(t)
	tick := time.Now().Truncate(time.Second)
	var enqueued, dups atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := ledgerops.Of(e.led).EnqueueTick(ctx, e.q, "dur", "d", tick.UnixMilli(), tickJob("d", tick))
			if err != nil {
				t.Error(err)
				return
			}
			if r.Duplicate {
				dups.Add(1)
			} else if !r.Job.Duplicate {
				enqueued.Add(1)
			}
		}()
	}
	wg.Wait()
	if enqueued.Load() != 1 || dups.Load() != 7 {
		t.Fatalf("enqueued %d, duplicates %d", enqueued.Load(), dups.Load())
	}
	if _, err := e.led.Row(ctx, "dur", scheduler.JobID("d", tick)); err != nil {
		t.Fatalf("the tick's scheduled row: %v", err)
	}
	if ids := runAll(t, e, "dur"); len(ids) != 1 {
		t.Fatalf("ran %v", ids)
	}
	r, err := ledgerops.Of(e.led).EnqueueTick(ctx, e.q, "dur", "d", tick.UnixMilli(), tickJob("d", tick))
	if err != nil || !r.Duplicate || r.LastTick != tick.UnixMilli() {
		t.Fatalf("late claim: %+v %v", r, err)
	}
	last, err := e.led.LastTicks(ctx, "d", "none")
	if err != nil || len(last) != 1 || last["d"] != tick.UnixMilli() {
		t.Fatalf("last ticks %v %v", last, err)
	}
	// An invalid job rolls the claim back.
	bad := tickJob("d", tick.Add(time.Second))
	bad.MaxAttempts = 1000
	if _, err := ledgerops.Of(e.led).EnqueueTick(ctx, e.q, "dur", "d", tick.Add(time.Second).UnixMilli(), bad); err == nil {
		t.Fatal("invalid job accepted")
	}
	if last, _ := e.led.LastTicks(ctx, "d"); last["d"] != tick.UnixMilli() {
		t.Fatalf("the failed claim moved the last tick: %v", last)
	}
}

// recorder is an Observer that counts results.
type recorder struct {
	mu   sync.Mutex
	n    map[scheduler.Result]int
	next time.Time
	ev   testenv.Event
}

func (r *recorder) Tick(_ string, res scheduler.Result) {
	r.mu.Lock()
	if r.n == nil {
		r.n = map[scheduler.Result]int{}
	}
	r.n[res]++
	r.mu.Unlock()
	r.ev.Notify()
}

func (r *recorder) NextRun(_ string, next time.Time) {
	r.mu.Lock()
	r.next = next
	r.mu.Unlock()
	r.ev.Notify()
}

func (r *recorder) count(res scheduler.Result) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[res]
}

// Two schedulers on one schedule, each second: each tick enqueued once.
// List shows the next run and the last tick.
func TestSchedulersShareTicks(t *testing.T) {
	for _, topic := range []string{"t", "dur"} {
		t.Run(topic, func(t *testing.T) {
			e := newEnv(t, testenv.SQLite(t))
			ctx := testenv.Context(t)
			sc := []scheduler.Schedule{{Name: "each", Spec: "* * * * * *", Topic: topic, Priority: 2}}
			var obs [2]recorder
			for i := range obs {
				s, err := scheduler.New(e.q, ledgerops.Of(e.led), sc, scheduler.Options{Observer: &obs[i]})
				if err != nil {
					t.Fatal(err)
				}
				r := testenv.Start(t, s.Run)
				defer r.Stop()
			}
			total := func() int {
				return obs[0].count(scheduler.ResultEnqueued) + obs[1].count(scheduler.ResultEnqueued)
			}
			claims := func() int {
				n := 0
				for i := range obs {
					n += obs[i].count(scheduler.ResultEnqueued) + obs[i].count(scheduler.ResultDuplicate)
				}
				return n
			}
			for claims() < 6 {
				obs[0].ev.Wait(ctx, t, "6 claims", func() bool { return claims() >= 6 })
			}
			if errs := obs[0].count(scheduler.ResultError) + obs[1].count(scheduler.ResultError); errs != 0 {
				t.Fatalf("%d errors", errs)
			}
			// The ticks' jobs have the schedule's priority.
			c, err := e.q.Claim(ctx, topic, 1, time.Minute)
			if err != nil || len(c.Jobs) != 1 || c.Jobs[0].Priority != 2 {
				t.Fatalf("claim: %v %v, want a job of priority 2", c, err)
			}
			if _, err := e.q.Release(ctx, []queue.Ref{c.Jobs[0].Ref()}); err != nil {
				t.Fatal(err)
			}
			ids := runAll(t, e, topic)
			seen := map[string]bool{}
			for _, id := range ids {
				if seen[id] {
					t.Fatalf("tick %s enqueued twice", id)
				}
				seen[id] = true
			}
			if len(ids) < 3 || len(ids) > total() {
				t.Fatalf("%d jobs ran, %d enqueued", len(ids), total())
			}
			s, _ := scheduler.New(e.q, ledgerops.Of(e.led), sc, scheduler.Options{})
			list, err := s.List(ctx)
			if err != nil || len(list) != 1 {
				t.Fatalf("list %v %v", list, err)
			}
			if l := list[0]; l.LastTick == 0 || l.NextRun <= l.LastTick || l.Running || l.Durability != string(e.q.Durability(topic)) || l.Priority != 2 {
				t.Fatalf("list %+v", l)
			}
		})
	}
}

// Missed "once" enqueues the latest missed tick at start, at once; "skip"
// enqueues nothing before the next tick. A schedule never run before starts
// at its next tick.
func TestMissedPolicy(t *testing.T) {
	e := newEnv(t, testenv.SQLite(t))
	ctx := testenv.Context(t)
	hourAgo := time.Now().Add(-time.Hour).Truncate(time.Minute)
	for _, name := range []string{"once", "skip"} {
		if _, err := e.q.EnqueueTick(ctx, nil, "t", name, hourAgo.UnixMilli(), tickJob(name, hourAgo)); err != nil {
			t.Fatal(err)
		}
	}
	runAll(t, e, "t")
	// Every minute: no regular tick comes within the test (unless it runs
	// across a minute's turn, which only adds a tick the asserts allow).
	sc := []scheduler.Schedule{
		{Name: "once", Spec: "0 * * * * *", Topic: "t", Missed: scheduler.MissedOnce},
		{Name: "skip", Spec: "0 * * * * *", Topic: "t"},
		{Name: "new", Spec: "0 * * * * *", Topic: "t", Missed: scheduler.MissedOnce},
	}
	var obs recorder
	s, err := scheduler.New(e.q, ledgerops.Of(e.led), sc, scheduler.Options{Observer: &obs})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := testenv.Start(t, s.Run)
	obs.ev.Wait(ctx, t, "the missed tick enqueued", func() bool { return obs.count(scheduler.ResultEnqueued) >= 1 })
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	latest := start.Truncate(time.Minute)
	byName := map[string]scheduler.Info{}
	for _, l := range list {
		byName[l.Name] = l
	}
	if got := byName["once"].LastTick; got != latest.UnixMilli() && got != latest.Add(time.Minute).UnixMilli() {
		t.Fatalf("once: last tick %d, want %d", got, latest.UnixMilli())
	}
	if got := byName["skip"].LastTick; got != hourAgo.UnixMilli() && got <= latest.UnixMilli() {
		t.Fatalf("skip: last tick %d, a missed one enqueued", got)
	}
	if got := byName["new"].LastTick; got != 0 && got <= latest.UnixMilli() {
		t.Fatalf("new: last tick %d, a tick before its start", got)
	}
	ids := runAll(t, e, "t")
	if len(ids) < 1 || ids[0] != scheduler.JobID("once", latest) && ids[0] != scheduler.JobID("once", latest.Add(time.Minute)) {
		t.Fatalf("ran %v", ids)
	}
}

func TestNewRefusesBadSchedules(t *testing.T) {
	e := newEnv(t, testenv.SQLite(t))
	for _, sc := range [][]scheduler.Schedule{
		{{Name: "a", Spec: "@hourly", Topic: "bad topic"}},
		{{Name: "a", Spec: "@hourly", Topic: "t"}, {Name: "a", Spec: "@daily", Topic: "t"}},
		{{Name: "a", Spec: "@hourly", Topic: "t", Payload: make([]byte, 2<<20)}},
		{{Name: "a", Spec: "@hourly", Topic: "t", Priority: 4}},
	} {
		if _, err := scheduler.New(e.q, ledgerops.Of(e.led), sc, scheduler.Options{}); err == nil {
			t.Errorf("%+v accepted", sc)
		}
	}
	if _, err := scheduler.New(e.q, nil, []scheduler.Schedule{{Name: "a", Spec: "@hourly", Topic: "dur"}}, scheduler.Options{}); err == nil {
		t.Error("durable topic without a store accepted")
	}
}

package dataplane

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/testenv"
)

// A wait on a store known down ends as soon as a ping answers, however
// long the caller's pause; the outage is logged once when it begins and
// once when it ends, however many pings failed.
func TestStoreWatchWakesWaitersWhenTheStoreAnswers(t *testing.T) {
	var up atomic.Bool
	var pings atomic.Int64
	failing := testenv.Event{}
	ping := func(context.Context) error {
		if pings.Add(1) >= 3 {
			failing.Notify()
		}
		if up.Load() {
			return nil
		}
		return errors.New("connection refused")
	}
	var out testenv.SyncBuffer
	log := logrus.New()
	log.SetOutput(&out)
	log.SetFormatter(&logrus.JSONFormatter{})
	s := newStoreWatch("redis", ping, 5*time.Millisecond, time.Hour, log)

	err := s.result(errors.New("claim: EOF"))
	if watchOf(err) != s || !strings.Contains(err.Error(), "claim: EOF") {
		t.Fatalf("result: %v, watch %p; want the error marked with the watch", err, watchOf(err))
	}
	ctx := testenv.Context(t)
	woke := make(chan struct{}, 2)
	for range 2 { // two callers, one probe
		go func() { awaitStore(ctx, nil, err, time.Hour); woke <- struct{}{} }()
	}
	failing.Wait(ctx, t, "three failed pings", func() bool { return pings.Load() >= 3 })
	if !s.isDown() {
		t.Fatal("the watch does not know the store is down after failed pings")
	}
	select {
	case <-woke:
		t.Fatal("a waiter woke while the store was down")
	default:
	}
	up.Store(true)
	for range 2 {
		select {
		case <-woke:
		case <-ctx.Done():
			t.Fatal("the waiters sleep on though the store answers")
		}
	}
	if s.isDown() {
		t.Fatal("the watch still thinks the store is down")
	}
	if got := strings.Count(out.String(), `"msg":"redis not answering`); got != 1 {
		t.Errorf("outage start logged %d times, want once:\n%s", got, out.String())
	}
	if got := strings.Count(out.String(), `"msg":"redis answers again`); got != 1 {
		t.Errorf("outage end logged %d times, want once:\n%s", got, out.String())
	}
	if !strings.Contains(out.String(), `"store":"redis"`) {
		t.Errorf("the outage's lines do not name the store:\n%s", out.String())
	}
}

// A call that fails on a store that answers pings (a script error, a bad
// statement) is no outage: nothing is logged, and the caller keeps its
// pause instead of trying again at once.
func TestStoreWatchLeavesAFailingCallToTheBackoff(t *testing.T) {
	var out testenv.SyncBuffer
	log := logrus.New()
	log.SetOutput(&out)
	var pings atomic.Int64
	s := newStoreWatch("ledger", func(context.Context) error { pings.Add(1); return nil }, 5*time.Millisecond, time.Hour, log)
	err := s.result(errors.New("syntax error"))
	pause := 50 * time.Millisecond
	began := time.Now()
	awaitStore(testenv.Context(t), nil, err, pause)
	if waited := time.Since(began); waited < pause {
		t.Errorf("waited %s, less than the pause %s: a store that answers pings cut the backoff short", waited, pause)
	}
	if s.isDown() || out.String() != "" || pings.Load() == 0 {
		t.Errorf("down %v, %d pings, logs %q; want a ping and nothing logged", s.isDown(), pings.Load(), out.String())
	}
}

// failScript fails the calls of one script (by its SHA) while on is set:
// a Redis that answers everything else.
type failScript struct {
	sha string
	on  atomic.Bool
}

func (*failScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); f.on.Load() && cmd.Name() == "evalsha" && len(args) > 1 && args[1] == f.sha {
			cmd.SetErr(errOutage)
			return errOutage
		}
		return next(ctx, cmd)
	}
}

func (*failScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// failingLedger fails Complete while fail is set.
type failingLedger struct {
	memLedger
	fail atomic.Bool
}

func (l *failingLedger) Complete(ctx context.Context, refs []Ref) error {
	if l.fail.Load() {
		return errors.New("test: ledger outage")
	}
	return l.memLedger.Complete(ctx, refs)
}

func (l *failingLedger) CompleteResults(ctx context.Context, refs []Ref, _ [][]byte) error {
	return l.Complete(ctx, refs)
}

// A finished job whose settlement cannot land (its ledger step failing, or
// its ledger step done and its Redis ack failing) keeps its Redis lease:
// the heartbeat renews it past its first deadline, so no other worker can
// claim the job; once the store is back it is settled, and it ran once.
func TestHeartbeatRenewsLeasesOfUnsettledJobs(t *testing.T) {
	for _, failing := range []string{"ledger", "redis"} {
		t.Run(failing, func(t *testing.T) {
			rdb, ns := testenv.Redis(t)
			c, err := New(rdb, Config{Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			ack := &failScript{sha: c.scripts.ack.Hash()}
			rdb.AddHook(ack)
			led := &failingLedger{memLedger: memLedger{rows: map[string]int{}}}
			if failing == "ledger" {
				led.fail.Store(true)
			} else {
				ack.on.Store(true)
			}
			obs := &completedCounter{}
			w, err := NewWorker(c, led, WorkerConfig{Logger: testenv.QuietLogger(), Observer: obs,
				ErrorBackoffMin: 10 * time.Millisecond, ErrorBackoffMax: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			var runs testenv.Counter
			err = w.Handle("t", HandlerFunc(func(context.Context, *Job) error { runs.Add(1); return nil }),
				TopicConfig{Lease: time.Second, Heartbeat: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			ctx := testenv.Context(t)
			if _, err := c.Enqueue(ctx, "t", NewJob{ID: "j"}); err != nil {
				t.Fatal(err)
			}
			testenv.Start(t, w.Run)
			runs.WaitAtLeast(ctx, t, 1, "the job handled")
			key := ns + ":{t}:lease"
			first, err := rdb.ZScore(ctx, key, "j").Result()
			if err != nil {
				t.Fatal(err)
			}
			// Two leases past the deadline the job had when it finished.
			testenv.WaitFor(ctx, t, "the finished job's lease renewed past its first deadline", func() bool {
				s, err := rdb.ZScore(ctx, key, "j").Result()
				return err == nil && s > first+2*float64(time.Second.Milliseconds())
			})
			if n := obs.unsettled.Load(); n != 1 {
				t.Fatalf("the heartbeat reported %d unsettled jobs, want 1", n)
			}
			other, err := c.Claim(ctx, "t", 10, time.Second)
			if err != nil || len(other.Jobs) != 0 {
				t.Fatalf("another worker's claim: %d jobs, %v; want none", len(other.Jobs), err)
			}
			if failing == "redis" {
				led.mu.Lock()
				rows := len(led.rows)
				led.mu.Unlock()
				if rows != 0 {
					t.Fatalf("%d ledger rows: the ledger step should be done while the ack fails", rows)
				}
			}
			led.fail.Store(false)
			ack.on.Store(false)
			obs.n.WaitAtLeast(ctx, t, 1, "the job completed")
			st, err := c.Stats(ctx, "t")
			if err != nil || st.InFlight != 0 || st.Due != 0 {
				t.Fatalf("stats %+v, %v; want the job gone", st, err)
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("the job ran %d times", n)
			}
		})
	}
}

// completedCounter counts completions and keeps the last unsettled count
// the heartbeat reported.
type completedCounter struct {
	NopObserver
	n         testenv.Counter
	unsettled atomic.Int64
}

func (c *completedCounter) Completed(_ string, n int) { c.n.Add(int64(n)) }
func (c *completedCounter) Unsettled(_ string, n int) { c.unsettled.Store(int64(n)) }

// Jobs recorded and waiting for a handler are renewed too, their own
// deadline moved with Redis's; but a job whose lease had run out before the
// heartbeat renewed it keeps its deadline, and is not run: another worker
// may have claimed it meanwhile (extend.lua renews any lease of the id).
func TestHeartbeatRenewsQueuedJobsWhoseLeaseStillRuns(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	c, err := New(rdb, Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	led := &memLedger{rows: map[string]int{}}
	w, err := NewWorker(c, led, WorkerConfig{Logger: testenv.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	const lease = 300 * time.Millisecond
	if err := w.Handle("t", HandlerFunc(func(context.Context, *Job) error { return nil }),
		TopicConfig{Concurrency: 2, Lease: lease, Heartbeat: lease / 3}); err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	for i := range 2 {
		if _, err := c.Enqueue(ctx, "t", NewJob{ID: fmt.Sprint("j", i)}); err != nil {
			t.Fatal(err)
		}
	}
	tr := w.topics["t"]
	// A claim with no handler goroutine: the jobs stay queued.
	tr.tokens <- struct{}{} // as fetchLoop does
	if _, _, err := tr.testFetch(ctx, 2, 2); err != nil {
		t.Fatal(err)
	}
	for range RecordPipeline { // all tokens back: the record goroutine is done
		tr.tokens <- struct{}{}
	}
	jobs := []*Job{<-tr.work, <-tr.work}
	for _, j := range jobs {
		tr.work <- j
	}
	claimed := jobs[0].LeaseUntil
	testenv.WaitFor(ctx, t, "Redis's clock past the claim", func() bool {
		now, err := c.Time(ctx)
		return err == nil && now.UnixMilli() > claimed-lease.Milliseconds()+50
	})
	w.beat(ctx)
	for _, j := range jobs {
		tr.mu.Lock()
		until := j.LeaseUntil
		tr.mu.Unlock()
		s, err := rdb.ZScore(ctx, ns+":{t}:lease", j.ID).Result()
		if err != nil || until <= claimed || int64(s) != until {
			t.Fatalf("%s after a beat: LeaseUntil %d (claimed until %d), Redis %v %v; want both moved on", j.ID, until, claimed, s, err)
		}
	}

	// Both leases run out; another worker claims the jobs. A beat then
	// renews the new claims' leases in Redis, but the queued jobs keep
	// their deadlines: they are no longer this worker's.
	testenv.WaitFor(ctx, t, "the leases run out", func() bool {
		now, err := c.Time(ctx)
		return err == nil && now.UnixMilli() > jobs[0].LeaseUntil
	})
	before := []int64{jobs[0].LeaseUntil, jobs[1].LeaseUntil}
	other, err := c.Claim(ctx, "t", 2, time.Minute)
	if err != nil || len(other.Jobs) != 2 {
		t.Fatalf("the other worker's claim: %d jobs, %v", len(other.Jobs), err)
	}
	w.beat(ctx)
	for i, j := range jobs {
		tr.mu.Lock()
		until := j.LeaseUntil
		tr.mu.Unlock()
		if until != before[i] {
			t.Fatalf("%s: a beat after its lease ran out moved LeaseUntil from %d to %d", j.ID, before[i], until)
		}
	}
	var ran atomic.Int64
	tr.h = HandlerFunc(func(context.Context, *Job) error { ran.Add(1); return nil })
	for range 2 {
		tr.run(ctx, <-tr.work)
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("%d jobs whose lease ran out were run", n)
	}
}

package dataplane_test

import (
	"context"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
)

// rateObserver counts held-back claims and settled jobs.
type rateObserver struct {
	settled
	limited testenv.Counter
}

func (o *rateObserver) RateLimited(string) { o.limited.Add(1) }

// A worker held back by the rate limit sleeps until the next token: it
// neither polls (a claim per freed slot or per millisecond) nor waits for
// MaxIdle. 10 jobs at 20/s with a burst of 1 take about 450 ms, each
// claim after the first waiting for its token once or twice (a timer may
// fire a millisecond before Redis's clock gets there).
func TestWorkerRateLimitSleepsUntilNextToken(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	c, err := dataplane.New(rdb, dataplane.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	e := wenv{env: env{c: c, rdb: rdb, ns: ns}, led: sqliteLedger(t)}
	const jobs, rate = 10, 20.0
	enqueueMany(t, c, "t", "j", jobs, nil)
	obs := &rateObserver{}
	w := newWorker(t, e, dataplane.WorkerConfig{Observer: obs, MaxIdle: 10 * time.Second})
	if err := w.Handle("t", dataplane.HandlerFunc(func(context.Context, *dataplane.Job) error { return nil }),
		dataplane.TopicConfig{Concurrency: jobs, RateLimit: rate, RateBurst: 1}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	startWorker(t, w)
	obs.completed.WaitAtLeast(testenv.Context(t), t, jobs, "all jobs completed")
	took := time.Since(began)
	if n := obs.limited.Load(); n < jobs-1 || n > 3*jobs {
		t.Fatalf("%d held-back claims for %d jobs at a burst of 1: want one or two per job (no polling)", n, jobs)
	}
	// Upper bound only, generous: a fetcher that slept MaxIdle (10 s)
	// instead of until the token would take 90 s.
	if took > 5*time.Second {
		t.Fatalf("%d jobs at %v/s took %s", jobs, rate, took)
	}
}

// Shutdown ends a fetcher's sleep for a token at once.
func TestWorkerRateLimitShutdownEndsTokenSleep(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	c, err := dataplane.New(rdb, dataplane.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	e := wenv{env: env{c: c, rdb: rdb, ns: ns}, led: sqliteLedger(t)}
	enqueueMany(t, c, "t", "j", 2, nil)
	obs := &rateObserver{}
	w := newWorker(t, e, dataplane.WorkerConfig{Observer: obs, MaxIdle: time.Minute})
	if err := w.Handle("t", dataplane.HandlerFunc(func(context.Context, *dataplane.Job) error { return nil }),
		dataplane.TopicConfig{RateLimit: 0.01, RateBurst: 1}); err != nil { // next token in 100 s, sleep a minute
		t.Fatal(err)
	}
	stop := startWorker(t, w)
	obs.completed.WaitAtLeast(testenv.Context(t), t, 1, "the first job completed")
	obs.limited.WaitAtLeast(testenv.Context(t), t, 1, "the second job held back")
	began := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("shutdown took %s: the token sleep did not end", took)
	}
	if st, err := c.Stats(testenv.Context(t), "t"); err != nil || st.DueNow != 1 || st.InFlight != 0 {
		t.Fatalf("stats %+v, %v: want the held-back job still due", st, err)
	}
}

func TestWorkerRateLimitRefusesBadConfig(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	c, err := dataplane.New(rdb, dataplane.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	e := wenv{env: env{c: c, rdb: rdb, ns: ns}, led: sqliteLedger(t)}
	w := newWorker(t, e, dataplane.WorkerConfig{})
	h := dataplane.HandlerFunc(func(context.Context, *dataplane.Job) error { return nil })
	for i, tc := range []dataplane.TopicConfig{{RateLimit: -1}, {RateLimit: 5, RateBurst: -1}} {
		if err := w.Handle("t", h, tc); err == nil {
			t.Fatalf("case %d: %+v accepted", i, tc)
		}
	}
}

package dataplane

import (
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// prefetchWorker is a worker over Redis and a ledger in memory, not
// started: the tests set its topics' state by hand.
func prefetchWorker(t *testing.T) *Worker {
	t.Helper()
	_, w := idleWorker(t, &memLedger{rows: map[string]int{}})
	return w
}

// idleWorker is a client on its own namespace and a worker over it and
// led, not started.
func idleWorker(t *testing.T, led Ledger) (*Client, *Worker) {
	t.Helper()
	rdb, ns := testenv.Redis(t)
	c, err := New(rdb, Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWorker(c, led, WorkerConfig{Logger: testenv.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

// The rule of prefetch, without a clock race: the running handlers' ages
// are set by hand.
func TestClaimableAddsThePrefetchOnlyWhileQuickHandlersFaceABacklog(t *testing.T) {
	w := prefetchWorker(t)
	h := HandlerFunc(nil)
	if err := w.Handle("t", h, TopicConfig{Concurrency: 4, Prefetch: 3}); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("limited", h, TopicConfig{Concurrency: 4, Prefetch: 3, RateLimit: 100}); err != nil {
		t.Fatal(err)
	}
	tr := w.topics["t"]
	tr.busy.Store(4) // every slot taken
	check := func(what string, want int) {
		t.Helper()
		if _, got := tr.claimable(tr.testPart()); got != want {
			t.Fatalf("%s: claimable %d, want %d", what, got, want)
		}
	}
	check("no backlog, no run yet", 0)
	tr.testPart().backlog = true
	check("a backlog, handlers not known quick", 0)
	tr.ran(time.Millisecond)
	check("a backlog, quick handlers", 3)
	tr.active[Ref{Topic: "t", ID: "slow"}] = &activeJob{timer: time.NewTimer(time.Hour), began: time.Now().Add(-time.Second)}
	check("a handler running for a second", 0)
	delete(tr.active, Ref{Topic: "t", ID: "slow"})
	tr.active[Ref{Topic: "t", ID: "new"}] = &activeJob{timer: time.NewTimer(time.Hour), began: time.Now().Add(time.Hour)}
	check("handlers that just started", 3)
	for range 50 {
		tr.ran(time.Second)
	}
	check("handlers that became slow", 0)
	tr.testPart().backlog = false
	tr.runNanos.Store(int64(time.Millisecond))
	check("quick handlers, no backlog", 0)

	lim := w.topics["limited"]
	lim.testPart().backlog = true
	lim.ran(time.Millisecond)
	if _, got := lim.claimable(lim.testPart()); got != 4 {
		t.Fatalf("rate-limited topic: claimable %d, want its 4 free slots and no prefetch", got)
	}
	if cap(tr.work) != 4+3 || cap(lim.work) != 4 {
		t.Fatalf("work queues of %d and %d, want room for the prefetch (7) and none (4)", cap(tr.work), cap(lim.work))
	}
}

// Within its Prefetch the fetcher holds no more jobs than its handlers
// start in about 10ms at their average run.
func TestPrefetchHoldsWhatHandlersStartInTenMilliseconds(t *testing.T) {
	w := prefetchWorker(t)
	if err := w.Handle("t", HandlerFunc(nil), TopicConfig{Concurrency: 4}); err != nil {
		t.Fatal(err)
	}
	tr := w.topics["t"]
	if want := DefaultPrefetch(100); tr.cfg.Prefetch != want || want != 800 {
		t.Fatalf("default prefetch %d, want DefaultPrefetch(100) = %d = 800", tr.cfg.Prefetch, want)
	}
	if DefaultPrefetch(2000) != MaxConcurrency {
		t.Fatalf("DefaultPrefetch(2000) = %d, want it capped at %d", DefaultPrefetch(2000), MaxConcurrency)
	}
	tr.busy.Store(4)
	tr.testPart().backlog = true
	for _, c := range []struct {
		avg  time.Duration
		want int
	}{
		{time.Microsecond, 800},       // 40,000 start in 10ms: the Prefetch bounds
		{100 * time.Microsecond, 400}, // 4 handlers × 100 runs each
		{time.Millisecond, 40},
		{4 * time.Millisecond, 10},
		{9 * time.Millisecond, 4},
		{10 * time.Millisecond, 0}, // not quick: no prefetch at all
	} {
		tr.runNanos.Store(int64(c.avg))
		if _, got := tr.claimable(tr.testPart()); got != c.want {
			t.Errorf("average run %s: claimable %d, want %d", c.avg, got, c.want)
		}
	}
}

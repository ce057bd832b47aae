package orderclose_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/internal/redislock"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/jobs/orderclose"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/recovery"
)

// runSweeper runs a Sweeper of w's service until the test ends.
func runSweeper(t *testing.T, sw *orderclose.Sweeper) {
	t.Helper()
	stopChecked(t, "sweeper", testenv.Start(t, sw.Run))
}

// waitClosed waits until every order in nos is closed, then checks that
// each has one close-log row and that all the stock is back.
func (w *world) waitClosed(nos []string, initial map[string]int64) {
	w.t.Helper()
	w.waitSettled(testenv.Context(w.t), "the sweeper to get every order closed", func() bool {
		var n int64
		if err := w.db.Model(&orderclose.Order{}).Where("order_no IN ? AND status = ?", nos, orderclose.StatusClosed).Count(&n).Error; err != nil {
			w.t.Fatal(err)
		}
		return n == int64(len(nos))
	})
	for _, no := range nos {
		if n := w.closeLogs(no); n != 1 {
			w.t.Errorf("order %s: %d close-log rows, want 1", no, n)
		}
	}
	if got := w.stock(); len(got) != len(initial) {
		w.t.Errorf("stock %v, want %v", got, initial)
	} else {
		for sku, n := range initial {
			if got[sku] != n {
				w.t.Errorf("stock of %s %d, want %d (all of it back, once)", sku, got[sku], n)
			}
		}
	}
}

// runRelay runs the durable topics' relay until the test ends.
func (w *world) runRelay() {
	w.t.Helper()
	r, err := recoverer.NewRelay(w.q, ledgerops.Of(w.led), recovery.RelayConfig{Every: 50 * time.Millisecond, Grace: 10 * time.Millisecond,
		Logger: testenv.QuietLogger()})
	if err != nil {
		w.t.Fatal(err)
	}
	stopChecked(w.t, "relay", testenv.Start(w.t, r.Run))
}

// createOrders creates n orders like o and returns their numbers.
func (w *world) createOrders(n int, o orderclose.NewOrder) []string {
	w.t.Helper()
	nos := make([]string, 0, n)
	for i := 0; i < n; i++ {
		nos = append(nos, w.mustCreate(o).Order.OrderNo)
	}
	return nos
}

// closeByTheRelay runs the relay and a worker, waits until every order of
// nos has closed with its stock back, then sweeps once with sw and checks
// that the relay left the sweeper nothing to enqueue. The sweeper does not
// run meanwhile: a sweep that read an order still pending an instant before
// its close job committed would enqueue a (harmless) second close, and the
// test is about the relay closing every order on its own.
func (w *world) closeByTheRelay(sw *orderclose.Sweeper, nos []string, initial map[string]int64) {
	w.t.Helper()
	w.runRelay()
	startWorker(w.t, w.newWorker(queue.TopicConfig{}))
	w.waitClosed(nos, initial)
	if _, ran, err := sw.RunOnce(testenv.Context(w.t)); !ran || err != nil {
		w.t.Fatalf("sweep after the orders closed: ran %v, err %v", ran, err)
	}
	if sw.Enqueued() != 0 {
		w.t.Errorf("sweeper enqueued %d close jobs; the relay should have left it nothing", sw.Enqueued())
	}
}

// Orders created while Redis is down still stand, each with its close job
// committed in SQL; once Redis is back (empty: no persistence), the relay
// pushes the jobs and every order closes. The sweeper, the belt, finds
// nothing to do.
func TestOrdersCreatedWhileRedisDownCloseWithoutTheSweeper(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t, testenv.RedisOptions{})
	// No retries: a refused connection fails the push at once.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialerRetries: 1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	w := newWorld(t, rdb, orderclose.Config{SweepSpec: "@every 1s", SweepGrace: 100 * time.Millisecond})
	initial := map[string]int64{"A": 100, "B": 100}
	w.seed(initial)

	srv.Kill(t)
	const n = 20
	nos := w.createOrders(n, orderclose.NewOrder{Items: []orderclose.Item{{SKU: "A", Quantity: 2}, {SKU: "B", Quantity: 1}}, PaymentWindow: 200 * time.Millisecond})
	if got := w.stock(); got["A"] != 100-2*n || got["B"] != 100-n {
		t.Fatalf("stock %v: the orders must stand and hold their stock", got)
	}
	if c, err := w.led.Count(testenv.Context(t)); err != nil || c != n {
		t.Fatalf("close job rows with Redis down: %d, %v; want %d", c, err, n)
	}
	sw := orderclose.NewSweeper(w.svc)
	if _, ran, err := sw.RunOnce(testenv.Context(t)); ran || err == nil {
		t.Fatalf("sweep with Redis down: ran %v, err %v; want an error", ran, err)
	}

	srv.Restart(t)
	w.closeByTheRelay(sw, nos, initial)
}

// Close jobs lost by Redis before any worker claimed them (every key of the
// namespace deleted, as by a FLUSHALL): the relay reloads them from SQL and
// every order closes; the sweeper finds nothing to do.
func TestOrdersWhoseJobsRedisLostCloseWithoutTheSweeper(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil, orderclose.Config{SweepSpec: "@every 1s", SweepGrace: 100 * time.Millisecond})
	initial := map[string]int64{"A": 100}
	w.seed(initial)
	const n = 30
	nos := w.createOrders(n, orderclose.NewOrder{Items: []orderclose.Item{{SKU: "A", Quantity: 3}}, PaymentWindow: 300 * time.Millisecond})
	if st, err := w.q.Stats(testenv.Context(t), orderclose.Topic); err != nil || st.Due != n {
		t.Fatalf("close jobs waiting: %+v, %v; want %d", st, err, n)
	}
	deleteNamespace(t, w.rdb, w.ns)
	if st, err := w.q.Stats(testenv.Context(t), orderclose.Topic); err != nil || st.Due != 0 {
		t.Fatalf("close jobs after the flush: %+v, %v; want none", st, err)
	}
	sw := orderclose.NewSweeper(w.svc)
	w.closeByTheRelay(sw, nos, initial)
}

// The belt: close jobs gone from both stores (deleted by hand, say) leave
// their orders pending; the sweeper enqueues them again and every order
// closes.
func TestSweeperClosesOrdersWhoseCloseJobsVanished(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil, orderclose.Config{SweepSpec: "@every 1s", SweepGrace: 100 * time.Millisecond})
	initial := map[string]int64{"A": 100}
	w.seed(initial)
	const n = 10
	nos := w.createOrders(n, orderclose.NewOrder{Items: []orderclose.Item{{SKU: "A", Quantity: 3}}, PaymentWindow: 300 * time.Millisecond})
	if err := w.db.Exec("DELETE FROM " + w.led.LedgerTable()).Error; err != nil {
		t.Fatal(err)
	}
	deleteNamespace(t, w.rdb, w.ns)
	sw := orderclose.NewSweeper(w.svc)
	startWorker(t, w.newWorker(queue.TopicConfig{}))
	runSweeper(t, sw)
	w.waitClosed(nos, initial)
	if sw.Enqueued() < n {
		t.Errorf("sweeper enqueued %d close jobs, want at least %d", sw.Enqueued(), n)
	}
}

// deleteNamespace deletes every key of the test's namespace (and only
// those: the Redis is shared).
func deleteNamespace(t *testing.T, rdb redis.UniversalClient, ns string) {
	t.Helper()
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(testenv.Context(t), cursor, ns+":*", 500).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) > 0 {
			if err := rdb.Del(testenv.Context(t), keys...).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if next == 0 {
			return
		}
		cursor = next
	}
}

// The sweeper looks only at pending orders past deadline plus grace, in
// pages, in a stable order (orders with one deadline are ordered by id),
// and a second sweep finds every job there already.
func TestSweeperPages(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	clock.Store(time.Now().Add(-time.Hour).UnixMilli())
	w := newWorld(t, nil, orderclose.Config{
		SweepPageSize: 4,
		SweepGrace:    time.Minute,
		Now:           func() time.Time { return time.UnixMilli(clock.Load()) },
	})
	w.seed(map[string]int64{"A": 1000})
	item := []orderclose.Item{{SKU: "A", Quantity: 1}}

	// An hour ago: 25 orders with one deadline, one of them paid since.
	var overdue []string
	for i := 0; i < 25; i++ {
		overdue = append(overdue, w.mustCreate(orderclose.NewOrder{Items: item, PaymentWindow: time.Second}).Order.OrderNo)
	}
	// Now: orders within their window, or past it by less than the grace.
	clock.Store(time.Now().UnixMilli())
	w.mustCreate(orderclose.NewOrder{Items: item, PaymentWindow: time.Hour})
	w.mustCreate(orderclose.NewOrder{Items: item, PaymentWindow: time.Millisecond})
	if _, err := w.svc.Pay(testenv.Context(t), overdue[7]); err != nil {
		t.Fatal(err)
	}
	overdue = append(overdue[:7], overdue[8:]...)
	// Every close job gone from both stores (the relay would bring back
	// one that only Redis lost).
	if err := w.db.Exec("DELETE FROM " + w.led.LedgerTable()).Error; err != nil {
		t.Fatal(err)
	}
	deleteNamespace(t, w.rdb, w.ns)

	sw := orderclose.NewSweeper(w.svc)
	clock.Store(time.Now().UnixMilli() + 100) // the 1 ms order is past its deadline, not its grace
	rep, ran, err := sw.RunOnce(testenv.Context(t))
	if err != nil || !ran {
		t.Fatalf("sweep: ran %v, %v", ran, err)
	}
	if rep.Overdue != 24 || rep.Enqueued != 24 || rep.Duplicates != 0 || rep.Pages != 6 {
		t.Fatalf("first sweep %+v: want 24 overdue orders in 6 pages, all enqueued", rep)
	}
	for _, no := range overdue {
		if info, err := w.q.Get(testenv.Context(t), orderclose.Topic, orderclose.JobID(no)); err != nil || info.State != queue.StateWaiting {
			t.Fatalf("close job of %s: %+v, %v", no, info, err)
		}
	}
	if st, err := w.q.Stats(testenv.Context(t), orderclose.Topic); err != nil || st.Due != 24 {
		t.Fatalf("stats %+v, %v: want exactly the 24 overdue orders' jobs", st, err)
	}
	// One close job fails for good.
	cl, err := w.q.Claim(testenv.Context(t), orderclose.Topic, 1, time.Minute)
	if err != nil || len(cl.Jobs) != 1 {
		t.Fatalf("claim: %+v, %v", cl, err)
	}
	if n, _, err := w.q.Bury(testenv.Context(t), []queue.DeadJob{{Job: cl.Jobs[0], Error: "test"}}); n != 1 || err != nil {
		t.Fatalf("bury: %d, %v", n, err)
	}
	rep, _, err = sw.RunOnce(testenv.Context(t))
	if err != nil || rep.Overdue != 24 || rep.Enqueued != 0 || rep.Duplicates != 24 || rep.Dead != 1 {
		t.Fatalf("second sweep %+v, %v: want 24 duplicates, one of them dead", rep, err)
	}
	if sw.Runs() != 2 || sw.Enqueued() != 24 {
		t.Fatalf("runs %d enqueued %d", sw.Runs(), sw.Enqueued())
	}
}

// sweepLog records what Config.OnSweep hears.
type sweepLog struct {
	mu    sync.Mutex
	calls []sweepCall
}

type sweepCall struct {
	rep orderclose.SweepReport
	ran bool
	err error
}

func (l *sweepLog) OnSweep(rep orderclose.SweepReport, ran bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, sweepCall{rep, ran, err})
}

func (l *sweepLog) take() []sweepCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.calls
	l.calls = nil
	return c
}

// One sweeper at a time: while another process holds the lock, a sweep is
// skipped, and OnSweep hears who held it.
func TestSweeperOneAtATime(t *testing.T) {
	t.Parallel()
	var heard sweepLog
	w := newWorld(t, nil, orderclose.Config{OnSweep: heard.OnSweep})
	sw := orderclose.NewSweeper(w.svc)
	other := redislock.New(w.rdb, w.svc.Config().SweepLockKey, time.Minute).WithOwner("elsewhere:1")
	if ok, err := other.TryAcquire(testenv.Context(t)); !ok || err != nil {
		t.Fatalf("lock: %v, %v", ok, err)
	}
	if rep, ran, err := sw.RunOnce(testenv.Context(t)); ran || err != nil || rep.HeldBy != "elsewhere:1" {
		t.Fatalf("sweep while another holds the lock: ran %v, %v, held by %q", ran, err, rep.HeldBy)
	}
	if err := other.Release(testenv.Context(t)); err != nil {
		t.Fatal(err)
	}
	if _, ran, err := sw.RunOnce(testenv.Context(t)); !ran || err != nil {
		t.Fatalf("sweep with the lock free: ran %v, %v", ran, err)
	}
	calls := heard.take()
	if len(calls) != 2 || calls[0].ran || calls[0].err != nil || calls[0].rep.HeldBy != "elsewhere:1" ||
		!calls[1].ran || calls[1].err != nil || calls[1].rep.Start.IsZero() {
		t.Fatalf("OnSweep heard %+v; want a skipped sweep (held by elsewhere:1), then one that ran", calls)
	}
}

// A sweeper stopped mid-sweep releases its lock as Run returns: another
// process sweeps at once, not after the lock's TTL (an hour here).
func TestSweeperReleasesLockOnShutdown(t *testing.T) {
	t.Parallel()
	var heard sweepLog
	var block atomic.Bool
	entered := make(chan struct{}, 1)
	resume := make(chan struct{})
	w := newWorld(t, nil, orderclose.Config{
		SweepSpec:    "@every 1s",
		SweepLockTTL: time.Hour,
		OnSweep:      heard.OnSweep,
		// The sweep reads the clock first, holding the lock: block it
		// there until the test has stopped the sweeper.
		Now: func() time.Time {
			if block.Load() {
				select {
				case entered <- struct{}{}:
				default:
				}
				<-resume
			}
			return time.Now()
		},
	})
	key := w.svc.Config().SweepLockKey
	block.Store(true)
	ctx, cancel := context.WithCancel(testenv.Context(t))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- orderclose.NewSweeper(w.svc).Run(ctx) }()
	select {
	case <-entered:
	case <-testenv.Context(t).Done():
		t.Fatal("no sweep started")
	}
	probe := redislock.New(w.rdb, key, time.Minute)
	owner, _, held, err := probe.Holder(testenv.Context(t))
	if !held || err != nil || owner == "" {
		t.Fatalf("lock during the sweep: owner %q, held %v, %v", owner, held, err)
	}
	// Another sweeper meanwhile skips, and says who holds the lock.
	if rep, ran, err := orderclose.NewSweeper(w.svc).RunOnce(testenv.Context(t)); ran || err != nil || rep.HeldBy != owner {
		t.Fatalf("second sweeper: ran %v, %v, held by %q; want skipped, held by %q", ran, err, rep.HeldBy, owner)
	}

	cancel()
	close(resume)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-testenv.Context(t).Done():
		t.Fatal("Run did not return after its context ended")
	}
	if ok, err := probe.TryAcquire(testenv.Context(t)); !ok || err != nil {
		owner, left, _, _ := probe.Holder(testenv.Context(t))
		t.Fatalf("lock after Run returned: taken %v, %v (held by %q for %s more); want it free", ok, err, owner, left)
	}
	var ranOne bool
	for _, c := range heard.take() {
		ranOne = ranOne || c.ran
	}
	if !ranOne {
		t.Error("OnSweep never heard of the sweep that was cut short")
	}
}

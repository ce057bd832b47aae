package dataplane_test

import (
	"context"
	"errors"
	"io"
	"log"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/tcpproxy"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
)

// failCounter counts failed Record calls of the ledger it wraps.
type failCounter struct {
	dataplane.Ledger
	recordFails testenv.Counter
}

func (f *failCounter) Record(ctx context.Context, jobs []*dataplane.Job, worker string) error {
	err := f.Ledger.Record(ctx, jobs, worker)
	if err != nil {
		f.recordFails.Add(1)
	}
	return err
}

func openGorm(t *testing.T, dsn string) *gorm.DB {
	t.Helper()
	db, err := gorm.Open(mysql.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	return db
}

// cutLedgerWorld is a queue client on the test's Redis namespace and one
// MariaDB database reached two ways: directly, and through a TCP proxy the
// test can cut (reads and writes through it time out after timeout).
type cutLedgerWorld struct {
	c                *dataplane.Client
	direct, viaProxy *ledger.Ledger
	proxy            *tcpproxy.Proxy
}

func newCutLedgerWorld(t *testing.T, timeout time.Duration) cutLedgerWorld {
	t.Helper()
	rdb, ns := testenv.Redis(t)
	c, err := dataplane.New(rdb, dataplane.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	dsn := testenv.MySQLDSN(t)
	// The driver logs every cut connection on its own global logger.
	_ = gomysql.SetLogger(log.New(io.Discard, "", 0))
	direct := migratedLedger(t, openGorm(t, dsn))
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := tcpproxy.New(t, cfg.Addr)
	cfg.Addr = proxy.Addr()
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = time.Second, timeout, timeout
	return cutLedgerWorld{c: c, direct: direct, viaProxy: migratedLedger(t, openGorm(t, cfg.FormatDSN())), proxy: proxy}
}

// MariaDB cut off mid-drain (a TCP proxy between worker and database): no
// handler runs without its ledger row, no attempt is spent, and once the
// link is back every job is handled, by the worker on its own.
func TestWorkerSurvivesLedgerOutage(t *testing.T) {
	world := newCutLedgerWorld(t, 2*time.Second)
	c, direct, proxy := world.c, world.direct, world.proxy
	led := &failCounter{Ledger: ledgerops.Of(world.viaProxy)}

	const total = 3000
	enqueueMany(t, c, "t", "j", total, nil)
	var mu sync.Mutex
	seen := map[string]int{}
	var handled testenv.Counter
	var unrecorded, spent atomic.Int64
	obs := &settled{}
	w, err := dataplane.NewWorker(c, led, dataplane.WorkerConfig{Logger: testenv.QuietLogger(), Observer: obs,
		ErrorBackoffMin: 20 * time.Millisecond, ErrorBackoffMax: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	err = w.Handle("t", dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		if row, err := direct.Row(ctx, j.Topic, j.ID); err != nil || row.Attempt != j.Attempt {
			unrecorded.Add(1)
		}
		if j.Attempt != 1 {
			spent.Add(1)
		}
		mu.Lock()
		seen[j.ID]++
		mu.Unlock()
		handled.Add(1)
		time.Sleep(time.Millisecond) // a handler doing some work, so the cut lands mid-drain
		return nil
	}), dataplane.TopicConfig{Concurrency: 20, BatchSize: 20})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)

	handled.WaitAtLeast(testenv.Context(t), t, 500, "a first part handled")
	proxy.Cut()
	led.recordFails.WaitAtLeast(testenv.Context(t), t, 5, "claims refused while the ledger is down")
	during := handled.Load()
	proxy.Restore()
	obs.completed.WaitAtLeast(testenv.Context(t), t, total, "every job completed")
	if n, err := direct.Count(testenv.Context(t)); err != nil || n != 0 {
		t.Fatalf("ledger holds %d rows after every job completed (%v)", n, err)
	}
	if during >= total {
		t.Fatalf("the cut came too late to matter (%d handled)", during)
	}
	if n := unrecorded.Load(); n != 0 {
		t.Fatalf("%d handlers ran without their ledger row", n)
	}
	if n := spent.Load(); n != 0 {
		t.Fatalf("%d jobs ran with an attempt spent by the outage", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != total {
		t.Fatalf("%d of %d jobs handled", len(seen), total)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("%s handled %d times", id, n)
		}
	}
}

// A worker cut off from its ledger alone (a proxy between it and MariaDB
// cut; Redis and the other workers' ledger fine), with a handler running
// that waits for its context: past LedgerHold it lets the job go. The
// handler's context ends with ErrLeaseExpired, the Redis lease is no
// longer renewed, and a worker that reaches the ledger runs the job (the
// next attempt) and settles it. Without the hold the cut worker would
// renew the lease in Redis for as long as it lived.
func TestWorkerCutFromItsLedgerLetsItsJobsGo(t *testing.T) {
	world := newCutLedgerWorld(t, time.Second)
	c, direct, viaProxy, proxy := world.c, world.direct, world.viaProxy, world.proxy

	tc := dataplane.TopicConfig{Concurrency: 1, BatchSize: 1, Lease: time.Second, Heartbeat: 200 * time.Millisecond}
	started := make(chan struct{})
	cause := make(chan error, 1)
	cut, err := dataplane.NewWorker(c, ledgerops.Of(viaProxy), dataplane.WorkerConfig{ID: "cut", Logger: testenv.QuietLogger(),
		LedgerHold: 1500 * time.Millisecond, ErrorBackoffMin: 20 * time.Millisecond, ErrorBackoffMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	err = cut.Handle("t", dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	}), tc)
	if err != nil {
		t.Fatal(err)
	}
	enqueueMany(t, c, "t", "j", 1, nil)
	startWorker(t, cut)
	select {
	case <-started:
	case <-testenv.Context(t).Done():
		t.Fatal("the job never started")
	}
	proxy.Cut()

	var attempts []int
	var mu sync.Mutex
	ran := make(chan struct{})
	other, err := dataplane.NewWorker(c, ledgerops.Of(direct), dataplane.WorkerConfig{ID: "other", Logger: testenv.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	err = other.Handle("t", dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		mu.Lock()
		attempts = append(attempts, j.Attempt)
		mu.Unlock()
		close(ran)
		return nil
	}), tc)
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, other)

	select {
	case err := <-cause:
		if !errors.Is(err, dataplane.ErrLeaseExpired) {
			t.Fatalf("the cut worker's handler ended with %v, want ErrLeaseExpired", err)
		}
	case <-testenv.Context(t).Done():
		t.Fatal("the cut worker never let its running job go")
	}
	select {
	case <-ran:
	case <-testenv.Context(t).Done():
		t.Fatal("the other worker never got the job")
	}
	testenv.WaitFor(testenv.Context(t), t, "the job's row settled by the other worker", func() bool {
		n, err := direct.Count(testenv.Context(t))
		return err == nil && n == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) != 1 || attempts[0] != 2 {
		t.Errorf("the other worker ran attempts %v, want [2]", attempts)
	}
}

// beats counts heartbeats.
type beats struct {
	dataplane.NopObserver
	n testenv.Counter
}

func (b *beats) Heartbeat(string, time.Time) { b.n.Add(1) }

// The same cut with no other worker that reaches the ledger (SQL down for
// everyone, as far as this worker can tell): past LedgerHold it holds on,
// the handler's context does not end, and once the link is back the job
// finishes, once.
func TestWorkerHoldsItsJobsWhenNoWorkerReachesTheLedger(t *testing.T) {
	world := newCutLedgerWorld(t, time.Second)
	c, direct, viaProxy, proxy := world.c, world.direct, world.viaProxy, world.proxy

	const hold, beat = 600 * time.Millisecond, 100 * time.Millisecond
	obs := &beats{}
	started, release := make(chan struct{}), make(chan struct{})
	var runs, cut atomic.Int64
	w, err := dataplane.NewWorker(c, ledgerops.Of(viaProxy), dataplane.WorkerConfig{ID: "alone", Logger: testenv.QuietLogger(),
		Observer: obs, LedgerHold: hold, ErrorBackoffMin: 20 * time.Millisecond, ErrorBackoffMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	err = w.Handle("t", dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		if runs.Add(1) == 1 {
			close(started)
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			cut.Add(1)
			return ctx.Err()
		}
	}), dataplane.TopicConfig{Concurrency: 1, BatchSize: 1, Lease: 400 * time.Millisecond, Heartbeat: beat})
	if err != nil {
		t.Fatal(err)
	}
	enqueueMany(t, c, "t", "j", 1, nil)
	startWorker(t, w)
	<-started
	proxy.Cut()
	// Three holds' worth of heartbeats with the ledger cut.
	from := obs.n.Load()
	obs.n.WaitAtLeast(testenv.Context(t), t, from+int64(3*hold/beat), "heartbeats past the hold")
	if n := cut.Load(); n != 0 {
		t.Fatal("the handler's context ended although no worker reaches the ledger: the job would run again")
	}
	proxy.Restore()
	close(release)
	testenv.WaitFor(testenv.Context(t), t, "the job settled", func() bool {
		n, err := direct.Count(testenv.Context(t))
		return err == nil && n == 0
	})
	if n := runs.Load(); n != 1 {
		t.Errorf("the job ran %d times, want once", n)
	}
}

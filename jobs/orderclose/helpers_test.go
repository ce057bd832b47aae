package orderclose_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/jobs/orderclose"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// world is one test's services: a Redis namespace (or a Redis of its own),
// a MariaDB database with the ledger and the orders tables, and a Service.
type world struct {
	t   *testing.T
	rdb redis.UniversalClient
	ns  string
	db  *gorm.DB
	led *ledger.Ledger
	q   *dataplane.Client
	svc *orderclose.Service
	// settled hears the outcomes of the worlds' workers.
	settled *settledEvent
}

// newWorld builds a world on the shared Redis (rdb nil) or on rdb, with
// cfg's zero fields left to the defaults except a quiet logger.
func newWorld(t *testing.T, rdb redis.UniversalClient, cfg orderclose.Config) *world {
	t.Helper()
	ns := "dq" // a Redis of the test's own
	if rdb == nil {
		rdb, ns = testenv.Redis(t)
	}
	return newWorldOn(t, rdb, ns, testenv.MySQL(t), cfg)
}

func newWorldOn(t *testing.T, rdb redis.UniversalClient, ns string, db *gorm.DB, cfg orderclose.Config) *world {
	t.Helper()
	// Parallel tests share one MariaDB (max_connections 151 by default).
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.SetMaxOpenConns(24)
	led, err := ledger.New(db, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns, Store: led,
		TopicDurability: map[string]queue.Durability{orderclose.Topic: queue.DurabilityDurable}})
	if err != nil {
		t.Fatal(err)
	}
	if err := led.Migrate(testenv.Context(t)); err != nil {
		t.Fatal(err)
	}
	if err := orderclose.Migrate(testenv.Context(t), db); err != nil {
		t.Fatal(err)
	}
	if cfg.Logger == nil {
		cfg.Logger = testenv.QuietLogger()
	}
	svc, err := orderclose.New(led, q, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &world{t: t, rdb: rdb, ns: ns, db: db, led: led, q: q, svc: svc, settled: &settledEvent{}}
}

// seed creates SKUs with the given stock, price 100 cents each.
func (w *world) seed(stock map[string]int64) {
	w.t.Helper()
	var skus []orderclose.SKU
	for sku, n := range stock {
		skus = append(skus, orderclose.SKU{SKU: sku, Stock: n, PriceCents: 100})
	}
	if err := orderclose.SeedSKUs(testenv.Context(w.t), w.db, skus...); err != nil {
		w.t.Fatal(err)
	}
}

// stock returns every SKU's available stock.
func (w *world) stock() map[string]int64 {
	w.t.Helper()
	var rows []orderclose.SKU
	if err := w.db.Find(&rows).Error; err != nil {
		w.t.Fatal(err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.SKU] = r.Stock
	}
	return out
}

// count returns the number of rows of model's table.
func (w *world) count(model any) int64 {
	w.t.Helper()
	var n int64
	if err := w.db.Model(model).Count(&n).Error; err != nil {
		w.t.Fatal(err)
	}
	return n
}

func (w *world) mustCreate(in orderclose.NewOrder) *orderclose.Created {
	w.t.Helper()
	c, err := w.svc.CreateOrder(testenv.Context(w.t), in)
	if err != nil {
		w.t.Fatalf("CreateOrder: %v", err)
	}
	return c
}

func (w *world) order(no string) orderclose.Order {
	w.t.Helper()
	var o orderclose.Order
	if err := w.db.Where("order_no = ?", no).Take(&o).Error; err != nil {
		w.t.Fatalf("order %s: %v", no, err)
	}
	return o
}

// closeLogs returns how many close-log rows an order has.
func (w *world) closeLogs(no string) int64 {
	w.t.Helper()
	var n int64
	if err := w.db.Model(&orderclose.CloseLog{}).Where("order_no = ?", no).Count(&n).Error; err != nil {
		w.t.Fatal(err)
	}
	return n
}

// newWorker returns a worker on the world's queue and ledger with the close
// handler registered.
func (w *world) newWorker(tc queue.TopicConfig) *dataplane.Worker {
	w.t.Helper()
	wk, err := dataplane.NewWorker(w.q, ledgerops.Of(w.led), queue.WorkerConfig{Logger: testenv.QuietLogger(), Observer: w.settled, MaxIdle: 200 * time.Millisecond})
	if err != nil {
		w.t.Fatal(err)
	}
	if err := orderclose.Register(wk, w.svc, tc); err != nil {
		w.t.Fatal(err)
	}
	return wk
}

// startWorker runs wk until the test ends (or the returned stop is called),
// failing the test if Run fails.
func startWorker(t *testing.T, wk *dataplane.Worker) (stop func()) {
	t.Helper()
	return stopChecked(t, "worker", testenv.Start(t, wk.Run))
}

// stopChecked returns a stop for r that fails the test if r's function
// failed, and stops r that way when the test ends too.
func stopChecked(t *testing.T, what string, r *testenv.Running) (stop func()) {
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if err := r.Stop(); err != nil {
				t.Errorf("%s: %v", what, err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// settledEvent is an Observer that notifies changed whenever a worker has
// settled outcomes in both stores (it reports them only then).
type settledEvent struct {
	queue.NopObserver
	changed testenv.Event
}

func (s *settledEvent) Completed(string, int) { s.changed.Notify() }
func (s *settledEvent) Retried(string, int)   { s.changed.Notify() }
func (s *settledEvent) Dead(string, int)      { s.changed.Notify() }
func (s *settledEvent) Released(string, int)  { s.changed.Notify() }

// waitSettled returns once cond holds, checking it now and each time one
// of the world's workers settles jobs: what a close job does to the orders
// is committed by then.
func (w *world) waitSettled(ctx context.Context, what string, cond func() bool) {
	w.t.Helper()
	w.settled.changed.Wait(ctx, w.t, what, cond)
}

package dataplane_test

import (
	"fmt"
	"testing"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
)

// wenv is a worker test's world: its own Redis namespace and its own
// MariaDB database with a migrated ledger.
type wenv struct {
	env
	db  *gorm.DB
	led *ledger.Ledger
}

func newWEnv(t *testing.T) wenv {
	t.Helper()
	rdb, ns := testenv.Redis(t)
	c, err := dataplane.New(rdb, dataplane.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	db := testenv.MySQL(t)
	return wenv{env: env{c: c, rdb: rdb, ns: ns}, db: db, led: migratedLedger(t, db)}
}

func migratedLedger(t *testing.T, db *gorm.DB) *ledger.Ledger {
	t.Helper()
	led, err := ledger.New(db, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := led.Migrate(testenv.Context(t)); err != nil {
		t.Fatal(err)
	}
	return led
}

// startWorker runs w until the returned stop is called (or the test ends);
// stop returns Run's error.
func startWorker(t *testing.T, w *dataplane.Worker) (stop func() error) {
	t.Helper()
	return testenv.Start(t, w.Run).Stop
}

func newWorker(t *testing.T, e wenv, cfg dataplane.WorkerConfig) *dataplane.Worker {
	t.Helper()
	return newWorkerWith(t, e, ledgerops.Of(e.led), cfg)
}

// newWorkerWith is newWorker recording in led instead of the test's ledger.
func newWorkerWith(t *testing.T, e wenv, led dataplane.Ledger, cfg dataplane.WorkerConfig) *dataplane.Worker {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testenv.QuietLogger()
	}
	w, err := dataplane.NewWorker(e.c, led, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// enqueueMany enqueues n jobs id-prefix0..n-1 due now, in batches.
func enqueueMany(t *testing.T, c *dataplane.Client, topic, prefix string, n int, mod func(*dataplane.NewJob)) {
	t.Helper()
	for start := 0; start < n; start += 1000 {
		batch := make([]dataplane.NewJob, 0, 1000)
		for i := start; i < min(n, start+1000); i++ {
			j := dataplane.NewJob{ID: fmt.Sprintf("%s%d", prefix, i), Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))}
			if mod != nil {
				mod(&j)
			}
			batch = append(batch, j)
		}
		res, err := c.EnqueueBatch(testenv.Context(t), topic, batch)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Status != dataplane.BatchCreated {
				t.Fatalf("enqueue %s: %s %v", r.ID, r.Status, r.Err)
			}
		}
	}
}

// settled is an Observer that counts the outcomes a worker has settled in
// both stores (the worker reports an outcome only then), so a test waits
// for them instead of polling Redis or the ledger.
type settled struct {
	dataplane.NopObserver
	completed, retried, dead, released testenv.Counter
}

// sqliteLedger returns a migrated ledger on a SQLite database of the test's
// own, for tests that need one but not MariaDB.
func sqliteLedger(t *testing.T) *ledger.Ledger {
	t.Helper()
	return migratedLedger(t, testenv.SQLite(t))
}
func (s *settled) Completed(_ string, n int) { s.completed.Add(int64(n)) }
func (s *settled) Retried(_ string, n int)   { s.retried.Add(int64(n)) }
func (s *settled) Dead(_ string, n int)      { s.dead.Add(int64(n)) }
func (s *settled) Released(_ string, n int)  { s.released.Add(int64(n)) }

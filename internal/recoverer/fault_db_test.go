package recoverer_test

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// faultDB is a fault test's MariaDB database: the ledger, plus the business
// table the workers' handler writes (one row per job: a unique key, the
// highest attempt it ran with, how many runs, how many of them found no
// ledger row of their claim) and the claims table (every job some worker
// recorded in the ledger).
type faultDB struct {
	dsn string
	db  *gorm.DB
	led *ledger.Ledger
}

func newFaultDB(t testing.TB) faultDB {
	t.Helper()
	dsn := testenv.MySQLDSN(t)
	db, led := openLedgerDB(t, dsn,
		"CREATE TABLE handled (job_id VARCHAR(64) NOT NULL PRIMARY KEY, attempt INT NOT NULL, runs INT NOT NULL, unrecorded INT NOT NULL, "+
			"last_token VARCHAR(32) NOT NULL, worker VARCHAR(64) NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE claims (job_id VARCHAR(64) NOT NULL PRIMARY KEY) ENGINE=InnoDB")
	return faultDB{dsn: dsn, db: db, led: led}
}

// openLedgerDB opens dsn (closed when the test ends), migrates a ledger on
// it and runs the test's own DDL.
func openLedgerDB(t testing.TB, dsn string, ddl ...string) (*gorm.DB, *ledger.Ledger) {
	t.Helper()
	db := testenv.OpenMySQL(t, dsn)
	led, err := ledger.New(db, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := led.Migrate(testenv.Context(t)); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range ddl {
		if err := db.Exec(stmt).Error; err != nil {
			t.Fatal(err)
		}
	}
	return db, led
}

// count runs a SELECT COUNT(*)-like query.
func (f faultDB) count(t testing.TB, query string) int64 {
	t.Helper()
	var n int64
	if err := f.db.WithContext(testenv.Context(t)).Raw(query).Scan(&n).Error; err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func (f faultDB) handled(t testing.TB) int64 { return f.count(t, "SELECT COUNT(*) FROM handled") }
func (f faultDB) ledgerRows(t testing.TB) int64 {
	return f.count(t, "SELECT COUNT(*) FROM "+f.led.LedgerTable())
}

// ids returns the job ids of a one-column query.
func (f faultDB) ids(t testing.TB, query string) map[string]bool {
	t.Helper()
	var ids []string
	if err := f.db.WithContext(testenv.Context(t)).Raw(query).Scan(&ids).Error; err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// outcome is what the business table says about a drain of jobs j0..jN-1.
type outcome struct {
	missing    []string       // enqueued, never handled
	duplicates map[string]int // handled more than once: id -> runs
	maxAttempt int
	unrecorded int // runs that found no ledger row for their claim
}

// outcome reads the business table; it fails the test if a handler ran
// without its ledger row.
func (f faultDB) outcome(t testing.TB, n int) outcome {
	t.Helper()
	var rows []struct {
		JobID      string
		Attempt    int
		Runs       int
		Unrecorded int
	}
	if err := f.db.WithContext(testenv.Context(t)).Raw("SELECT job_id, attempt, runs, unrecorded FROM handled").Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	seen := make(map[string]bool, len(rows))
	o := outcome{duplicates: map[string]int{}}
	for _, r := range rows {
		seen[r.JobID] = true
		if r.Runs > 1 {
			o.duplicates[r.JobID] = r.Runs
		}
		o.maxAttempt = max(o.maxAttempt, r.Attempt)
		o.unrecorded += r.Unrecorded
	}
	for i := 0; i < n; i++ {
		if id := jobID(i); !seen[id] {
			o.missing = append(o.missing, id)
		}
	}
	// Whatever else a test checks, no handler may run without its row.
	if o.unrecorded != 0 {
		t.Errorf("%d handler runs found no ledger row for their claim", o.unrecorded)
	}
	return o
}

// extraRuns is how many runs the duplicates added.
func (o outcome) extraRuns() int {
	n := 0
	for _, runs := range o.duplicates {
		n += runs - 1
	}
	return n
}

func jobID(i int) string { return fmt.Sprintf("j%d", i) }

// enqueueJobs enqueues j0..jn-1 to topic, due now, in batches.
func enqueueJobs(t testing.TB, c *dataplane.Client, topic string, n int) {
	enqueueRange(t, c, topic, 0, n)
}

// enqueueRange enqueues j<lo>..j<hi-1> to topic, due now, in batches.
func enqueueRange(t testing.TB, c *dataplane.Client, topic string, lo, hi int) {
	t.Helper()
	for from := lo; from < hi; from += 1000 {
		batch := make([]queue.NewJob, 0, 1000)
		for i := from; i < min(hi, from+1000); i++ {
			batch = append(batch, queue.NewJob{ID: jobID(i), Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), MaxAttempts: 10})
		}
		res, err := c.EnqueueBatch(testenv.Context(t), topic, batch)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Status != queue.BatchCreated {
				t.Fatalf("enqueue %s: %s", r.ID, r.Status)
			}
		}
	}
}

// redisAddr returns the address of a go-redis client testenv handed out.
func redisAddr(t testing.TB, rdb redis.UniversalClient) string {
	t.Helper()
	c, ok := rdb.(*redis.Client)
	if !ok {
		t.Fatalf("unexpected Redis client %T", rdb)
	}
	return c.Options().Addr
}

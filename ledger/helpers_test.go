package ledger

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// backend is one database the tests run on; every behaviour test runs on
// both, since the two dialects differ exactly where the ledger is subtle.
type backend struct {
	name string
	open func(testing.TB) *gorm.DB
}

var backends = []backend{
	{"mariadb", testenv.MySQL},
	{"sqlite", testenv.SQLite},
}

// fixedNow is the ledger clock in tests, so claimed_at and updated_at are
// predictable.
var fixedNow = time.UnixMilli(1_700_000_000_000)

// stmtLog records the statements a ledger sends (see newLedger).
type stmtLog = testenv.StatementLog

// verbs returns the first word of each statement, upper-cased.
func verbs(stmts []string) []string { return testenv.Verbs(stmts) }

// eachBackend runs fn as a parallel subtest on a fresh database of every
// backend.
func eachBackend(t *testing.T, fn func(t *testing.T, db *gorm.DB)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fn(t, b.open(t))
		})
	}
}

// newLedger returns a migrated ledger on db with a fixed clock, and the log
// of the statements it runs from then on.
func newLedger(t testing.TB, db *gorm.DB, opts Options) (*Ledger, *stmtLog) {
	t.Helper()
	log := &stmtLog{}
	if opts.Now == nil {
		opts.Now = func() time.Time { return fixedNow }
	}
	l, err := New(db.Session(&gorm.Session{Logger: log}), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := l.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	log.Take()
	return l, log
}

// job returns a claimed job as Claim would hand it out.
func job(topic, id string, attempt int) *queue.Job {
	return &queue.Job{
		Topic:       topic,
		ID:          id,
		Payload:     []byte(`{"order":"` + id + `"}`),
		Attempt:     attempt,
		MaxAttempts: 5,
		EnqueuedAt:  fixedNow.UnixMilli() - 60_000,
		RunAt:       fixedNow.UnixMilli() - 1_000,
		LeaseUntil:  fixedNow.UnixMilli() + 30_000,
	}
}

// jobs returns n jobs of topic with ids prefix0..prefix(n-1), attempt 1.
func jobs(topic, prefix string, n int) []*queue.Job {
	out := make([]*queue.Job, n)
	for i := range out {
		out[i] = job(topic, fmt.Sprintf("%s%d", prefix, i), 1)
	}
	return out
}

func refsOf(js []*queue.Job) []queue.Ref {
	out := make([]queue.Ref, len(js))
	for i, j := range js {
		out[i] = j.Ref()
	}
	return out
}

func mustRecord(t testing.TB, l *Ledger, worker string, js ...*queue.Job) {
	t.Helper()
	if err := opsOf(l).Record(context.Background(), js, worker); err != nil {
		t.Fatalf("Record: %v", err)
	}
}

// mustRow returns the row of topic/id, failing the test if it is absent.
func mustRow(t testing.TB, l *Ledger, topic, id string) Entry {
	t.Helper()
	e, err := l.Row(context.Background(), topic, id)
	if err != nil {
		t.Fatalf("Row(%s, %s): %v", topic, id, err)
	}
	return e
}

// count returns how many ledger rows there are.
func count(t testing.TB, l *Ledger) int64 {
	t.Helper()
	n, err := l.Count(context.Background())
	if err != nil {
		t.Fatalf("Count: %v", err)
	}
	return n
}

// historyCount counts l's history rows of outcome.
func historyCount(t testing.TB, l *Ledger, outcome string) int64 {
	t.Helper()
	var n int64
	if err := l.db.Table(l.historyTable).Where("outcome = ?", outcome).Count(&n).Error; err != nil {
		t.Fatalf("count history: %v", err)
	}
	return n
}

// opsOf is l's internal steps, as the engine's parts take them.
func opsOf(l *Ledger) ops { return ops{l} }

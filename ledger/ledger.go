package ledger

import (
	"context"
	"fmt"
	"sync/atomic"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/coalesce"
)

// Ledger is the SQL ledger on one database. It is safe for concurrent use; it
// holds no state besides its configuration, its estimate of the SQL clock
// and its write counts.
type Ledger struct {
	db           *gorm.DB
	dialect      dialect
	opts         Options
	ledgerTable  string
	deadTable    string
	stateTable   string // topic state: the operators' pauses (topicstate.go)
	historyTable string // finished jobs (history.go)
	markTable    string // the shard this database is (shardmark.go)
	// historyHead is history.go's INSERT ... SELECT head and column list,
	// noHistory its topic filter ("": every topic keeps history), built once.
	historyHead, noHistory string
	// upsertHead and upsertTail frame the rows of Record's upsert
	// (upsertOn), built once.
	upsertHead, upsertTail string
	// clock estimates the SQL server's clock for Schedule (sqlclock.go).
	clock *sqlClock
	// writes counts commits (writestats.go).
	writes *writeCounter
	// group batches the worker's writes into shared commits
	// (groupcommit.go); nil when Options.GroupCommit turns it off.
	group *coalesce.Batcher[write, error]
	// lastRecord is when the last Record came (Unix ns): settlements
	// linger for the next one only while records flow.
	lastRecord *atomic.Int64
	// migrations are the schema's numbered steps, read once from the
	// embedded files (migrations.go).
	migrations []Migration
}

// New returns a Ledger on db (MySQL/MariaDB or SQLite). It does not touch the
// database; call Migrate, or apply deployments/mysql/schema.sql, first.
func New(db *gorm.DB, opts Options) (*Ledger, error) {
	if db == nil {
		return nil, fmt.Errorf("ledger: nil *gorm.DB")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	d, err := dialectOf(db)
	if err != nil {
		return nil, err
	}
	if opts.MaxPlaceholders == 0 {
		opts.MaxPlaceholders = d.maxVars
	}
	if d.name != "mysql" {
		// SQLite has one writer: a second commit in flight only waits on
		// the busy timeout instead of in the batcher, and on a loaded host
		// it can wait out the timeout and fail (SQLITE_BUSY).
		opts.GroupCommitDepth = 1
	}
	l := &Ledger{
		// Each write is one statement, atomic on its own: gorm's default
		// BEGIN/COMMIT around it would only triple the round trips.
		db:           db.Session(&gorm.Session{NewDB: true, SkipDefaultTransaction: true}),
		dialect:      d,
		opts:         opts,
		ledgerTable:  opts.TablePrefix + "ledger",
		deadTable:    opts.TablePrefix + "dead_letter",
		stateTable:   opts.TablePrefix + "topic_state",
		historyTable: opts.TablePrefix + "history",
		markTable:    opts.TablePrefix + "shard_mark",
		clock:        &sqlClock{},
		writes:       &writeCounter{},
		lastRecord:   &atomic.Int64{},
	}
	l.upsertHead, l.upsertTail = upsertSQL(d, l.ledgerTable)
	l.historyHead, l.noHistory = historySQL(l.historyTable, l.ledgerTable, opts.NoHistory)
	if l.migrations, err = loadMigrations(migrationFiles); err != nil {
		return nil, err // a build whose embedded migrations are broken
	}
	l.group = l.newGroupCommit()
	return l, nil
}

// LedgerTable returns the name of the in-flight table (dq_ledger by default),
// for reports and for tests that inspect it. Every statement against the
// ledger's tables is a method of Ledger.
func (l *Ledger) LedgerTable() string { return l.ledgerTable }

// DeadLetterTable returns the name of the dead-letter table (dq_dead_letter
// by default).
func (l *Ledger) DeadLetterTable() string { return l.deadTable }

// HistoryTable returns the name of the job history table (dq_history by
// default).
func (l *Ledger) HistoryTable() string { return l.historyTable }

// DB returns the *gorm.DB the ledger uses, for callers that run their own
// transactions around DeleteInTx on their own tables (Transactional): those
// tables must live in the ledger's database, so the ledger hands out its
// handle rather than the caller passing a second one that could differ.
func (l *Ledger) DB() *gorm.DB { return l.db }

func (l *Ledger) nowMs() int64 { return l.opts.Now().UnixMilli() }

func (l *Ledger) conn(ctx context.Context) *gorm.DB { return l.db.WithContext(ctx) }

// batchSize is how many items fit in one statement that binds perItem
// variables per item plus fixed others.
func (l *Ledger) batchSize(perItem, fixed int) int {
	n := (l.opts.MaxPlaceholders - fixed) / perItem
	if n < 1 {
		n = 1
	}
	return n
}

// inBatches is a write of stmt over items [0, n) such that no statement
// exceeds the placeholder limit: the usual batch fits in one statement; a
// larger one is split, and the parts commit together (in the group's
// transaction, or alone in one of their own). bytes is roughly what the
// statements send.
func (l *Ledger) inBatches(n, perItem, fixed, bytes int, stmt func(db *gorm.DB, lo, hi int) error) write {
	size := l.batchSize(perItem, fixed)
	return write{
		run: func(db *gorm.DB) error {
			return forSpans(n, size, func(lo, hi int) error { return stmt(db, lo, hi) })
		},
		atomic: n > size,
		bytes:  bytes,
	}
}

// rowBytes is the rough size of a key-only row in a statement.
const rowBytes = 64

// transaction runs fn in a transaction, run again as a whole if it was
// rolled back as a deadlock victim or refused by a node not ready.
func (l *Ledger) transaction(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return l.autocommit(ctx, func() error { return l.conn(ctx).Transaction(fn) })
}

// autocommit runs op, one commit on the ledger's own connections (a write
// statement alone, or a transaction), again as a whole if it was a deadlock
// victim or a Galera node refused it as not ready (RetryDeadlocks), and
// counts the commit when it succeeded and each deadlock or refusal met.
func (l *Ledger) autocommit(ctx context.Context, op func() error) error {
	err := retry(ctx, l.opts.NotReadyWait, op, func(err error) {
		if isDeadlock(err) {
			l.writes.deadlocked()
		} else {
			l.writes.refused()
		}
	})
	if err == nil {
		l.writes.committed()
	}
	return err
}

// forSpans calls fn on consecutive spans [lo, hi) of at most size items.
func forSpans(n, size int, fn func(lo, hi int) error) error {
	for lo := 0; lo < n; lo += size {
		if err := fn(lo, min(lo+size, n)); err != nil {
			return err
		}
	}
	return nil
}

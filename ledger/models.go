package ledger

import (
	"math"
	"strings"

	"gorm.io/gorm"

	"github.com/delayq/delayq/queue"
)

// NeverStale is the lease_until of a waiting row: a durable job waiting
// for its first run is kept in step with Redis by the relay
// (recoverer.Relay), so the recoverer's stale scan, and the stale-rows
// metric, never count it, however long a backlog keeps it waiting.
const NeverStale int64 = math.MaxInt64

// Entry is one row of the in-flight ledger: a job some worker claimed and that
// has not finished for good, or a durable topic's job waiting for its first
// run. All times are Unix milliseconds.
//
// A row's State is in_flight while a handler runs the job and retrying
// while the job waits in Redis for its next attempt; either way the job is
// not finished and the recoverer must be able to put it back. A durable
// topic's job has a row from its enqueue on: waiting for its first run
// (attempt 0), in SQL and, within the horizon, in Redis (docs/design.md
// §4.11). The column keeps its older spellings (queue.State.Column).
//
// The index on (state, run_at) serves the relay's scan of waiting rows by
// due time (Scheduled) and the counts of ScheduledCounts; lease_until's
// serves the recoverer's scan of stale rows (a waiting row's lease_until is
// NeverStale: the relay, not the recoverer, keeps it in step with Redis).
//
// The migrations (ledger/migrations) create the tables; these models are
// what the queries read and write, and TestModelsMatchMigrations keeps the
// two in agreement. The column types are spelled out so that gorm's
// AutoMigrate of a model gives exactly the migrated table. Raw types in a `type:` tag go to the
// database verbatim on both dialects (SQLite derives the column affinity from
// the name: varchar → TEXT, bigint/int → INTEGER, longblob → BLOB). The id is
// the exception: only gorm's generic integer type becomes SQLite's rowid alias
// "integer PRIMARY KEY AUTOINCREMENT" (a raw "bigint" primary key would not
// auto-increment there), and MySQL makes it "bigint AUTO_INCREMENT".
// Attempt counters use the generic int type with size 32 (INT on MySQL,
// integer on SQLite): a raw "int" tag is read by gorm as its generic int type
// and would become BIGINT for a Go int.
//
// An empty payload is stored as zero bytes, never NULL; it reads back as an
// empty slice on MySQL and as nil on SQLite (its driver's choice).
//
// Topic, job id and worker compare byte-wise (the MySQL tables use
// utf8mb4_bin, SQLite's default collation is binary): job ids are Redis keys,
// and "Order:1" and "order:1" are different jobs. (utf8mb4_bin still ignores
// trailing spaces; queue.ValidateID admits no spaces, so no two ids collide.)
type Entry struct {
	ID          int64       `gorm:"column:id;primaryKey;autoIncrement"`
	Topic       string      `gorm:"column:topic;type:varchar(64);not null;uniqueIndex:,composite:topic_job,priority:1"`
	JobID       string      `gorm:"column:job_id;type:varchar(200);not null;uniqueIndex:,composite:topic_job,priority:2"`
	Payload     []byte      `gorm:"column:payload;type:longblob;not null"`
	Attempt     int         `gorm:"column:attempt;type:int;size:32;not null"`
	MaxAttempts int         `gorm:"column:max_attempts;type:int;size:32;not null"`
	RunAt       int64       `gorm:"column:run_at;type:bigint;not null;index:,composite:state_run_at,priority:2"`
	ClaimedAt   int64       `gorm:"column:claimed_at;type:bigint;not null"`
	LeaseUntil  int64       `gorm:"column:lease_until;type:bigint;not null;index"`
	Worker      string      `gorm:"column:worker;type:varchar(255);not null"`
	State       queue.State `gorm:"column:state;type:varchar(16);not null;index:,composite:state_run_at,priority:1"`
	LastError   string      `gorm:"column:last_error;type:text;not null"`
	// UpdatedAt is written by the ledger itself from its clock; gorm's
	// automatic time tracking is off because it would write seconds.
	UpdatedAt int64 `gorm:"column:updated_at;type:bigint;not null;autoUpdateTime:false"`
	// EnqueuedAt is when the job was enqueued (SQL's clock for a durable
	// job, Redis's for one recorded at its claim), 0 for rows written before
	// the column existed. It is the last column so that Migrate, which
	// appends the columns it adds, upgrades a table to exactly the layout
	// of a new one.
	EnqueuedAt int64 `gorm:"column:enqueued_at;type:bigint;not null;default:0"`
	// FirstClaimedAt is when the job was first claimed (claimed_at is the
	// latest claim's): what its history row calls its first start. 0 until
	// a claim, and on rows claimed before the column existed.
	FirstClaimedAt int64 `gorm:"column:first_claimed_at;type:bigint;not null;default:0"`
	// Trace is the W3C traceparent of the span the job was enqueued in
	// (queue.NewJob.TraceParent), "" (NULL) when none: a push after Redis
	// lost the job writes it back (docs/design.md §4.21).
	Trace string `gorm:"column:trace;type:varchar(64)"`
	// Priority is the job's priority within its topic (queue.NewJob.Priority,
	// docs/design.md §4.23): a push after Redis lost the job puts it back
	// at its level.
	Priority int `gorm:"column:priority;type:tinyint;not null;default:0"`
	// OrderingKey is the job's ordering key (queue.NewJob.OrderingKey,
	// docs/design.md §4.24), "" (NULL) when none: a push after Redis lost
	// the job puts it back in its key's order, and a worker's record of a
	// job of a key first asks whether another of the key is in flight or
	// retrying.
	OrderingKey string `gorm:"column:ordering_key;type:varchar(200)"`
	// Shard is the ledger shard the row was read from (ListShards), 0 on
	// a ledger of one; not a column.
	Shard int `gorm:"-"`
}

// waitingWorker is the worker column of a row that waits for its first
// claim (a durable job's waiting row): 32 spaces, not "". The claim's
// UPDATE writes the worker's id over it, and a row that grows in place
// costs InnoDB a pessimistic update (the page is full of rows inserted in
// order, so a grown record has to move, often splitting the page), while
// one that shrinks or keeps its size is updated where it is. With "" every
// durable claim grew its row by the id's length; measured, the durable
// drain went from 0.75-1.00 of a redis topic's to 0.93-1.18
// (docs/benchmarks.md, "The placeholder worker"). Ids longer than 32
// bytes still work, at the old cost. Readers never see the padding
// (trimWorker).
const waitingWorker = "                                "

// trimWorker drops a waiting row's worker padding (waitingWorker).
func (e *Entry) trimWorker() { e.Worker = strings.TrimRight(e.Worker, " ") }

// AfterFind trims the worker padding of every Entry (and Summary) a gorm
// query reads.
func (e *Entry) AfterFind(*gorm.DB) error {
	e.trimWorker()
	return nil
}

// DeadLetter is one row of the dead-letter archive: a job that ran out of
// attempts or failed permanently, kept with its payload and last error so it
// can be inspected and, if wanted, re-enqueued by hand. A job id may appear
// more than once (the id can be enqueued again after it died).
type DeadLetter struct {
	ID        int64  `gorm:"column:id;primaryKey;autoIncrement"`
	Topic     string `gorm:"column:topic;type:varchar(64);not null;index:,composite:topic_died,priority:1"`
	JobID     string `gorm:"column:job_id;type:varchar(200);not null"`
	Payload   []byte `gorm:"column:payload;type:longblob;not null"`
	Attempts  int    `gorm:"column:attempts;type:int;size:32;not null"`
	LastError string `gorm:"column:last_error;type:text;not null"`
	DiedAt    int64  `gorm:"column:died_at;type:bigint;not null;index:,composite:topic_died,priority:2"`
}

// Outcomes of a finished job, as its history row names them.
const (
	OutcomeSucceeded = "succeeded" // its handler returned nil
	OutcomeDead      = "dead"      // out of attempts, or failed for good
	OutcomeCancelled = "cancelled" // cancelled while waiting (queue's Cancel)
	OutcomePurged    = "purged"    // dead, then deleted from the dead set
)

// HistoryRow is one finished job (docs/design.md §4.18): written in the
// transaction that deletes its ledger row (a success, a death, a cancel of
// a job with a row), or in its operation's own (a cancel of a job that had
// none); a purge of a dead job turns its row's outcome to purged. The
// rows are kept for the history retention, then deleted in bounded
// batches (PurgeHistory). All times are Unix milliseconds; the claims'
// times are SQL's clock, like the ledger row's.
type HistoryRow struct {
	ID          int64  `gorm:"column:id;primaryKey;autoIncrement" json:"-"`
	Topic       string `gorm:"column:topic;type:varchar(64);not null;index:,composite:topic_job,priority:1;index:,composite:topic_finished,priority:1" json:"topic"`
	JobID       string `gorm:"column:job_id;type:varchar(200);not null;index:,composite:topic_job,priority:2" json:"id"`
	Outcome     string `gorm:"column:outcome;type:varchar(16);not null" json:"outcome"`
	Attempts    int    `gorm:"column:attempts;type:int;size:32;not null" json:"attempts"`
	MaxAttempts int    `gorm:"column:max_attempts;type:int;size:32;not null" json:"max_attempts"`
	EnqueuedAt  int64  `gorm:"column:enqueued_at;type:bigint;not null" json:"enqueued_at"`
	// DueAt is when the finishing attempt was due (a retried job's retry
	// time; a first run's due time).
	DueAt int64 `gorm:"column:due_at;type:bigint;not null" json:"due_at"`
	// FirstClaimedAt is the first claim (its first start, give or take the
	// claim-ahead), ClaimedAt the last one; 0 for a job cancelled before
	// any claim.
	FirstClaimedAt int64 `gorm:"column:first_claimed_at;type:bigint;not null" json:"first_claimed_at"`
	ClaimedAt      int64 `gorm:"column:claimed_at;type:bigint;not null" json:"claimed_at"`
	FinishedAt     int64 `gorm:"column:finished_at;type:bigint;not null;index:,composite:topic_finished,priority:2" json:"finished_at"`
	// Worker is the process that held the last claim ("" before any).
	Worker    string `gorm:"column:worker;type:varchar(255);not null" json:"worker"`
	LastError string `gorm:"column:last_error;type:text;not null" json:"last_error"`
	// Result is what the handler of a succeeded job recorded
	// (queue.RecordResult): JSON, nil when none.
	Result JobResult `gorm:"column:result;type:text" json:"result,omitempty"`
	// Partition is the partition the job ran in, for a topic of several
	// (docs/design.md §7.1): the row's topic column holds it, and History
	// shows the topic's name in Topic. Not a column.
	Partition string `gorm:"-" json:"partition,omitempty"`
}

// Column sizes, checked before writing so that MySQL (which rejects overlong
// values in strict mode) and SQLite (which stores anything) behave alike.
const (
	maxTopicLen  = 64
	maxJobIDLen  = 200
	maxWorkerLen = 255
	// maxErrorBytes bounds last_error well below TEXT's 65,535 bytes: an
	// error message longer than this is noise, and an overlong one must never
	// make a whole batch fail.
	maxErrorBytes = 16 << 10
)

// PeriodicTick is one row of dq_periodic: the last tick (Unix ms) a
// periodic schedule enqueued on a durable topic (package queue/periodic).
// A tick is claimed by a conditional update (last_tick < tick) in the
// transaction that enqueues its job, so it is enqueued once across every
// process that runs the schedule (EnqueueTick). Redis topics keep the same
// in Redis (the topic's ticks hash).
type PeriodicTick struct {
	Name      string `gorm:"column:name;type:varchar(64);primaryKey"`
	Topic     string `gorm:"column:topic;type:varchar(64);not null"`
	LastTick  int64  `gorm:"column:last_tick;type:bigint;not null"`
	UpdatedAt int64  `gorm:"column:updated_at;type:bigint;not null;autoUpdateTime:false"`
}

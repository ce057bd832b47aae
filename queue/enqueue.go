package queue

import (
	"time"
)

// NewJob is a job to enqueue. Give a Delay (from Redis's clock) or a RunAt
// (Unix ms), or neither for "due now".
type NewJob struct {
	ID          string // idempotency key, e.g. "order_close:123"
	Payload     []byte
	Delay       time.Duration
	RunAt       int64 // Unix ms; a time in the past means due now
	MaxAttempts int   // 0 means Config.DefaultMaxAttempts
	// Priority is the job's priority within its topic, 0 (the default)
	// to MaxPriority: due jobs of a higher priority are claimed first
	// (docs/design.md §4.23).
	Priority int
	// PartitionKey, on a topic of several partitions, chooses the job's
	// partition: jobs with the same key land on the same one (one
	// customer's, one order's), whatever their ids. Without it the id
	// chooses. An id is unique within its partition, so a producer that
	// retries an enqueue gives the same key again. Same characters as an
	// id; ignored by a topic of one partition.
	PartitionKey string
	// OrderingKey makes the job one of a sequence: jobs of one topic with
	// the same key run one at a time, in due-time order (enqueue order
	// among equal due times), whatever their priorities; jobs of other
	// keys run beside them. A job holds its key from the moment it is the
	// key's earliest until it succeeds, is cancelled or dies: its retries
	// hold the key too (docs/design.md §4.24). On a topic of several
	// partitions it is the partition key (a PartitionKey, if given, must
	// be the same). Same characters as an id.
	OrderingKey string
	// TraceParent is the W3C traceparent of the span the job's runs are
	// children of (docs/design.md §4.21). A client with Config.Trace sets
	// it from the enqueue's context when it is empty or not a valid
	// traceparent; without Config.Trace it is dropped. A durable topic
	// keeps it in the job's ledger row, so that a job pushed to Redis
	// again after Redis lost it keeps its trace.
	TraceParent string
}

// EnqueueResult says what became of one enqueued job.
type EnqueueResult struct {
	ID string
	// Duplicate: the id was already known (due, in flight or dead, or
	// finished within the topic's uniqueness window); nothing was written.
	Duplicate bool
	RunAt     int64 // Unix ms due time; for a duplicate, the waiting job's own (0 if it is not waiting)
	// Finished is set for a duplicate of a job that finished within the
	// topic's uniqueness window (Config.TopicUniqueFor): how it ended and
	// until when its id stays taken.
	Finished *Finished
}

// Finished is how a job whose id is still taken ended (docs/design.md
// §4.2.1, the uniqueness window).
type Finished struct {
	// Outcome is succeeded, cancelled, dead or purged (a dead job deleted
	// from the dead set), as the job's history says.
	Outcome string
	// TakenUntil is when the window ends (Unix ms): an enqueue of the id
	// from then on is a new job.
	TakenUntil int64
}

// The outcomes a Finished may carry: those of the job history.
const (
	FinishedSucceeded = "succeeded"
	FinishedCancelled = "cancelled"
	FinishedDead      = "dead"
	FinishedPurged    = "purged"
)

// BatchStatus is the outcome of one job of a batch.
type BatchStatus string

// The outcomes of EnqueueBatch, per job.
const (
	BatchCreated   BatchStatus = "created"
	BatchDuplicate BatchStatus = "duplicate"
	BatchInvalid   BatchStatus = "invalid"
)

// BatchResult is one job's outcome in EnqueueBatch, in input order.
type BatchResult struct {
	ID       string
	Status   BatchStatus
	RunAt    int64     // as in EnqueueResult
	Finished *Finished // as in EnqueueResult
	Err      error     // the *ValidationError of an invalid job
}

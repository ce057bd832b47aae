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
	// PartitionKey, on a topic of several partitions, chooses the job's
	// partition: jobs with the same key land on the same one (one
	// customer's, one order's), whatever their ids. Without it the id
	// chooses. An id is unique within its partition, so a producer that
	// retries an enqueue gives the same key again. Same characters as an
	// id; ignored by a topic of one partition.
	PartitionKey string
}

// EnqueueResult says what became of one enqueued job.
type EnqueueResult struct {
	ID        string
	Duplicate bool  // the id was already known (due, in flight or dead); nothing was written
	RunAt     int64 // Unix ms due time; for a duplicate, the waiting job's own (0 if it is not waiting)
}

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
	ID     string
	Status BatchStatus
	RunAt  int64 // as in EnqueueResult
	Err    error // the *ValidationError of an invalid job
}

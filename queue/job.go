package queue

import (
	"time"
)

// Job is one delayed job as Redis holds it: its identity, its payload and the
// bookkeeping of its envelope. Times are Unix milliseconds, as everywhere in
// delayq.
type Job struct {
	Topic       string
	ID          string
	Payload     []byte
	Attempt     int    // claims so far; 1 while the first run is in flight
	MaxAttempts int    // claims allowed before the job goes dead
	EnqueuedAt  int64  // Unix ms, Redis clock
	RunAt       int64  // Unix ms the job is (or was) due, Redis clock
	LastError   string // error of the previous failed attempt, if any
	Priority    int    // 0 (the default) to MaxPriority (NewJob.Priority)
	OrderingKey string // NewJob.OrderingKey; "" for none

	// Delivery is set on a claimed job: 1 + the earlier runs of this job
	// that ended with its handler's answer (a failure or a timeout; success
	// ends the job). Unlike Attempt it does not count a claim lost to a
	// crashed or stalled worker before or while its handler ran, so a
	// receiver's first call sees 1 even when Attempt is 2. A run cut by a
	// crash is not counted either: the same Delivery can come twice, so
	// deduplicate on the job's id. A Redis restart that loses the topic's
	// data resets it to 1. It is not a fence; Attempt is (Ref).
	Delivery int

	// LeaseUntil is set on a claimed job (the one a handler runs): the
	// lease deadline (Unix ms, Redis clock) after which another worker may
	// take the job over.
	LeaseUntil int64
	// ClaimedAt is set on a claimed job: when its claim was made (Unix ms,
	// Redis clock).
	ClaimedAt int64
	// Durable is set on a claimed job of a durable topic
	// (Config.TopicDurability): the job has had its ledger row since its
	// enqueue, so recording the claim updated that row.
	Durable bool
	// Partition is set on a claimed job of a topic of several partitions
	// (docs/design.md §7.1): the name of the partition it was claimed from,
	// which its Ref names; Topic is the topic's. Empty otherwise.
	Partition string
	// TraceParent is set on a claimed job by a worker with tracing on
	// (WorkerConfig.TracerProvider): the W3C traceparent of the span its
	// enqueue ran in (Config.Trace), "" for none. The handler's context
	// carries the run's span, a child of it (docs/design.md §4.21).
	TraceParent string
}

// Ref returns the reference of this claim of j.
// A claim of a partitioned topic's job names its partition (Job.Partition).
func (j *Job) Ref() Ref {
	if j.Partition != "" {
		return Ref{Topic: j.Partition, ID: j.ID, Attempt: j.Attempt}
	}
	return Ref{Topic: j.Topic, ID: j.ID, Attempt: j.Attempt}
}

// RunTime returns RunAt as a time.Time.
func (j *Job) RunTime() time.Time { return time.UnixMilli(j.RunAt) }

// Ref names one claim of a job. The attempt acts as a fencing token: an
// operation on a claim that was since taken over by another worker (lease
// expired, job claimed again) does nothing.
type Ref struct {
	Topic   string
	ID      string
	Attempt int
}

// DeadJob is a failed claim that died: out of attempts, or failed for good.
// The worker moves it to the topic's dead set in Redis, and the ledger
// archives it with its payload.
type DeadJob struct {
	Job   *Job
	Error string
	// DiedAt is the time of death (Unix ms) the ledger archives; 0: the
	// ledger's clock. The dead set in Redis takes Redis's own time instead.
	DiedAt int64
}

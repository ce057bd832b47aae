package queue

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalid is wrapped by every ValidationError.
	ErrInvalid = errors.New("invalid input")

	// The kinds of invalid input; each ValidationError wraps one of them.
	ErrInvalidTopic       = errors.New("invalid topic")
	ErrInvalidID          = errors.New("invalid job id")
	ErrPayloadTooLarge    = errors.New("payload too large")
	ErrInvalidRunAt       = errors.New("due time out of range")
	ErrInvalidMaxAttempts = errors.New("max attempts out of range")
	ErrInvalidPriority    = errors.New("priority out of range")
	// ErrInvalidOrderingKey: an ordering key that is not an id's
	// characters, or a partition key that differs from it.
	ErrInvalidOrderingKey = errors.New("invalid ordering key")
	ErrBatchTooLarge      = errors.New("batch too large")
	// ErrInvalidPartition: a partition key that is not an id's characters,
	// or a partition count out of range or lower than the topic's.
	ErrInvalidPartition = errors.New("invalid partition key or count")
	// ErrOtherShard: a job enqueued in a transaction on one ledger shard
	// routes to another shard (its partition's, docs/design.md §7.1);
	// give it a partition key of that shard (Engine.ShardOfKey).
	ErrOtherShard = errors.New("job routes to another ledger shard")

	// ErrInFlight is returned by Cancel for a job a worker holds: its
	// handler may be running.
	ErrInFlight = errors.New("job is in flight")
	// ErrDead is returned by Cancel for a dead job (requeue or purge it instead).
	ErrDead = errors.New("job is dead")
	// ErrContended is returned by Reschedule when the job kept moving
	// (other reschedules, claims) while it tried: nothing of this call was
	// applied; try again.
	ErrContended = errors.New("job kept moving while being rescheduled")
	// ErrNotFound is returned when a job id is not known to Redis (by
	// Cancel: to Redis nor to the ledger).
	ErrNotFound = errors.New("job not found")
	// ErrLedger is wrapped, with the ledger's own error, by an error of a
	// Ledger call the queue made on the caller's behalf (Cancel): the SQL
	// side failed, not Redis.
	ErrLedger = errors.New("ledger")
	// ErrBadEnvelope means a stored envelope could not be decoded.
	ErrBadEnvelope = errors.New("malformed job envelope")
)

// ValidationError is bad input, refused before anything was written. It names
// the field and the limit it broke; errors.Is matches both ErrInvalid and the
// specific kind (ErrInvalidTopic, ErrPayloadTooLarge, ...).
type ValidationError struct {
	Field  string // "topic", "id", "payload", "run_at", "delay", "max_attempts", "jobs"
	Reason string // what is wrong, with the limit
	Kind   error
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("%s: %s: %s", e.Kind, e.Field, e.Reason)
}

// Unwrap lets errors.Is match the kind and ErrInvalid.
func (e *ValidationError) Unwrap() []error { return []error{e.Kind, ErrInvalid} }

// ErrLeaseExpired is the cause of a handler context that ended because the
// job's lease ran out (the heartbeat could not renew it): another worker may
// be running the job by now.
var ErrLeaseExpired = errors.New("lease expired")

// ErrCancelRequested is the cause of a handler context that ended because
// an operator or a service asked to cancel the job while it ran
// (context.Cause tells it from a deadline). A run that then ends in an
// error ends cancelled, never retried.
var ErrCancelRequested = errors.New("cancel requested")

// ErrShutdown is the cause of a handler context that ended because the
// worker's shutdown timeout ran out.
var ErrShutdown = errors.New("worker shutting down")

// GoneError is returned by a Ledger's Record when some of the claimed jobs
// are claims after the first (Attempt > 1) whose ledger rows are gone and
// whose history says they succeeded or died since their enqueue: Redis
// still held a finished job, because a worker committed its transactional
// completion and could not tell Redis before it lost the ledger or died.
// The other jobs of the call were recorded. The worker must not run the
// jobs in Refs: it forgets them in Redis (docs/design.md §4.3).
type GoneError struct {
	Refs []Ref
	// Dead are those of Refs whose history's last finish is a death: the
	// worker buries them again in Redis rather than forgetting them as
	// succeeded, so that the dead set (and a uniqueness window's outcome)
	// says what became of them.
	Dead []Ref
	// Held are claimed jobs, not in Refs, whose ordering key another job
	// of the key holds in the ledger (in flight or retrying): Redis lost
	// the key's state (docs/design.md §4.24). They were not recorded; the
	// worker hands them back to wait (WorkerConfig.KeyWait).
	Held []Ref
	// HeldBy is, per Held (same index), the id of the job the ledger has
	// in flight or retrying for its key.
	HeldBy []string
}

func (e *GoneError) Error() string {
	return fmt.Sprintf("ledger: %d claimed jobs have no ledger row and finished already, %d wait for another job of their ordering key: not run",
		len(e.Refs), len(e.Held))
}

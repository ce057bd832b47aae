package dataplane

import "context"

// Ledger is the durable record of claimed jobs that the worker keeps in SQL
// (package ledger implements it). The worker writes a job's row before its
// handler runs and deletes it only after the handler succeeded, so whatever a
// crash or a Redis data loss drops, the recoverer can put back.
//
// Every method is one statement (or one transaction) per call, however many
// jobs it carries, committed before it returns; an implementation may
// commit the writes of concurrent calls together (package ledger's group
// commit), which changes no caller's guarantee. Methods that take a Ref are fenced by its attempt: a row
// rewritten by a later claim of the same job is left alone. A method must
// not modify the slice it is given: the worker hands the same one to Redis.
//
// Client.Cancel takes one too: it deletes a cancelled job's row (Complete)
// before the job's Redis entries, and reads the row (Lookup) of a job Redis
// has no trace of.
type Ledger interface {
	// Record writes one in-flight row per job (keyed by topic and id),
	// in one statement as a rule: attempt, lease until, worker; a new row
	// for a redis topic's job, the waiting row for a Durable one. The jobs
	// are ones Claim returned, so LeaseUntil and Durable are set.
	Record(ctx context.Context, jobs []*Job, worker string) error
	// Complete deletes the rows of jobs whose handler succeeded, each
	// leaving its history row in the same transaction.
	Complete(ctx context.Context, refs []Ref) error
	// CompleteResults is Complete with the handlers' results: results[i]
	// (JSON, nil for none) goes into refs[i]'s history row, in the same
	// transaction.
	CompleteResults(ctx context.Context, refs []Ref, results [][]byte) error
	// CancelRows deletes the rows of cancelled jobs (waiting for their
	// first run or a retry, or held by the worker whose run was cancelled),
	// fenced by attempt like Complete, each leaving its history row
	// (cancelled) in the same transaction. Client.Cancel calls it, and the
	// worker's completer for a run cancelled while held (CancelRunning).
	CancelRows(ctx context.Context, refs []Ref) error
	// Cancelled writes the history rows of cancelled jobs that had no
	// ledger row (a redis topic's job waiting for its first run), in one
	// statement of their own.
	Cancelled(ctx context.Context, jobs []*Job) error
	// DropClaim deletes the row of one claim if it is still that claim's
	// row: in progress, at ref's attempt, written by worker. The worker
	// calls it for a claim whose lease ran out before its handler started
	// once Redis shows the job dead or settled: a worker that stalled
	// between its claim and its record wrote the row after another worker
	// had the job, and left it would outlive the job.
	DropClaim(ctx context.Context, ref Ref, worker string) error
	// Unclaim hands the rows of released jobs of durable topics back to
	// waiting: attempt given back (one less), waiting when that is 0,
	// retrying otherwise. A durable job's row is its only durable copy, so
	// a release must not delete it.
	Unclaim(ctx context.Context, refs []Ref) error
	// DropRows deletes the rows of released claims of redis topics, fenced
	// by attempt like Complete, without a history row: the jobs did not
	// finish. A history row of a success would make the next claim of a
	// job released at attempt 2 or later forget it unrun.
	DropRows(ctx context.Context, refs []Ref) error
	// Extend moves lease_until of the given rows to leaseUntil (Unix ms).
	Extend(ctx context.Context, refs []Ref, leaseUntil int64) error
	// MarkRetrying marks rows as waiting for a retry at RunAt, leased until
	// LeaseUntil, so a Redis loss during the backoff loses nothing.
	MarkRetrying(ctx context.Context, retries []RetryRequest) error
	// Bury archives dead jobs with their last error and deletes their rows,
	// in one transaction.
	Bury(ctx context.Context, dead []DeadJob) error
	// Lookup returns the row of one job as a RestoreRow (its State tells a
	// waiting job from one a worker holds), or nil when there is none.
	// Client.Cancel uses it for a job Redis has no trace of; the worker
	// never calls it.
	Lookup(ctx context.Context, topic, id string) (*RestoreRow, error)
}

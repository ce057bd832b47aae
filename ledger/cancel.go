package ledger

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/queue"
)

// Cancel cancels a job that has not started, in Redis and in the ledger,
// with no moment in which the recoverer could bring it back: a job waiting
// for a retry has a ledger row, and a row whose job Redis no longer tracks
// is exactly what the recoverer re-enqueues. So the row goes first, fenced
// by the attempt seen in Redis (a claim made meanwhile rewrites the row with
// a newer attempt and keeps it), then the Redis entries. Errors are
// queue.Cancel's: ErrNotFound, ErrInFlight, ErrDead.
//
// If the Redis step fails after the row went, the job is still due and runs
// as a plain due job (it is not lost while Redis keeps it).
func (l *Ledger) Cancel(ctx context.Context, q *queue.Client, topic, id string) (*queue.Job, error) {
	info, err := q.Get(ctx, topic, id)
	if err != nil {
		return nil, err
	}
	if info.State == queue.StateScheduled && info.Job.Attempt > 0 {
		if err := l.Complete(ctx, []queue.Ref{info.Job.Ref()}); err != nil {
			return nil, fmt.Errorf("ledger: cancel %s/%s: %w", topic, id, err)
		}
	}
	job, err := q.Cancel(ctx, topic, id)
	if err != nil {
		return nil, err
	}
	if job.Attempt > 0 && (info.Job == nil || job.Attempt != info.Job.Attempt) {
		// Retried again between the two reads: its newer row goes too.
		if err := l.Complete(ctx, []queue.Ref{job.Ref()}); err != nil {
			return job, fmt.Errorf("ledger: cancel %s/%s: job cancelled, its ledger row remains: %w", topic, id, err)
		}
	}
	return job, nil
}

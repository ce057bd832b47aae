package ledger

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/delayq/delayq/queue"
)

// Transactional wraps a handler so that its business writes and the deletion
// of its job's ledger row commit together, in one transaction on the
// ledger's database. Together with a unique key in the business table this
// makes the handler's effect exactly-once: if the transaction commits, the
// job is finished for good (the worker's later batched Complete is a no-op);
// if fn returns an error, everything rolls back, the row stays, and the error
// is returned for the worker to retry.
//
// fn runs first and the DELETE last, so the row is locked only for the
// moment of the DELETE (an earlier lock would stall any worker that tries to
// Record a takeover of the job while fn runs). If the DELETE finds no row
// for this attempt, the claim was lost (the job was taken over or cancelled):
// the transaction rolls back and the error wraps ErrClaimLost, so the effect
// is left to the job's current owner.
//
// The job's history row (succeeded, with what fn recorded through
// queue.RecordResult) is written in the same transaction.
//
// A transaction the server rolled back as a whole (a deadlock, a Galera
// certification conflict, a node not ready) is not run again here, since fn
// may do more than SQL: its error wraps ErrRetryable, and the worker runs
// the job again as for any error (wrap the handler in RetryDeadlocks to
// try again within the attempt).
func Transactional(l *Ledger, fn func(ctx context.Context, tx *gorm.DB, job *queue.Job) error) func(ctx context.Context, job *queue.Job) error {
	return func(ctx context.Context, job *queue.Job) error {
		return retryableTx(l.conn(ctx).Transaction(func(tx *gorm.DB) error {
			if err := fn(ctx, tx, job); err != nil {
				return err
			}
			return l.deleteInTx(tx, job.Ref(), queue.RecordedResult(ctx))
		}))
	}
}

// DeleteInTx deletes the ledger row of ref, fenced by its attempt, inside a
// transaction the caller runs (and must commit for it to count), for
// handlers that manage their own transaction. It returns an error wrapping
// ErrClaimLost when no such row exists; the caller should then roll back.
//
// The job's history row (succeeded) is written in the same transaction,
// with the result the handler recorded (queue.RecordResult) when tx was
// begun with the handler's context (db.WithContext(ctx).Transaction).
//
// It is a method, not a free function, because the table name depends on
// Options.TablePrefix.
func (l *Ledger) DeleteInTx(tx *gorm.DB, ref queue.Ref) error {
	var result []byte
	if tx.Statement != nil {
		result = queue.RecordedResult(tx.Statement.Context)
	}
	return l.deleteInTx(tx, ref, result)
}

// deleteInTx is DeleteInTx with the job's result (nil: none).
func (l *Ledger) deleteInTx(tx *gorm.DB, ref queue.Ref, result []byte) error {
	if err := checkKey(ref.Topic, ref.ID); err != nil {
		return fmt.Errorf("ledger: delete: %w", err)
	}
	if len(result) > queue.MaxResultBytes {
		return fmt.Errorf("ledger: delete %s/%s: %w", ref.Topic, ref.ID, queue.ErrResultTooLarge)
	}
	if l.keepsHistory(ref.Topic) {
		var results [][]byte
		if result != nil {
			results = [][]byte{result}
		}
		err := l.historyFrom(tx, OutcomeSucceeded, l.nowMs(), []queue.Ref{ref}, results,
			"topic = ? AND job_id = ? AND attempt = ?", ref.Topic, ref.ID, ref.Attempt)
		if err != nil {
			return fmt.Errorf("ledger: history of %s/%s attempt %d: %w", ref.Topic, ref.ID, ref.Attempt, err)
		}
	}
	res := tx.Table(l.ledgerTable).
		Where("topic = ? AND job_id = ? AND attempt = ?", ref.Topic, ref.ID, ref.Attempt).
		Delete(&Entry{})
	if res.Error != nil {
		return fmt.Errorf("ledger: delete %s/%s attempt %d: %w", ref.Topic, ref.ID, ref.Attempt, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("ledger: delete %s/%s attempt %d: %w", ref.Topic, ref.ID, ref.Attempt, ErrClaimLost)
	}
	return nil
}

package ledger

import (
	"context"
	"fmt"
	"strconv"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/queue"
)

// Complete deletes the rows of jobs whose handler succeeded, each leaving
// its history row (outcome succeeded) in the same transaction: one INSERT
// ... SELECT and one DELETE, no commit of their own. It is fenced by
// attempt: a row rewritten by a later claim of the same job (this worker's
// lease expired and another worker took the job over) is left alone, since
// that claim has not finished. Rows already gone (a transactional handler
// deleted its own) are skipped silently.
func (l ops) Complete(ctx context.Context, refs []queue.Ref) error {
	return l.CompleteResults(ctx, refs, nil)
}

// CompleteResults is Complete with the handlers' results (queue.RecordResult):
// results[i], JSON or nil for none, goes into the history row of refs[i].
// results is nil or as long as refs.
func (l ops) CompleteResults(ctx context.Context, refs []queue.Ref, results [][]byte) error {
	if results != nil && len(results) != len(refs) {
		return fmt.Errorf("ledger: complete %d jobs: %d results", len(refs), len(results))
	}
	for i, r := range results {
		if len(r) > queue.MaxResultBytes {
			return fmt.Errorf("ledger: complete %d jobs: result of %s/%s: %w", len(refs), refs[i].Topic, refs[i].ID, queue.ErrResultTooLarge)
		}
	}
	if err := l.finish(ctx, refs, OutcomeSucceeded, results); err != nil {
		return fmt.Errorf("ledger: complete %d jobs: %w", len(refs), err)
	}
	return nil
}

// CancelRows deletes the rows of cancelled jobs (waiting for their first
// run or a retry, or held by a worker whose run was cancelled), fenced by
// attempt like Complete, each leaving its history row (outcome cancelled)
// in the same transaction.
func (l ops) CancelRows(ctx context.Context, refs []queue.Ref) error {
	if err := l.finish(ctx, refs, OutcomeCancelled, nil); err != nil {
		return fmt.Errorf("ledger: cancel %d jobs: %w", len(refs), err)
	}
	return nil
}

// DropRows deletes the rows of released claims of redis topics, fenced by
// attempt like Complete, without a history row: the jobs did not finish
// (dataplane.Ledger). A release written as a success, as it was, made
// the next claim of a job released at attempt 2 or later find its history
// "succeeded" and forget it unrun (queue.GoneError).
func (l ops) DropRows(ctx context.Context, refs []queue.Ref) error {
	if err := l.finish(ctx, refs, "", nil); err != nil {
		return fmt.Errorf("ledger: drop %d released rows: %w", len(refs), err)
	}
	return nil
}

// finish deletes the rows of refs, fenced by attempt, copying them into
// history as finished with outcome first (none for outcome ""), with
// results (nil, or one per ref), in one transaction (a write of the group
// commit: no commit of its own while others flow).
func (l ops) finish(ctx context.Context, refs []queue.Ref, outcome string, results [][]byte) error {
	if len(refs) == 0 {
		return nil
	}
	refs, results = sortedWithResults(refs, results)
	history := false
	for _, r := range refs {
		history = history || outcome != "" && l.keepsHistory(r.Topic)
	}
	now := l.nowMs()
	perRef, bytes := 3, len(refs)*rowBytes
	if results != nil {
		perRef = 6 // the history statement's CASE arm: topic, id, result
		for _, r := range results {
			bytes += len(r)
		}
	}
	w := l.inBatches(len(refs), perRef, 2, bytes, func(db *gorm.DB, lo, hi int) error {
		where := l.dialect.tupleIn(hi-lo, "topic", "job_id", "attempt")
		vars := refVars(refs[lo:hi], true)
		if history {
			var rs [][]byte
			if results != nil {
				rs = results[lo:hi]
			}
			if err := l.historyFrom(db, outcome, now, refs[lo:hi], rs, where, vars...); err != nil {
				return fmt.Errorf("history: %w", err)
			}
		}
		return db.Table(l.ledgerTable).Where(where, vars...).Delete(&Entry{}).Error
	})
	w.atomic = w.atomic || history // the copy and the delete commit together
	return l.commit(ctx, w)
}

// DropClaim deletes the row of one claim if it is still that claim's:
// in flight, at ref's attempt, written by worker (dataplane.Ledger). Fenced
// on the claim itself, not only its attempt: a release gives the attempt
// back (Unclaim), so another claim's waiting row can carry the same one.
func (l ops) DropClaim(ctx context.Context, ref queue.Ref, worker string) error {
	if err := checkKey(ref.Topic, ref.ID); err != nil {
		return fmt.Errorf("ledger: drop claim: %w", err)
	}
	err := l.commit(ctx, l.inBatches(1, 5, 0, rowBytes, func(db *gorm.DB, _, _ int) error {
		return db.Table(l.ledgerTable).
			Where("topic = ? AND job_id = ? AND attempt = ? AND worker = ? AND state = ?",
				ref.Topic, ref.ID, ref.Attempt, worker, queue.StateInFlight).
			Delete(&Entry{}).Error
	}))
	if err != nil {
		return fmt.Errorf("ledger: drop the claim of %s/%s at attempt %d: %w", ref.Topic, ref.ID, ref.Attempt, err)
	}
	return nil
}

// Unclaim hands the rows of released claims of durable topics back to
// waiting, in one statement: the attempt given back (one less), state
// waiting when that leaves 0 and retrying otherwise, lease_until =
// NeverStale for a waiting row (the relay's, like any waiting row) and
// run_at for a retrying one (stale once overdue, so the recoverer restores
// it if Redis lost it), no worker.
// Fenced by attempt like Complete: a row rewritten by a later claim, or
// already handed back, is left alone. Rows of redis topics are deleted
// instead (DropRows): Redis alone holds their waiting jobs.
func (l ops) Unclaim(ctx context.Context, refs []queue.Ref) error {
	if len(refs) == 0 {
		return nil
	}
	refs = sortedRefs(refs)
	now := l.nowMs()
	err := l.commit(ctx, l.inBatches(len(refs), 3, 1, len(refs)*rowBytes, func(db *gorm.DB, lo, hi int) error {
		// state and lease_until are assigned before attempt and read the
		// old attempt:
		// MySQL evaluates the assignments of a single-table UPDATE left to
		// right (a later one sees the earlier ones' new values), SQLite
		// reads every right-hand side from the old row; in this order both
		// mean the same.
		q := "UPDATE `" + l.ledgerTable + "` SET" +
			" state = CASE WHEN attempt > 1 THEN '" + queue.StateRetrying.Column() + "' ELSE '" + queue.StateWaiting.Column() + "' END," +
			" lease_until = CASE WHEN attempt > 1 THEN run_at ELSE " + strconv.FormatInt(NeverStale, 10) + " END," +
			" attempt = attempt - 1, worker = '" + waitingWorker + "', updated_at = ?" +
			" WHERE " + l.dialect.tupleIn(hi-lo, "topic", "job_id", "attempt")
		vars := append([]any{now}, refVars(refs[lo:hi], true)...)
		return db.Exec(q, vars...).Error
	}))
	if err != nil {
		return fmt.Errorf("ledger: unclaim %d jobs: %w", len(refs), err)
	}
	return nil
}

// Extend raises lease_until of the given rows to leaseUntil, in one
// statement per heartbeat. It never lowers it: a late heartbeat, or one
// racing with MarkRetrying (which sets a later deadline), must not make a
// row look stale earlier than it is. It is not fenced by attempt: a longer
// lease on a row that changed hands only delays the recoverer, never causes
// a duplicate.
func (l ops) Extend(ctx context.Context, refs []queue.Ref, leaseUntil int64) error {
	if len(refs) == 0 {
		return nil
	}
	refs = sortedRefs(refs)
	now := l.nowMs()
	err := l.commit(ctx, l.inBatches(len(refs), 2, 2, len(refs)*rowBytes, func(db *gorm.DB, lo, hi int) error {
		return db.Table(l.ledgerTable).
			Where(l.dialect.tupleIn(hi-lo, "topic", "job_id"), refVars(refs[lo:hi], false)...).
			Updates(map[string]any{
				"lease_until": gorm.Expr(l.dialect.greatest+"(lease_until, ?)", leaseUntil),
				"updated_at":  now,
			}).Error
	}))
	if err != nil {
		return fmt.Errorf("ledger: extend %d jobs: %w", len(refs), err)
	}
	return nil
}

// MarkRetrying marks rows as waiting in Redis for another attempt: state
// retrying, the next run time, a lease deadline after it, and the error. The
// row stays so that a Redis loss during the backoff loses nothing. Fenced by
// attempt like Complete. The values differ per job, so the one UPDATE joins
// the rows with the list of new values (see dialect.markRetrying); when a
// job appears twice the last wins. A row already gone is not recreated.
// Each request needs RunAt: a Delay alone means Redis's clock, which the
// ledger cannot read.
func (l ops) MarkRetrying(ctx context.Context, retries []dataplane.RetryRequest) error {
	if len(retries) == 0 {
		return nil
	}
	for i, r := range retries {
		if r.RunAt <= 0 {
			return fmt.Errorf("ledger: mark retrying: request %d (%s/%s) has no RunAt", i, r.Topic, r.ID)
		}
	}
	retries = lastRetries(retries) // a copy: sorting it leaves the caller's slice alone
	sortRetries(retries)
	now := l.nowMs()
	err := l.commit(ctx, l.inBatches(len(retries), 6, 2, retryBytes(retries), func(db *gorm.DB, lo, hi int) error {
		rows := make([][]any, 0, hi-lo)
		for _, r := range retries[lo:hi] {
			rows = append(rows, []any{r.Topic, r.ID, r.Attempt, r.RunAt, r.LeaseUntil, cleanError(r.Error)})
		}
		q, vars := l.dialect.markRetrying(l.ledgerTable, queue.StateRetrying, now, rows)
		return db.Exec(q, vars...).Error
	}))
	if err != nil {
		return fmt.Errorf("ledger: mark %d jobs retrying: %w", len(retries), err)
	}
	return nil
}

// retryBytes is roughly what MarkRetrying sends for retries.
func retryBytes(retries []dataplane.RetryRequest) int {
	n := 0
	for _, r := range retries {
		n += rowBytes + len(r.Error)
	}
	return n
}

// refVars flattens refs into the bind variables of tupleIn: topic, id and,
// when fenced, attempt.
func refVars(refs []queue.Ref, fenced bool) []any {
	per := 2
	if fenced {
		per = 3
	}
	vars := make([]any, 0, per*len(refs))
	for _, r := range refs {
		vars = append(vars, r.Topic, r.ID)
		if fenced {
			vars = append(vars, r.Attempt)
		}
	}
	return vars
}

// lastRetries drops all but the last request of each job, so that "last one wins"
// does not depend on the order the database applies the joined values in.
func lastRetries(retries []dataplane.RetryRequest) []dataplane.RetryRequest {
	at := make(map[refKey]int, len(retries))
	out := make([]dataplane.RetryRequest, 0, len(retries))
	for _, r := range retries {
		k := refKey{r.Topic, r.ID}
		if i, dup := at[k]; dup {
			out[i] = r
			continue
		}
		at[k] = len(out)
		out = append(out, r)
	}
	return out
}

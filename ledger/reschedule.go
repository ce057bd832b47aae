package ledger

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/queue"
)

// Reschedule moves the due time of a waiting row (dataplane.Client.Reschedule,
// docs/design.md §4.14): run_at becomes runAt, and a retrying row's
// lease_until moves with it (it stays one lease after the run time, so the
// recoverer does not take the row for stale before the job's new time); a
// waiting row's lease_until stays NeverStale. Fenced by attempt and only
// while the row waits (waiting or retrying): a row a claim made
// in flight, or rewrote with a newer attempt, is left alone. It reports
// whether the row now waits at ref.Attempt with runAt.
func (l ops) Reschedule(ctx context.Context, ref queue.Ref, from, runAt int64) (bool, error) {
	// lease_until is assigned before run_at and reads the old run_at:
	// MySQL evaluates a single-table UPDATE's assignments left to right,
	// SQLite reads every right-hand side from the old row; in this order
	// both mean the same.
	q := "UPDATE `" + l.ledgerTable + "` SET" +
		" lease_until = CASE WHEN state = ? THEN lease_until + (? - run_at) ELSE lease_until END," +
		" run_at = ?, updated_at = ?" +
		" WHERE topic = ? AND job_id = ? AND attempt = ? AND state IN (?, ?) AND (? = 0 OR run_at = ?)"
	var n int64
	err := RetryDeadlocks(ctx, func() error {
		res := l.conn(ctx).Exec(q, queue.StateRetrying, runAt, runAt, l.nowMs(),
			ref.Topic, ref.ID, ref.Attempt, queue.StateWaiting, queue.StateRetrying, from, from)
		n = res.RowsAffected
		return res.Error
	})
	if err != nil {
		return false, fmt.Errorf("ledger: reschedule %s/%s: %w", ref.Topic, ref.ID, err)
	}
	if n > 0 {
		return true, nil
	}
	// MySQL counts changed rows only: a row that already had these values
	// (the same millisecond) is not counted. Ask, unless the fence asked
	// for another run_at: a row at runAt then is someone else's move.
	if from != 0 && from != runAt {
		return false, nil
	}
	var same int64
	err = l.conn(ctx).Table(l.ledgerTable).
		Where("topic = ? AND job_id = ? AND attempt = ? AND state IN (?, ?) AND run_at = ?",
			ref.Topic, ref.ID, ref.Attempt, queue.StateWaiting, queue.StateRetrying, runAt).
		Count(&same).Error
	if err != nil {
		return false, fmt.Errorf("ledger: reschedule %s/%s: read it back: %w", ref.Topic, ref.ID, err)
	}
	return same > 0, nil
}

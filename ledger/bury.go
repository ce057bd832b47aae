package ledger

import (
	"context"
	"fmt"
	"slices"

	"gorm.io/gorm"

	"github.com/delayq/delayq/queue"
)

// deadColumns is how many columns an INSERT of a DeadLetter binds.
const deadColumns = 6

// Bury moves dead jobs from the ledger to the dead-letter archive, with their
// payload and last error, in one transaction: one multi-row INSERT, the
// history rows copied from the ledger rows (outcome dead, finished now; the
// dead letter keeps the time of death), and one DELETE, so a job is never
// both in flight and dead, nor neither. The DELETE
// is not fenced by attempt: the job is already dead in Redis, so no later
// claim of it can exist. When a job appears twice the last one wins.
func (l ops) Bury(ctx context.Context, dead []queue.DeadJob) error {
	if len(dead) == 0 {
		return nil
	}
	now := l.nowMs()
	rows := make([]DeadLetter, 0, len(dead))
	seen := make(map[refKey]int, len(dead))
	for i, d := range dead {
		if d.Job == nil {
			return fmt.Errorf("ledger: bury: dead job %d has no job", i)
		}
		if err := checkKey(d.Job.Topic, d.Job.ID); err != nil {
			return fmt.Errorf("ledger: bury: dead job %d: %w", i, err)
		}
		died := d.DiedAt
		if died == 0 {
			died = now
		}
		r := DeadLetter{
			Topic:     d.Job.Topic,
			JobID:     d.Job.ID,
			Payload:   nonNil(d.Job.Payload),
			Attempts:  d.Job.Attempt,
			LastError: cleanError(d.Error),
			DiedAt:    died,
		}
		k := refKey{r.Topic, r.JobID}
		if at, dup := seen[k]; dup {
			rows[at] = r
			continue
		}
		seen[k] = len(rows)
		rows = append(rows, r)
	}
	sortDead(rows)
	bytes := 0
	for i := range rows {
		bytes += rowBytes + len(rows[i].Payload) + len(rows[i].LastError)
	}
	err := l.commit(ctx, write{atomic: true, bytes: bytes, run: func(tx *gorm.DB) error {
		err := forSpans(len(rows), l.batchSize(deadColumns, 0), func(lo, hi int) error {
			batch := slices.Clone(rows[lo:hi]) // see Record: ids are written back
			return tx.Table(l.deadTable).CreateInBatches(&batch, len(batch)).Error
		})
		if err != nil {
			return fmt.Errorf("archive: %w", err)
		}
		err = forSpans(len(rows), l.batchSize(2, 2), func(lo, hi int) error {
			vars := make([]any, 0, 2*(hi-lo))
			for _, r := range rows[lo:hi] {
				vars = append(vars, r.Topic, r.JobID)
			}
			where := l.dialect.tupleIn(hi-lo, "topic", "job_id")
			// Its history row from its ledger row, in this transaction.
			if err := l.historyFrom(tx, OutcomeDead, now, nil, nil, where, vars...); err != nil {
				return fmt.Errorf("history: %w", err)
			}
			return tx.Table(l.ledgerTable).Where(where, vars...).Delete(&Entry{}).Error
		})
		if err != nil {
			return fmt.Errorf("delete rows: %w", err)
		}
		return nil
	}})
	if err != nil {
		return fmt.Errorf("ledger: bury %d jobs: %w", len(rows), err)
	}
	return nil
}

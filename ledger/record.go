package ledger

import (
	"context"
	"fmt"
	"slices"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/delayq/delayq/queue"
)

// entryColumns is how many columns an INSERT of an Entry binds (all but id).
const entryColumns = 13

// recordUpsert is the conflict clause of Record: a job claimed again (after a
// retry, or taken over when a lease expired) rewrites its existing row, so
// the row always describes the latest claim; a durable job's scheduled row
// becomes in_progress in the same statement. MySQL gets ON DUPLICATE KEY
// UPDATE col=VALUES(col), SQLite ON CONFLICT (topic, job_id) DO UPDATE SET
// col=excluded.col. The row keeps its id, so Stale's paging stays stable,
// and its enqueued_at: the job was enqueued once, whoever claims it.
var recordUpsert = clause.OnConflict{
	Columns: []clause.Column{{Name: "topic"}, {Name: "job_id"}},
	DoUpdates: clause.AssignmentColumns([]string{
		"payload", "attempt", "max_attempts", "run_at", "claimed_at",
		"lease_until", "worker", "state", "last_error", "updated_at",
	}),
}

// Record writes one in-progress row per claimed job, keyed by (topic, id),
// in one multi-row upsert. It must succeed before any of the jobs' handlers
// runs: a job without a row is a job the recoverer cannot bring back.
// worker names the claiming process (host:pid). An empty batch is a no-op.
// When the same job appears twice the last one wins.
func (l *Ledger) Record(ctx context.Context, jobs []*queue.Job, worker string) error {
	if len(jobs) == 0 {
		return nil
	}
	if err := checkText("worker", worker, maxWorkerLen); err != nil {
		return err
	}
	now := l.nowMs()
	rows := make([]Entry, 0, len(jobs))
	seen := make(map[refKey]int, len(jobs))
	for i, j := range jobs {
		if j == nil {
			return fmt.Errorf("ledger: record: job %d is nil", i)
		}
		if err := checkKey(j.Topic, j.ID); err != nil {
			return fmt.Errorf("ledger: record: job %d: %w", i, err)
		}
		e := Entry{
			Topic:       j.Topic,
			JobID:       j.ID,
			Payload:     nonNil(j.Payload),
			Attempt:     j.Attempt,
			MaxAttempts: j.MaxAttempts,
			RunAt:       j.RunAt,
			ClaimedAt:   now,
			LeaseUntil:  j.LeaseUntil,
			Worker:      worker,
			State:       StateInProgress,
			LastError:   cleanError(j.LastError),
			UpdatedAt:   now,
			EnqueuedAt:  j.EnqueuedAt,
		}
		k := refKey{j.Topic, j.ID}
		if at, dup := seen[k]; dup {
			rows[at] = e
			continue
		}
		seen[k] = len(rows)
		rows = append(rows, e)
	}
	sortEntries(rows)
	bytes := 0
	for i := range rows {
		bytes += rowBytes + len(rows[i].Payload) + len(rows[i].LastError)
	}
	w := l.inBatches(len(rows), entryColumns, 0, bytes, func(db *gorm.DB, lo, hi int) error {
		// A copy: gorm writes the new ids back into what it inserts, and a
		// retried statement must not send them as explicit ids.
		batch := slices.Clone(rows[lo:hi])
		// CreateInBatches with the batch's own length: exactly one INSERT,
		// whatever CreateBatchSize the caller configured on its gorm.DB.
		return db.Table(l.ledgerTable).Clauses(recordUpsert).CreateInBatches(&batch, len(batch)).Error
	})
	w.urgent = true // handlers wait for it
	err := l.commit(ctx, w)
	if err != nil {
		return fmt.Errorf("ledger: record %d jobs: %w", len(rows), err)
	}
	return nil
}

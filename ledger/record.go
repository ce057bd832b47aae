package ledger

import (
	"context"
	"fmt"
	"slices"

	"gorm.io/gorm"

	"github.com/delayq/delayq/queue"
)

// entryColumns is how many columns an INSERT of an Entry binds (all but id).
const entryColumns = 16

// recordUpdates are the columns of the conflict clause of Record's upsert: a
// job claimed again whose row the UPDATE did not take (see recordOn)
// rewrites its existing row, so the row describes the latest claim. MySQL
// gets ON DUPLICATE KEY UPDATE col=IF(guard, VALUES(col), col), SQLite ON
// CONFLICT (topic, job_id) DO UPDATE SET col=excluded.col WHERE guard. The
// row keeps its id, so Stale's paging stays stable, and its enqueued_at:
// the job was enqueued once, whoever claims it.
//
// The guard is that the claim is not older than the row's (its attempt at
// least the row's). A worker that stalls between its claim and its record
// (a pause past the lease) commits after another worker claimed the job
// again: its late upsert must not roll the newer claim's row back to an
// attempt that claim's settlement, fenced by attempt, no longer matches.
// attempt comes last: MySQL assigns left to right, so every guard before
// it still reads the row's old attempt.
var recordUpdates = []string{
	"payload", "max_attempts", "run_at", "claimed_at",
	"lease_until", "worker", "state", "last_error", "updated_at", "attempt",
}

// Record writes one in-flight row per claimed job, keyed by (topic, id).
// It must succeed before any of the jobs' handlers runs: a job without a
// row is a job the recoverer cannot bring back. worker names the claiming
// process (host:pid). An empty batch is a no-op. When the same job appears
// twice the last one wins.
//
// A redis topic's jobs (new rows) are written by one multi-row upsert; a
// durable topic's (queue.Job.Durable: the row waits since the enqueue) by
// one UPDATE of their rows, which keeps what a claim does not change
// (payload, max_attempts, run_at, last_error, enqueued_at), with the upsert
// after it for any row it did not find (see recordOn). A job claimed
// again (Attempt > 1) whose row is gone and whose history says it
// succeeded or died since its enqueue finished already (its ack was
// lost): it is not written, and the error is a *queue.GoneError naming it
// (the others are recorded).
func (l ops) Record(ctx context.Context, jobs []*queue.Job, worker string) error {
	if len(jobs) == 0 {
		return nil
	}
	if err := checkText("worker", worker, maxWorkerLen); err != nil {
		return err
	}
	now := l.nowMs()
	rows := make([]claimRow, 0, len(jobs))
	seen := make(map[refKey]int, len(jobs))
	for i, j := range jobs {
		if j == nil {
			return fmt.Errorf("ledger: record: job %d is nil", i)
		}
		if err := checkKey(j.Topic, j.ID); err != nil {
			return fmt.Errorf("ledger: record: job %d: %w", i, err)
		}
		r := claimRow{known: j.Durable, Entry: Entry{
			Topic:       j.Topic,
			JobID:       j.ID,
			Payload:     nonNil(j.Payload),
			Attempt:     j.Attempt,
			MaxAttempts: j.MaxAttempts,
			RunAt:       j.RunAt,
			ClaimedAt:   now,
			LeaseUntil:  j.LeaseUntil,
			Worker:      worker,
			State:       queue.StateInFlight,
			LastError:   cleanError(j.LastError),
			UpdatedAt:   now,
			EnqueuedAt:  j.EnqueuedAt,
			Priority:    j.Priority,
			OrderingKey: j.OrderingKey,
		}}
		k := refKey{j.Topic, j.ID}
		if at, dup := seen[k]; dup {
			rows[at] = r
			continue
		}
		seen[k] = len(rows)
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b claimRow) int { return byKey(a.Topic, a.JobID, b.Topic, b.JobID) })
	bytes := 0
	for i := range rows {
		bytes += rowBytes + len(rows[i].Payload) + len(rows[i].LastError)
	}
	// gone is the last run's: a write tried again (a deadlock, a group
	// that failed) runs its spans again from the first.
	var gone, dead, held []queue.Ref
	var heldBy []string
	w := l.inBatches(len(rows), entryColumns, 0, bytes, func(db *gorm.DB, lo, hi int) error {
		if lo == 0 {
			gone, dead, held, heldBy = gone[:0], dead[:0], held[:0], heldBy[:0]
		}
		g, d, h, b, err := l.recordOn(db, rows[lo:hi])
		gone, dead, held, heldBy = append(gone, g...), append(dead, d...), append(held, h...), append(heldBy, b...)
		return err
	})
	w.urgent = true // handlers wait for it
	err := l.commit(ctx, w)
	if err != nil {
		return fmt.Errorf("ledger: record %d jobs: %w", len(rows), err)
	}
	if len(gone) > 0 || len(held) > 0 {
		return &queue.GoneError{Refs: gone, Dead: dead, Held: held, HeldBy: heldBy}
	}
	return nil
}

package ledger

import (
	"context"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"github.com/delayq/delayq/queue"
)

// The worker's claim of a durable topic's jobs (queue.DurableRecorder):
// their rows exist already (scheduled, or retrying), so the claim rewrites
// them with one UPDATE joined with the claims' values. Record's upsert does
// the same, but an INSERT ... ON DUPLICATE KEY UPDATE that meets its
// unique key first inserts into the clustered index and undoes that before
// it updates, which made the durable drain cost MariaDB about twice the CPU
// per job of a redis topic's.
var _ queue.DurableRecorder = (*Ledger)(nil)

// recordClaimColumns is how many values RecordClaimed binds per job.
const recordClaimColumns = 5

// RecordClaimed writes the claims of jobs whose rows exist (a durable
// topic's): each row, matched by (topic, job_id), becomes in_progress with
// the claim's attempt, lease and last error, claimed now by worker. Rows it
// does not find (the job's row was deleted meanwhile, or the topic became
// durable after the job was enqueued) are written by Record's upsert, so
// the outcome is Record's in every case: every job has its row.
func (l *Ledger) RecordClaimed(ctx context.Context, jobs []*queue.Job, worker string) error {
	if len(jobs) == 0 {
		return nil
	}
	if err := checkText("worker", worker, maxWorkerLen); err != nil {
		return err
	}
	// The last claim of an id wins, as in Record; sorted, so that two
	// workers' statements take the rows' locks in one order.
	seen := make(map[refKey]int, len(jobs))
	uniq := make([]*queue.Job, 0, len(jobs))
	for i, j := range jobs {
		if j == nil {
			return fmt.Errorf("ledger: record: job %d is nil", i)
		}
		if err := checkKey(j.Topic, j.ID); err != nil {
			return fmt.Errorf("ledger: record: job %d: %w", i, err)
		}
		k := refKey{j.Topic, j.ID}
		if at, dup := seen[k]; dup {
			uniq[at] = j
			continue
		}
		seen[k] = len(uniq)
		uniq = append(uniq, j)
	}
	sortJobs(uniq)
	now := l.nowMs()
	matched := int64(0)
	err := l.inBatches(ctx, len(uniq), recordClaimColumns, 4, func(db *gorm.DB, lo, hi int) error {
		q, vars := l.dialect.recordClaimed(l.ledgerTable, worker, now, uniq[lo:hi])
		res := db.Exec(q, vars...)
		matched += res.RowsAffected
		return res.Error
	})
	if err != nil {
		return fmt.Errorf("ledger: record %d claims: %w", len(uniq), err)
	}
	if matched < int64(len(uniq)) {
		// Some rows were not there: the upsert writes every claim again
		// (the same values for the rows just updated).
		return l.Record(ctx, uniq, worker)
	}
	return nil
}

// recordClaimed returns RecordClaimed's statement over jobs and its bind
// variables: an UPDATE joined with the claims' values on (topic, job_id).
func (d dialect) recordClaimed(table, worker string, now int64, jobs []*queue.Job) (string, []any) {
	var b strings.Builder
	b.Grow(256 + len(jobs)*48)
	vars := make([]any, 0, 3+len(jobs)*recordClaimColumns)
	if d.name == "mysql" {
		b.WriteString("UPDATE `" + table + "` AS l JOIN (")
		for i, j := range jobs {
			if i == 0 {
				b.WriteString("SELECT ? AS topic, ? AS job_id, ? AS attempt, ? AS lease_until, ? AS last_error")
			} else {
				b.WriteString(" UNION ALL SELECT ?,?,?,?,?")
			}
			vars = append(vars, j.Topic, j.ID, j.Attempt, j.LeaseUntil, cleanError(j.LastError))
		}
		b.WriteString(") AS v ON l.topic = v.topic AND l.job_id = v.job_id SET" +
			" l.state = '" + StateInProgress + "', l.worker = ?, l.claimed_at = ?, l.updated_at = ?," +
			" l.attempt = v.attempt, l.lease_until = v.lease_until, l.last_error = v.last_error")
		return b.String(), append(vars, worker, now, now)
	}
	b.WriteString("UPDATE `" + table + "` SET state = '" + StateInProgress + "', worker = ?, claimed_at = ?, updated_at = ?," +
		" attempt = v.column3, lease_until = v.column4, last_error = v.column5 FROM (VALUES ")
	vars = append(vars, worker, now, now)
	for i, j := range jobs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?)")
		vars = append(vars, j.Topic, j.ID, j.Attempt, j.LeaseUntil, cleanError(j.LastError))
	}
	b.WriteString(") AS v WHERE `" + table + "`.topic = v.column1 AND `" + table + "`.job_id = v.column2")
	return b.String(), vars
}

package ledger

import (
	"context"
	"fmt"
	"strings"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/queue"
	"gorm.io/gorm"
)

// The history of finished jobs (docs/design.md §4.18). A job with a ledger
// row gets its history row from that row, by one INSERT ... SELECT in the
// transaction of the DELETE that removes it: no commit of its own, and no
// row from this process's memory that could disagree with SQL's.

// historyColumns are the history row's columns an INSERT writes, in the
// order historyFromLedger selects them.
var historyColumns = []string{"topic", "job_id", "outcome", "attempts", "max_attempts", "enqueued_at", "due_at",
	"first_claimed_at", "claimed_at", "finished_at", "worker", "last_error", "result"}

// historySQL returns the head of the INSERT ... SELECT that copies ledger
// rows into history (the result's expression follows, then historyFrom
// and its WHERE), and the filter of the topics that keep none ("" when
// every topic keeps history).
func historySQL(historyTable, ledgerTable string, noHistory []string) (head, filter string) {
	head = "INSERT INTO `" + historyTable + "` (`" + strings.Join(historyColumns, "`,`") + "`) " +
		"SELECT `topic`, `job_id`, ?, `attempt`, `max_attempts`, `enqueued_at`, `run_at`, " +
		// A row claimed before first_claimed_at existed has 0 there: its
		// latest claim is the best known.
		"CASE WHEN `first_claimed_at` = 0 THEN `claimed_at` ELSE `first_claimed_at` END, " +
		// A waiting row's worker is blanks (waitingWorker): none.
		"`claimed_at`, ?, TRIM(`worker`), `last_error`, "
	if len(noHistory) > 0 {
		q := make([]string, len(noHistory))
		for i, t := range noHistory {
			// Topic names are [A-Za-z0-9_.:-] (queue.ValidateTopic): no
			// quote can end the literal.
			q[i] = "'" + strings.ReplaceAll(t, "'", "") + "'"
		}
		filter = " AND `topic` NOT IN (" + strings.Join(q, ",") + ")"
		// A partition's rows carry its name, topic~k.p~n: the range of
		// its names, as topicMatch takes them (not LIKE, which ignores
		// case on SQLite and would leave another topic out).
		for _, t := range noHistory {
			lo, hi := partitionRange(strings.ReplaceAll(t, "'", ""))
			filter += " AND NOT (`topic` > '" + lo + "' AND `topic` < '" + hi + "')"
		}
	}
	return head, filter
}

// historyFrom copies the ledger rows that where (with its vars) selects
// into history as finished with outcome at finishedAt, on db (the
// transaction of the statement that deletes them, run after this one).
// results (nil, or one per ref of refs, nil for none) are the handlers'
// results of the rows of refs (queue.RecordResult).
func (l *Ledger) historyFrom(db *gorm.DB, outcome string, finishedAt int64, refs []queue.Ref, results [][]byte, where string, vars ...any) error {
	args := make([]any, 0, 2+3*len(results)+len(vars))
	args = append(args, outcome, finishedAt)
	expr := "NULL"
	if len(results) > 0 {
		// One CASE arm per result: a drain whose handlers record none
		// never pays for it.
		var b strings.Builder
		for i, r := range results {
			if r == nil {
				continue
			}
			b.WriteString(" WHEN `topic` = ? AND `job_id` = ? THEN ?")
			args = append(args, refs[i].Topic, refs[i].ID, string(r))
		}
		if b.Len() > 0 {
			expr = "CASE" + b.String() + " ELSE NULL END"
		}
	}
	args = append(args, vars...)
	return db.Exec(l.historyHead+expr+" FROM `"+l.ledgerTable+"` WHERE "+where+l.noHistory, args...).Error
}

// keepsHistory reports whether topic's finished jobs get history rows.
func (l *Ledger) keepsHistory(topic string) bool {
	topic = dataplane.TopicOf(topic) // a partition's is its topic's (docs/design.md §7.1)
	for _, t := range l.opts.NoHistory {
		if t == topic {
			return false
		}
	}
	return true
}

// Cancelled writes the history rows of cancelled jobs that had no ledger
// row (a redis topic's job waiting for its first run), in one statement:
// outcome cancelled, finished now, never claimed. Jobs of topics without
// history are skipped.
func (l ops) Cancelled(ctx context.Context, jobs []*queue.Job) error {
	now := l.nowMs()
	rows := make([]HistoryRow, 0, len(jobs))
	for i, j := range jobs {
		if j == nil {
			return fmt.Errorf("ledger: cancelled: job %d is nil", i)
		}
		if err := checkKey(j.Topic, j.ID); err != nil {
			return fmt.Errorf("ledger: cancelled: job %d: %w", i, err)
		}
		if !l.keepsHistory(j.Topic) {
			continue
		}
		rows = append(rows, HistoryRow{Topic: j.Topic, JobID: j.ID, Outcome: OutcomeCancelled, Attempts: j.Attempt,
			MaxAttempts: j.MaxAttempts, EnqueuedAt: j.EnqueuedAt, DueAt: j.RunAt, FinishedAt: now,
			LastError: cleanError(j.LastError)})
	}
	if len(rows) == 0 {
		return nil
	}
	err := l.autocommit(ctx, func() error {
		return l.conn(ctx).Table(l.historyTable).CreateInBatches(&rows, l.batchSize(len(historyColumns), 0)).Error
	})
	if err != nil {
		return fmt.Errorf("ledger: cancelled: %d history rows: %w", len(rows), err)
	}
	return nil
}

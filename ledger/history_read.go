package ledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
)

// HistoryFilter selects finished jobs of one topic (History). With ID the
// rows are that job id's, newest first; with Prefix they come by job id
// (a job id finished several times oldest first), both from the (topic,
// job_id) index; otherwise newest first by finish time, from the (topic,
// finished_at) index.
// Outcome and the finish-time bounds filter either.
type HistoryFilter struct {
	Topic string // required
	// ID is one job id, exactly; Prefix the start of job ids (printable
	// ASCII, taken literally). At most one of the two.
	ID, Prefix string
	// Outcome is one of the Outcome constants; "" means any.
	Outcome string
	// FinishedFrom and FinishedBefore bound finished_at: from <= t <
	// before (Unix ms); 0 leaves that side open.
	FinishedFrom, FinishedBefore int64
	// After is the previous page's next cursor; "" starts at the start.
	After string
	// Limit is the most rows of a page; it must be positive.
	Limit int
}

// ErrBadCursor is returned for a cursor that is not one of the listing it
// is given to: History's After of another listing (by id, or by time), or
// a cursor of a ledger shard the ledger does not have.
var ErrBadCursor = errors.New("ledger: not a cursor of this listing")

// ValidOutcome reports whether s names an outcome a history row can have.
func ValidOutcome(s string) bool {
	switch s {
	case OutcomeSucceeded, OutcomeDead, OutcomeCancelled, OutcomePurged:
		return true
	}
	return false
}

// History returns a page of the finished jobs f selects, and the cursor of
// the next page ("" on the last one), in one statement.
func (l *Ledger) History(ctx context.Context, f HistoryFilter) ([]HistoryRow, string, error) {
	return l.history(ctx, f, false)
}

// history is History; with atCursor a row at the cursor's own keys is
// included (a shard that sorts past the cursor's, HistoryShards).
func (l *Ledger) history(ctx context.Context, f HistoryFilter, atCursor bool) ([]HistoryRow, string, error) {
	if err := checkLimit(f.Limit); err != nil {
		return nil, "", err
	}
	if f.Topic == "" {
		return nil, "", errors.New("ledger: history: a topic is required")
	}
	if err := checkText("topic", f.Topic, maxTopicLen); err != nil {
		return nil, "", err
	}
	if f.ID != "" && f.Prefix != "" {
		return nil, "", errors.New("ledger: history: an id or a prefix, not both")
	}
	if f.Outcome != "" && !ValidOutcome(f.Outcome) {
		return nil, "", fmt.Errorf("ledger: history: outcome %q: want succeeded, dead, cancelled or purged", f.Outcome)
	}
	where, vars := topicMatch(f.Topic)
	q := l.conn(ctx).Table(l.historyTable).Where(where, vars...)
	switch {
	case f.ID != "":
		q = q.Where("job_id = ?", f.ID)
	case f.Prefix != "":
		if f.Prefix[len(f.Prefix)-1] >= 0x7f {
			return nil, "", fmt.Errorf("ledger: history: id prefix %q: want printable ASCII", f.Prefix)
		}
		upper := f.Prefix[:len(f.Prefix)-1] + string(f.Prefix[len(f.Prefix)-1]+1)
		q = q.Where("job_id >= ? AND job_id < ?", f.Prefix, upper)
	}
	if f.Outcome != "" {
		q = q.Where("outcome = ?", f.Outcome)
	}
	if f.FinishedFrom != 0 {
		q = q.Where("finished_at >= ?", f.FinishedFrom)
	}
	if f.FinishedBefore != 0 {
		q = q.Where("finished_at < ?", f.FinishedBefore)
	}
	mode := "t" // by time
	switch {
	case f.ID != "":
		mode = "e"
	case f.Prefix != "":
		mode = "i"
	}
	if f.After != "" {
		kind, a, b, ok := parseHistoryCursor(f.After)
		if !ok || kind != mode {
			return nil, "", ErrBadCursor
		}
		lt, gt := "<", ">"
		if atCursor {
			lt, gt = "<=", ">="
		}
		switch mode {
		case "e":
			id, _ := strconv.ParseInt(a, 10, 64)
			q = q.Where("id "+lt+" ?", id)
		case "i":
			id, _ := strconv.ParseInt(a, 10, 64)
			q = q.Where("(job_id > ? OR (job_id = ? AND id "+gt+" ?))", b, b, id)
		default:
			at, _ := strconv.ParseInt(a, 10, 64)
			id, _ := strconv.ParseInt(b, 10, 64)
			q = q.Where("(finished_at < ? OR (finished_at = ? AND id "+lt+" ?))", at, at, id)
		}
	}
	switch mode {
	case "e":
		q = q.Order("id DESC")
	case "i":
		q = q.Order("job_id").Order("id")
	default:
		q = q.Order("finished_at DESC").Order("id DESC")
	}
	var rows []HistoryRow
	if err := q.Limit(f.Limit + 1).Find(&rows).Error; err != nil {
		return nil, "", fmt.Errorf("ledger: history of %q: %w", f.Topic, err)
	}
	for k := range rows {
		rows[k].Topic, rows[k].Partition = SplitPartition(rows[k].Topic)
	}
	if len(rows) <= f.Limit {
		return rows, "", nil
	}
	rows = rows[:f.Limit]
	return rows, historyCursor(mode, rows[f.Limit-1]), nil
}

// historyCursor is the cursor of a page of mode ending on last.
func historyCursor(mode string, last HistoryRow) string {
	if mode != "t" {
		return mode + "~" + strconv.FormatInt(last.ID, 10) + "~" + last.JobID
	}
	return "t~" + strconv.FormatInt(last.FinishedAt, 10) + "~" + strconv.FormatInt(last.ID, 10)
}

// parseHistoryCursor reads "e~<id>~<job_id>" (one job id, newest first),
// "i~<id>~<job_id>" (by id) or "t~<finished_at>~<id>" (by time).
func parseHistoryCursor(s string) (kind, a, b string, ok bool) {
	parts := strings.SplitN(s, "~", 3)
	if len(parts) != 3 || (parts[0] != "i" && parts[0] != "e" && parts[0] != "t") {
		return "", "", "", false
	}
	// Numbers in their shortest spelling only, as historyCursor writes
	// them: "+1" or "01" is not a cursor this package gave out.
	canonical := func(v string) bool {
		n, err := strconv.ParseInt(v, 10, 64)
		return err == nil && strconv.FormatInt(n, 10) == v
	}
	if !canonical(parts[1]) {
		return "", "", "", false
	}
	if parts[0] == "t" {
		if !canonical(parts[2]) {
			return "", "", "", false
		}
	} else if checkKey("t", parts[2]) != nil {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}

// MarkPurged turns the history rows of topic's dead jobs that finished at
// or before before (Unix ms) to outcome purged: what a purge of the dead
// set (dataplane.Client.PurgeDead, by time of death) leaves in history. It
// returns how many rows it changed. The dead set's times of death are
// Redis's and the rows' SQL's, a few ms apart at most, so a purge by age
// may leave the edge's row as dead.
func (l *Ledger) MarkPurged(ctx context.Context, topic string, before int64) (int64, error) {
	if err := checkText("topic", topic, maxTopicLen); err != nil {
		return 0, err
	}
	var n int64
	err := l.autocommit(ctx, func() error {
		where, vars := topicMatch(topic)
		res := l.conn(ctx).Table(l.historyTable).Where(where, vars...).
			Where("outcome = ? AND finished_at <= ?", OutcomeDead, before).
			Update("outcome", OutcomePurged)
		n = res.RowsAffected
		return res.Error
	})
	if err != nil {
		return 0, fmt.Errorf("ledger: mark the purged history of %q: %w", topic, err)
	}
	return n, nil
}

// MarkPurgedID turns the history rows of one dead job id of topic to
// purged: what deleting that dead job from Redis (dataplane.Client.
// DeleteDead) leaves in history. Every dead row of the id is turned, as
// MarkPurged turns every row that died before its cut-off: the id's
// earlier deaths were requeued, and their jobs are gone too. It returns
// how many rows it changed.
func (l *Ledger) MarkPurgedID(ctx context.Context, topic, id string) (int64, error) {
	if err := checkKey(topic, id); err != nil {
		return 0, err
	}
	var n int64
	err := l.autocommit(ctx, func() error {
		where, vars := topicMatch(topic)
		res := l.conn(ctx).Table(l.historyTable).Where(where, vars...).
			Where("job_id = ? AND outcome = ?", id, OutcomeDead).
			Update("outcome", OutcomePurged)
		n = res.RowsAffected
		return res.Error
	})
	if err != nil {
		return 0, fmt.Errorf("ledger: mark the purged history of %q/%q: %w", topic, id, err)
	}
	return n, nil
}

// DefaultHistoryRetention is how long history rows are kept when a topic
// sets none: a week, enough to answer "did it run?" about last week's
// orders; longer audits export it.
const DefaultHistoryRetention = 7 * 24 * time.Hour

// PurgeOptions shape a purge of the job history (Ledger.PurgeHistoryWith).
// The zero value is the default of each field.
type PurgeOptions struct {
	// Batch is the most rows one DELETE removes: small enough that a
	// statement stays short (a few ms) and locks little while workers
	// write. Default 500.
	Batch int
	// Duty is the largest share of the time the purge spends deleting:
	// after each DELETE it rests (1-Duty)/Duty times as long as the
	// DELETE and its commit took (at most 1 s), leaving the SQL server
	// to the workers the rest of the time. On a 2-core host running the
	// SQL server too, a million-row purge back to back cut a drain to
	// 0.73x of the same drain alone; a duty of 0.1, 0.88x; 0.05, see
	// docs/benchmarks.md. 0 < Duty <= 1. Default 0.05 (about 2,000 rows/s
	// there; a faster server goes faster).
	Duty float64
	// Each, if not nil, is called after every DELETE with the rows it
	// deleted, how long the statement took and how long its commit took:
	// what the benchmark watches.
	Each func(rows int64, statement, commit time.Duration)
}

// DefaultPurgeBatch and DefaultPurgeDuty are PurgeOptions' defaults.
const (
	DefaultPurgeBatch = 500
	DefaultPurgeDuty  = 0.05
)

// withDefaults fills in PurgeOptions' defaults and checks the rest.
func (o PurgeOptions) withDefaults() (PurgeOptions, error) {
	if o.Batch == 0 {
		o.Batch = DefaultPurgeBatch
	}
	if o.Duty == 0 {
		o.Duty = DefaultPurgeDuty
	}
	if o.Batch < 1 || o.Batch > 10_000 {
		return o, fmt.Errorf("ledger: purge history: Batch %d: give 1 to 10000 rows", o.Batch)
	}
	if !(o.Duty > 0 && o.Duty <= 1) {
		return o, fmt.Errorf("ledger: purge history: Duty %v: give a share of the time above 0, at most 1", o.Duty)
	}
	return o, nil
}

// PurgeHistory is PurgeHistoryWith with the default options.
func (l *Ledger) PurgeHistory(ctx context.Context, def int64, cutoffs map[string]int64) (int64, error) {
	return l.PurgeHistoryWith(ctx, def, cutoffs, PurgeOptions{})
}

// PurgeHistoryWith deletes the history rows that finished before their
// topic's cutoff (Unix ms): cutoffs for the topics given (a partitioned
// topic's cutoff covers its partitions' rows), otherwise def (0: keep
// them). It deletes in batches of at most o.Batch rows, each its
// own short transaction (the ids found by the (topic, finished_at) index,
// deleted by primary key), resting after each as o.Duty says, until none
// is left or ctx ends, and returns how many it deleted.
func (l *Ledger) PurgeHistoryWith(ctx context.Context, def int64, cutoffs map[string]int64, o PurgeOptions) (int64, error) {
	o, err := o.withDefaults()
	if err != nil {
		return 0, err
	}
	rest := (1 - o.Duty) / o.Duty
	var topics []string
	if err := l.conn(ctx).Table(l.historyTable).Distinct("topic").Pluck("topic", &topics).Error; err != nil {
		return 0, fmt.Errorf("ledger: purge history: topics: %w", err)
	}
	var total int64
	for _, topic := range topics {
		// A partition's rows (topic~K.p~n) keep their topic's retention.
		cut, ok := cutoffs[topic]
		if !ok {
			cut, ok = cutoffs[dataplane.TopicOf(topic)]
		}
		if !ok {
			cut = def
		}
		if cut <= 0 {
			continue
		}
		for ctx.Err() == nil {
			var ids []int64
			err := l.conn(ctx).Table(l.historyTable).Where("topic = ? AND finished_at < ?", topic, cut).
				Order("finished_at").Limit(o.Batch).Pluck("id", &ids).Error
			if err != nil {
				return total, fmt.Errorf("ledger: purge history of %q: %w", topic, err)
			}
			if len(ids) == 0 {
				break
			}
			n, stmt, commit, err := l.deleteHistory(ctx, ids)
			if err != nil {
				return total, fmt.Errorf("ledger: purge history of %q: %w", topic, err)
			}
			if o.Each != nil {
				o.Each(n, stmt, commit)
			}
			total += n
			if len(ids) < o.Batch {
				break
			}
			t := time.NewTimer(min(time.Duration(rest*float64(stmt+commit)), time.Second))
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
	}
	return total, ctx.Err()
}

// deleteHistory deletes the history rows of ids in a transaction of its
// own, and says how long the DELETE and the commit each took: the commit
// waits for the disk, behind the workers' own commits, which no size of
// batch shortens.
func (l *Ledger) deleteHistory(ctx context.Context, ids []int64) (n int64, stmt, commit time.Duration, err error) {
	err = l.autocommit(ctx, func() error {
		tx := l.conn(ctx).Begin()
		if tx.Error != nil {
			return tx.Error
		}
		began := time.Now()
		res := tx.Table(l.historyTable).Where("id IN ?", ids).Delete(&HistoryRow{})
		if res.Error != nil {
			tx.Rollback()
			return res.Error
		}
		n, stmt = res.RowsAffected, time.Since(began)
		began = time.Now()
		if err := tx.Commit().Error; err != nil {
			return err
		}
		commit = time.Since(began)
		return nil
	})
	if err != nil && ctx.Err() != nil {
		// database/sql rolls a transaction back when its context ends,
		// and the commit then says only sql.ErrTxDone: say why.
		err = fmt.Errorf("%w: %w", ctx.Err(), err)
	}
	return n, stmt, commit, err
}

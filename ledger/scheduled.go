package ledger

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/delayq/delayq/queue"
)

// The queries over durable topics' waiting rows: the relay loads what
// falls due within its horizon (Scheduled), the metrics and the dashboard
// count what waits (ScheduledCounts). Both are served by the (state, run_at)
// index.

// afterCursor is the keyset condition of a page in (run_at, id) order after
// a Cursor (its vars: RunAt, RunAt, ID). The range part (run_at >= ?) is
// what the (state, run_at) index seeks to; the OR only drops the rows of the
// cursor's own run_at up to its id. The row-value form (run_at, id) > (?, ?)
// is not a range to MariaDB's optimizer.
const afterCursor = "run_at >= ? AND (run_at > ? OR id > ?)"

// atOrAfterCursor is afterCursor with the cursor's own (run_at, id)
// included.
const atOrAfterCursor = "run_at >= ? AND (run_at > ? OR id >= ?)"

// Scheduled lists, with their payloads, at most limit waiting rows whose
// (run_at, id) is after the cursor and whose run_at is at most upTo, in
// (run_at, id) order; topic "" means every topic. A caller pages on by
// passing the last row's (RunAt, ID) as the next cursor: ids never change,
// so a row waiting throughout is returned once, however rows come and go
// between pages. The rows come straight off the index, without a sort.
func (l ops) Scheduled(ctx context.Context, topic string, after Cursor, upTo int64, limit int) ([]Entry, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	q := "SELECT " + entrySelect + " FROM `" + l.ledgerTable + "`" +
		" WHERE state = ? AND run_at <= ? AND " + afterCursor
	vars := []any{queue.StateWaiting, upTo, after.RunAt, after.RunAt, after.ID}
	if topic != "" {
		q += " AND topic = ?"
		vars = append(vars, topic)
	}
	q += " ORDER BY run_at, id LIMIT ?"
	vars = append(vars, limit)
	rows, err := l.queryEntries(ctx, q, vars...)
	if err != nil {
		return nil, fmt.Errorf("ledger: waiting rows of topic %q after (%d, %d) up to %d: %w", topic, after.RunAt, after.ID, upTo, err)
	}
	return rows, nil
}

// ScheduledCount is how many waiting rows one topic has, and how many of
// them are due after a given time (beyond the relay's horizon: in SQL only).
type ScheduledCount struct {
	Total  int64
	Beyond int64
}

// ScheduledCounts returns, per topic with waiting rows, how many it has
// and how many of them have run_at > beyond, in one statement.
func (l *Ledger) ScheduledCounts(ctx context.Context, beyond int64) (map[string]ScheduledCount, error) {
	rows, err := l.conn(ctx).Raw("SELECT topic, COUNT(*), COUNT(CASE WHEN run_at > ? THEN 1 END) FROM `"+
		l.ledgerTable+"` WHERE state = ? GROUP BY topic", beyond, queue.StateWaiting).Rows()
	if err != nil {
		return nil, fmt.Errorf("ledger: count waiting rows: %w", err)
	}
	defer rows.Close()
	out := make(map[string]ScheduledCount)
	for rows.Next() {
		var topic string
		var c ScheduledCount
		if err := rows.Scan(&topic, &c.Total, &c.Beyond); err != nil {
			return nil, fmt.Errorf("ledger: count waiting rows: %w", err)
		}
		out[topic] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: count waiting rows: %w", err)
	}
	return out, nil
}

// entrySelect is every column of Entry, in the order scanEntry reads them.
const entrySelect = "id, topic, job_id, payload, attempt, max_attempts, run_at, claimed_at, lease_until," +
	" worker, state, last_error, updated_at, enqueued_at, trace, priority, ordering_key"

// queryEntries runs a query selecting entrySelect and scans its rows by
// hand: a page of the relay can be thousands of rows, and gorm's reflection
// would cost more than the query.
func (l *Ledger) queryEntries(ctx context.Context, q string, vars ...any) ([]Entry, error) {
	rows, err := l.conn(ctx).Raw(q, vars...).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		var e Entry
		var trace, okey sql.NullString
		if err := rows.Scan(&e.ID, &e.Topic, &e.JobID, &e.Payload, &e.Attempt, &e.MaxAttempts, &e.RunAt,
			&e.ClaimedAt, &e.LeaseUntil, &e.Worker, &e.State, &e.LastError, &e.UpdatedAt, &e.EnqueuedAt, &trace, &e.Priority, &okey); err != nil {
			return nil, err
		}
		e.Trace, e.OrderingKey = trace.String, okey.String
		e.trimWorker() // a scan by hand: gorm's AfterFind does not run
		out = append(out, e)
	}
	return out, rows.Err()
}

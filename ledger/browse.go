package ledger

import (
	"context"
	"fmt"
	"math"
	"slices"
)

// The job browser's reads (docs/design.md §4.17): the rows of a page of
// jobs Redis listed, in one statement, a page of one topic's rows in one
// state, and a search by id prefix. They read summaries: every column but
// the payload, and the payload's length, so that a page of rows with
// 1 MiB payloads does not read them all from SQL to show their sizes.

// Summary is a ledger row without its payload (Entry.Payload is nil) and
// with the payload's length.
type Summary struct {
	Entry
	PayloadSize int `gorm:"column:payload_size"`
}

// summarySelect is every column of Entry but the payload, and its length.
const summarySelect = "id, topic, job_id, attempt, max_attempts, run_at, claimed_at, lease_until," +
	" worker, state, last_error, updated_at, enqueued_at, priority, ordering_key, LENGTH(payload) AS payload_size"

// maxRowsPerLookup bounds the ids of one RowsOf statement; the API's pages
// are at most 1,000 jobs, so one statement in practice.
const maxRowsPerLookup = 1000

// RowsOf returns the rows (summaries) of topic's jobs ids that have one
// (topic exactly: a partition's name for a partition's jobs, as Redis's
// listing names each job's partition),
// by job id: the in-flight page of the job browser joins Redis's lease set
// with the rows' worker and claim this way, one statement per page instead
// of one per job, on the unique (topic, job_id) index.
func (l *Ledger) RowsOf(ctx context.Context, topic string, ids []string) (map[string]Summary, error) {
	out := make(map[string]Summary, len(ids))
	for lo := 0; lo < len(ids); lo += maxRowsPerLookup {
		hi := min(lo+maxRowsPerLookup, len(ids))
		var rows []Summary
		err := l.conn(ctx).Table(l.ledgerTable).Select(summarySelect).
			Where("topic = ? AND job_id IN ?", topic, ids[lo:hi]).Find(&rows).Error
		if err != nil {
			return nil, fmt.Errorf("ledger: rows of %d jobs of topic %q: %w", hi-lo, topic, err)
		}
		for _, e := range rows {
			out[e.JobID] = e
		}
	}
	return out, nil
}

// ListSummaries is List with summaries instead of whole rows: the same
// filter, order, keyset paging and index.
func (l *Ledger) ListSummaries(ctx context.Context, f ListFilter) ([]Summary, *Cursor, error) {
	rows, more, err := l.listSummaries(ctx, f, false)
	if err != nil || !more {
		return rows, nil, err
	}
	last := rows[len(rows)-1]
	return rows, &Cursor{RunAt: last.RunAt, ID: last.ID}, nil
}

// listSummaries is ListSummaries, saying whether more rows follow; with
// atCursor a row at the cursor itself is included (list).
func (l *Ledger) listSummaries(ctx context.Context, f ListFilter, atCursor bool) ([]Summary, bool, error) {
	q, err := l.listQuery(ctx, f, atCursor)
	if err != nil {
		return nil, false, err
	}
	var rows []Summary
	if err := q.Select(summarySelect).Find(&rows).Error; err != nil {
		return nil, false, fmt.Errorf("ledger: list rows (state %q, topic %q): %w", f.State, f.Topic, err)
	}
	if len(rows) > f.Limit {
		return rows[:f.Limit], true, nil
	}
	return rows, false, nil
}

// ByPrefix returns at most limit rows (summaries) of topic whose job id
// starts with prefix and comes after after ("" to start), in job id order,
// and the next page's after ("" on the last page).
//
// The condition is the byte range [prefix, prefix with its last byte
// incremented), not LIKE: job ids compare byte-wise on both dialects
// (utf8mb4_bin, SQLite's BINARY), so the range is exactly the ids with the
// prefix and one range scan of the (topic, job_id) index, whereas SQLite's
// LIKE ignores case (it would find "Order:1" for "order:") and uses no
// index. Job ids are printable ASCII (queue.ValidateID), so the last byte
// never overflows and no character needs escaping.
func (l *Ledger) ByPrefix(ctx context.Context, topic, prefix, after string, limit int) ([]Summary, string, error) {
	if err := checkLimit(limit); err != nil {
		return nil, "", err
	}
	if prefix == "" || prefix[len(prefix)-1] >= 0x7f {
		return nil, "", fmt.Errorf("ledger: id prefix %q: want printable ASCII, not empty", prefix)
	}
	upper := prefix[:len(prefix)-1] + string(prefix[len(prefix)-1]+1)
	from, op := prefix, ">="
	if after != "" && after >= from {
		// After a page that ended on the id equal to the prefix, too.
		from, op = after, ">"
	}
	read := limit
	if read < math.MaxInt {
		read++ // one more: is there a next page?
	}
	var rows []Summary
	where, vars := topicMatch(topic)
	err := l.conn(ctx).Table(l.ledgerTable).Select(summarySelect).
		Where(where, vars...).Where("job_id "+op+" ? AND job_id < ?", from, upper).
		Order("job_id").Order("id").Limit(read).Find(&rows).Error
	if err != nil {
		return nil, "", fmt.Errorf("ledger: rows of topic %q with id prefix %q after %q: %w", topic, prefix, after, err)
	}
	if len(rows) > limit {
		last := rows[limit-1].JobID
		if rows[limit].JobID == last {
			// The id is in several partitions (a topic's listing takes
			// them all): the page takes every row of it, or the next page,
			// which starts after it, would skip some.
			var same []Summary
			err := l.conn(ctx).Table(l.ledgerTable).Select(summarySelect).
				Where(where, vars...).Where("job_id = ?", last).Order("id").Find(&same).Error
			if err != nil {
				return nil, "", fmt.Errorf("ledger: rows of topic %q with id %q: %w", topic, last, err)
			}
			k := slices.IndexFunc(rows, func(s Summary) bool { return s.JobID == last })
			rows = append(rows[:k], same...)
			return rows, last, nil
		}
		rows = rows[:limit]
		return rows, last, nil
	}
	return rows, "", nil
}

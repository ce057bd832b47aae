package ledger

import (
	"context"
	"fmt"
	"math"
)

// The job browser's reads (docs/design.md §4.17): the rows of a page of
// jobs Redis listed, in one statement, and a search by id prefix. Both are
// served by the unique (topic, job_id) index.

// maxRowsPerLookup bounds the ids of one RowsOf statement; the API's pages
// are at most 1,000 jobs, so one statement in practice.
const maxRowsPerLookup = 1000

// RowsOf returns the rows of topic's jobs ids that have one, by job id:
// the in-flight page of the job browser joins Redis's lease set with the
// rows' worker and claim this way, one statement per page instead of one
// per job.
func (l *Ledger) RowsOf(ctx context.Context, topic string, ids []string) (map[string]Entry, error) {
	out := make(map[string]Entry, len(ids))
	for lo := 0; lo < len(ids); lo += maxRowsPerLookup {
		hi := min(lo+maxRowsPerLookup, len(ids))
		var rows []Entry
		err := l.conn(ctx).Table(l.ledgerTable).
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

// ByPrefix returns at most limit rows of topic whose job id starts with
// prefix and comes after after ("" to start), in job id order, and the
// next page's after ("" on the last page).
//
// The condition is the byte range [prefix, prefix with its last byte
// incremented), not LIKE: job ids compare byte-wise on both dialects
// (utf8mb4_bin, SQLite's BINARY), so the range is exactly the ids with the
// prefix and one range scan of the (topic, job_id) index, whereas SQLite's
// LIKE ignores case (it would find "Order:1" for "order:") and uses no
// index. Job ids are printable ASCII (queue.ValidateID), so the last byte
// never overflows and no character needs escaping.
func (l *Ledger) ByPrefix(ctx context.Context, topic, prefix, after string, limit int) ([]Entry, string, error) {
	if err := checkLimit(limit); err != nil {
		return nil, "", err
	}
	if prefix == "" || prefix[len(prefix)-1] >= 0x7f {
		return nil, "", fmt.Errorf("ledger: id prefix %q: want printable ASCII, not empty", prefix)
	}
	upper := prefix[:len(prefix)-1] + string(prefix[len(prefix)-1]+1)
	from, op := prefix, ">="
	if after > from {
		from, op = after, ">"
	}
	read := limit
	if read < math.MaxInt {
		read++ // one more: is there a next page?
	}
	var rows []Entry
	err := l.conn(ctx).Table(l.ledgerTable).
		Where("topic = ? AND job_id "+op+" ? AND job_id < ?", topic, from, upper).
		Order("job_id").Limit(read).Find(&rows).Error
	if err != nil {
		return nil, "", fmt.Errorf("ledger: rows of topic %q with id prefix %q after %q: %w", topic, prefix, after, err)
	}
	if len(rows) > limit {
		rows = rows[:limit]
		return rows, rows[limit-1].JobID, nil
	}
	return rows, "", nil
}

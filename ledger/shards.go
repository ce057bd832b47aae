package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
)

// Shards is a ledger spread over several SQL servers (docs/design.md §7.1,
// "Ledger shards"), the home shard first: the reads that an operator's
// listings, the job browser and the metrics make, each merged or summed
// over every shard. Over one shard each is that shard's own read. The
// writes of a job go to its shard through the queue (the engine's router),
// not through Shards.
type Shards struct {
	all []*Ledger
}

// NewShards is the ledger over home (shard 0) and the further shards, in
// their configured order: the order is the mapping of partitions to
// shards, so it must be the same in every process.
func NewShards(home *Ledger, further ...*Ledger) (*Shards, error) {
	all := append([]*Ledger{home}, further...)
	for i, l := range all {
		if l == nil {
			return nil, fmt.Errorf("ledger: shard %d: nil", i)
		}
	}
	return &Shards{all: all}, nil
}

// Home is shard 0: the one that keeps what is not a job's (the topics'
// layouts and pause states, and the program's own tables).
func (s *Shards) Home() *Ledger { return s.all[0] }

// All is every shard, home first. The caller must not change the slice.
func (s *Shards) All() []*Ledger { return s.all }

// Len is how many shards there are.
func (s *Shards) Len() int { return len(s.all) }

// List is ListShards over the shards.
func (s *Shards) List(ctx context.Context, f ListFilter) (Page, error) {
	return ListShards(ctx, s.all, f)
}

// History is HistoryShards over the shards.
func (s *Shards) History(ctx context.Context, f HistoryFilter) ([]HistoryRow, string, error) {
	return HistoryShards(ctx, s.all, f)
}

// ListSummaries is Ledger.ListSummaries merged as List: the cursor carries
// the shard of the page's last row.
func (s *Shards) ListSummaries(ctx context.Context, f ListFilter) ([]Summary, *Cursor, error) {
	return listSummariesShards(ctx, s.all, f)
}

// StaleCursor is where a page of stale rows over shards ended: a shard and
// a row id on it (Ledger.Stale's afterID).
type StaleCursor struct {
	Shard int
	ID    int64
}

// Stale is Ledger.Stale over the shards, in (shard, id) order: shard
// after.Shard from after.ID on, then each later shard from its start. Each
// row's Shard says where it lives; a page of fewer than limit rows is the
// last.
func (s *Shards) Stale(ctx context.Context, olderThan int64, after StaleCursor, limit int) ([]Entry, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	if after.Shard < 0 || after.Shard >= len(s.all) {
		return nil, fmt.Errorf("ledger: stale rows after shard %d: there are %d (0 to %d)", after.Shard, len(s.all), len(s.all)-1)
	}
	var out []Entry
	for i := after.Shard; i < len(s.all) && len(out) < limit; i++ {
		from := int64(0)
		if i == after.Shard {
			from = after.ID
		}
		rows, err := s.all[i].Stale(ctx, olderThan, from, limit-len(out))
		if err != nil {
			return nil, fmt.Errorf("shard %d: %w", i, err)
		}
		for k := range rows {
			rows[k].Shard = i
		}
		out = append(out, rows...)
	}
	return out, nil
}

// Row is the row of one job on whichever shard holds it (the latest
// updated, should more than one hold the id: an id is unique within a
// partition), or an error wrapping ErrNotFound. A shard that fails does
// not hide a row another shard has; with none found, its error is the
// answer (the row may be on it).
func (s *Shards) Row(ctx context.Context, topic, id string) (Entry, error) {
	if len(s.all) == 1 {
		return s.all[0].Row(ctx, topic, id)
	}
	var found *Entry
	var errs []error
	for i, l := range s.all {
		e, err := l.Row(ctx, topic, id)
		switch {
		case errors.Is(err, ErrNotFound):
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("shard %d: %w", i, err))
			continue
		}
		e.Shard = i
		if found == nil || e.UpdatedAt > found.UpdatedAt {
			found = &e
		}
	}
	switch {
	case found != nil:
		return *found, nil
	case len(errs) > 0:
		return Entry{}, errors.Join(errs...)
	}
	return Entry{}, fmt.Errorf("ledger: row %s/%s: %w", topic, id, ErrNotFound)
}

// RowsOf is Ledger.RowsOf over the shards: a partition's rows are on one
// shard, so the shards' answers do not overlap.
func (s *Shards) RowsOf(ctx context.Context, topic string, ids []string) (map[string]Summary, error) {
	if len(s.all) == 1 {
		return s.all[0].RowsOf(ctx, topic, ids)
	}
	out := make(map[string]Summary, len(ids))
	for i, l := range s.all {
		rows, err := l.RowsOf(ctx, topic, ids)
		if err != nil {
			return nil, fmt.Errorf("shard %d: %w", i, err)
		}
		for id, r := range rows {
			r.Shard = i
			out[id] = r
		}
	}
	return out, nil
}

// ByPrefix is Ledger.ByPrefix merged over the shards in (job id, shard,
// row id) order. A page that ends on an id takes every shard's rows of it,
// as one shard's page takes every partition's.
func (s *Shards) ByPrefix(ctx context.Context, topic, prefix, after string, limit int) ([]Summary, string, error) {
	if len(s.all) == 1 {
		return s.all[0].ByPrefix(ctx, topic, prefix, after, limit)
	}
	var rows []Summary
	more := false
	for i, l := range s.all {
		page, next, err := l.ByPrefix(ctx, topic, prefix, after, limit)
		if err != nil {
			return nil, "", fmt.Errorf("shard %d: %w", i, err)
		}
		for k := range page {
			page[k].Shard = i
		}
		rows = append(rows, page...)
		more = more || next != ""
	}
	slices.SortFunc(rows, func(a, b Summary) int {
		return cmp.Or(cmp.Compare(a.JobID, b.JobID), cmp.Compare(a.Shard, b.Shard), cmp.Compare(a.ID, b.ID))
	})
	if len(rows) <= limit && !more {
		return rows, "", nil
	}
	// Each shard gave its first limit ids at most (and every row of its
	// last), so the merge's first limit rows and every row of the limit-th's
	// id are all there are up to that id.
	end := min(len(rows), limit)
	last := rows[end-1].JobID
	for end < len(rows) && rows[end].JobID == last {
		end++
	}
	if end == len(rows) && !more {
		return rows, "", nil
	}
	return rows[:end], last, nil
}

// Count is how many rows the shards hold together.
func (s *Shards) Count(ctx context.Context) (int64, error) {
	return s.sum(func(l *Ledger) (int64, error) { return l.Count(ctx) })
}

// CountStale is Ledger.CountStale summed over the shards.
func (s *Shards) CountStale(ctx context.Context, olderThan int64) (int64, error) {
	return s.sum(func(l *Ledger) (int64, error) { return l.CountStale(ctx, olderThan) })
}

func (s *Shards) sum(count func(*Ledger) (int64, error)) (int64, error) {
	var n int64
	for i, l := range s.all {
		c, err := count(l)
		if err != nil {
			return 0, fmt.Errorf("shard %d: %w", i, err)
		}
		n += c
	}
	return n, nil
}

// ScheduledCounts is Ledger.ScheduledCounts summed per topic over the
// shards.
func (s *Shards) ScheduledCounts(ctx context.Context, beyond int64) (map[string]ScheduledCount, error) {
	if len(s.all) == 1 {
		return s.all[0].ScheduledCounts(ctx, beyond)
	}
	out := make(map[string]ScheduledCount)
	for i, l := range s.all {
		m, err := l.ScheduledCounts(ctx, beyond)
		if err != nil {
			return nil, fmt.Errorf("shard %d: %w", i, err)
		}
		for topic, c := range m {
			t := out[topic]
			t.Total += c.Total
			t.Beyond += c.Beyond
			out[topic] = t
		}
	}
	return out, nil
}

// Ping checks every shard's database; the error names the first that
// does not answer.
func (s *Shards) Ping(ctx context.Context) error {
	for i, l := range s.all {
		if err := l.Ping(ctx); err != nil {
			return fmt.Errorf("ledger shard %d: %w", i, err)
		}
	}
	return nil
}

// Migrate applies the missing migrations on every shard.
func (s *Shards) Migrate(ctx context.Context) error {
	for i, l := range s.all {
		if err := l.Migrate(ctx); err != nil {
			return fmt.Errorf("ledger shard %d: %w", i, err)
		}
	}
	return nil
}

// MarkPurged is Ledger.MarkPurged on every shard (a topic's partitions
// are on several): the rows it changed in all.
func (s *Shards) MarkPurged(ctx context.Context, topic string, before int64) (int64, error) {
	return s.sum(func(l *Ledger) (int64, error) { return l.MarkPurged(ctx, topic, before) })
}

// MarkPurgedID is Ledger.MarkPurgedID on every shard.
func (s *Shards) MarkPurgedID(ctx context.Context, topic, id string) (int64, error) {
	return s.sum(func(l *Ledger) (int64, error) { return l.MarkPurgedID(ctx, topic, id) })
}

// MigrationStatus is the status of the least migrated shard (the first of
// the lowest version, the home shard when all are alike): what still has
// to be run somewhere.
func (s *Shards) MigrationStatus(ctx context.Context) (SchemaStatus, error) {
	var least SchemaStatus
	for i, l := range s.all {
		st, err := l.MigrationStatus(ctx)
		if err != nil {
			return SchemaStatus{}, fmt.Errorf("ledger shard %d: %w", i, err)
		}
		if i == 0 || len(st.Pending()) > len(least.Pending()) {
			least = st
		}
	}
	return least, nil
}

// WriteStats is Ledger.WriteStats summed over the shards.
func (s *Shards) WriteStats() WriteStats {
	var out WriteStats
	for _, l := range s.all {
		w := l.WriteStats()
		out.Commits += w.Commits
		out.Writes += w.Writes
		out.Deadlocks += w.Deadlocks
		out.NotReady += w.NotReady
	}
	return out
}

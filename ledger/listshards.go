package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
)

// ListShards is List over the shards of a ledger spread over several SQL
// servers (docs/design.md §7.1, "Ledger shards"), shard 0 first. Each
// shard reads a page from the cursor on, and the pages merge in one order
// over all: (run_at, id, shard) with a State, (id, shard) without, ids
// being each shard's own. Each row's Shard says where it lives, and the
// next cursor carries the shard of the page's last row, so that a shard
// past it resumes at the cursor's (run_at, id) itself and one before or
// at it after: every row that stays in the filter is returned once, as
// List does on one. A page reads up to Limit+1 rows of each shard. One
// shard is List.
func ListShards(ctx context.Context, shards []*Ledger, f ListFilter) (Page, error) {
	if len(shards) == 1 {
		if err := checkCursorShard(f.After, 1); err != nil {
			return Page{}, err
		}
		return shards[0].List(ctx, f)
	}
	rows, next, err := mergeList(shards, f, func(i int, at bool) ([]Entry, bool, error) {
		p, err := shards[i].list(ctx, f, at)
		return p.Rows, p.Next != nil, err
	}, func(e *Entry) *Entry { return e })
	return Page{Rows: rows, Next: next}, err
}

// listSummariesShards is ListSummaries over shards, merged as ListShards.
func listSummariesShards(ctx context.Context, shards []*Ledger, f ListFilter) ([]Summary, *Cursor, error) {
	if len(shards) == 1 {
		if err := checkCursorShard(f.After, 1); err != nil {
			return nil, nil, err
		}
		return shards[0].ListSummaries(ctx, f)
	}
	return mergeList(shards, f, func(i int, at bool) ([]Summary, bool, error) {
		return shards[i].listSummaries(ctx, f, at)
	}, func(s *Summary) *Entry { return &s.Entry })
}

// mergeList reads a page of each shard (read: shard i's, with at set when
// the rows at the cursor itself belong on it) and merges them in
// ListShards' order.
func mergeList[T any](shards []*Ledger, f ListFilter, read func(i int, at bool) ([]T, bool, error), entry func(*T) *Entry) ([]T, *Cursor, error) {
	if len(shards) == 0 {
		return nil, nil, errors.New("ledger: list: no shard")
	}
	if err := checkLimit(f.Limit); err != nil {
		return nil, nil, err
	}
	if err := checkCursorShard(f.After, len(shards)); err != nil {
		return nil, nil, err
	}
	byDue := f.State != ""
	var rows []T
	more := false
	for i := range shards {
		page, next, err := read(i, f.After != nil && i > f.After.Shard)
		if err != nil {
			return nil, nil, fmt.Errorf("shard %d: %w", i, err)
		}
		for k := range page {
			entry(&page[k]).Shard = i
		}
		rows = append(rows, page...)
		more = more || next
	}
	slices.SortFunc(rows, func(x, y T) int {
		a, b := entry(&x), entry(&y)
		if byDue {
			if c := cmp.Compare(a.RunAt, b.RunAt); c != 0 {
				return c
			}
		}
		return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Shard, b.Shard))
	})
	if len(rows) <= f.Limit && !more {
		return rows, nil, nil
	}
	// Each shard gave its first Limit rows at most, so any row a shard did
	// not give sorts after the Limit-th of the merge.
	end := min(len(rows), f.Limit)
	last := entry(&rows[end-1])
	return rows[:end], &Cursor{RunAt: last.RunAt, ID: last.ID, Shard: last.Shard}, nil
}

// checkCursorShard refuses a cursor of a shard the ledger does not have
// (one of another shard list, or made up): an error wrapping ErrBadCursor.
func checkCursorShard(c *Cursor, n int) error {
	if c != nil && (c.Shard < 0 || c.Shard >= n) {
		return fmt.Errorf("%w: it names shard %d, and the ledger's shards are 0 to %d", ErrBadCursor, c.Shard, n-1)
	}
	return nil
}

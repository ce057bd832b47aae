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
	switch len(shards) {
	case 0:
		return Page{}, errors.New("ledger: list: no shard")
	case 1:
		return shards[0].List(ctx, f)
	}
	if err := checkLimit(f.Limit); err != nil {
		return Page{}, err
	}
	if c := f.After; c != nil && (c.Shard < 0 || c.Shard >= len(shards)) {
		return Page{}, fmt.Errorf("ledger: cursor of shard %d: there are %d", c.Shard, len(shards))
	}
	byDue := f.State != ""
	var rows []Entry
	more := false
	for i, l := range shards {
		p, err := l.list(ctx, f, f.After != nil && i > f.After.Shard)
		if err != nil {
			return Page{}, fmt.Errorf("shard %d: %w", i, err)
		}
		for k := range p.Rows {
			p.Rows[k].Shard = i
		}
		rows = append(rows, p.Rows...)
		more = more || p.Next != nil
	}
	slices.SortFunc(rows, func(a, b Entry) int {
		if byDue {
			if c := cmp.Compare(a.RunAt, b.RunAt); c != 0 {
				return c
			}
		}
		return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Shard, b.Shard))
	})
	out := Page{Rows: rows}
	if len(rows) > f.Limit || more {
		// Each shard gave its first Limit rows at most, so any row a
		// shard did not give sorts after the Limit-th of the merge.
		end := min(len(rows), f.Limit)
		out.Rows = rows[:end]
		last := out.Rows[end-1]
		out.Next = &Cursor{RunAt: last.RunAt, ID: last.ID, Shard: last.Shard}
	}
	return out, nil
}

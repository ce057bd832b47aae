package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// HistoryShards is History over the shards of a ledger spread over
// several SQL servers (docs/design.md §7.1, "Ledger shards"), shard 0
// first: each shard reads a page from the cursor on and the pages merge in
// History's order with the shard as the last key (newest first by
// finished_at, id and shard; one id's rows by id and shard, newest
// first; a prefix's by job_id, id and shard), ids being each shard's own.
// The next cursor is History's with the shard of the page's last row in
// front, "<shard>~…", so that every row that stays in the filter is
// returned once. One shard is History.
func HistoryShards(ctx context.Context, shards []*Ledger, f HistoryFilter) ([]HistoryRow, string, error) {
	switch len(shards) {
	case 0:
		return nil, "", errors.New("ledger: history: no shard")
	case 1:
		return shards[0].History(ctx, f)
	}
	mode := "t"
	switch {
	case f.ID != "":
		mode = "e"
	case f.Prefix != "":
		mode = "i"
	}
	after := -1 // the cursor's shard
	if f.After != "" {
		s, rest, ok := strings.Cut(f.After, "~")
		n, err := strconv.Atoi(s)
		if !ok || rest == "" || err != nil || n < 0 || n >= len(shards) || strconv.Itoa(n) != s {
			return nil, "", ErrBadCursor
		}
		after, f.After = n, rest
	}
	type row struct {
		HistoryRow
		shard int
	}
	var rows []row
	more := false
	for i, l := range shards {
		// Past the cursor's shard in the merge order a row at the cursor's
		// own keys comes after it: ascending (by prefix) for a higher
		// shard, descending (the others) for a lower one.
		at := after >= 0 && (mode == "i" && i > after || mode != "i" && i < after)
		page, next, err := l.history(ctx, f, at)
		if err != nil {
			return nil, "", fmt.Errorf("shard %d: %w", i, err)
		}
		more = more || next != ""
		for _, r := range page {
			rows = append(rows, row{r, i})
		}
	}
	slices.SortFunc(rows, func(a, b row) int {
		switch mode {
		case "i":
			return cmp.Or(strings.Compare(a.JobID, b.JobID), cmp.Compare(a.ID, b.ID), cmp.Compare(a.shard, b.shard))
		case "e":
			return cmp.Or(cmp.Compare(b.ID, a.ID), cmp.Compare(b.shard, a.shard))
		default:
			return cmp.Or(cmp.Compare(b.FinishedAt, a.FinishedAt), cmp.Compare(b.ID, a.ID), cmp.Compare(b.shard, a.shard))
		}
	})
	// Each shard gave its first Limit rows at most, so any row a shard
	// did not give sorts after the Limit-th of the merge.
	end := min(len(rows), f.Limit)
	out := make([]HistoryRow, 0, end)
	for _, r := range rows[:end] {
		out = append(out, r.HistoryRow)
	}
	if len(rows) <= f.Limit && !more {
		return out, "", nil
	}
	last := rows[end-1]
	return out, strconv.Itoa(last.shard) + "~" + historyCursor(mode, last.HistoryRow), nil
}

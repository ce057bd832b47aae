package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/delayq/delayq/internal/testenv"
)

// threeShards is a ledger of three SQLite shards; shard i holds the jobs
// "s<i>-0" to "s<i>-<3+i>" of topic t, and shards 0 and 2 both hold "dup"
// (an id is unique within a partition, and the partitions are on several
// shards).
func threeShards(t *testing.T) *Shards {
	t.Helper()
	var ls []*Ledger
	for i := range 3 {
		l, _ := newLedger(t, testenv.SQLite(t), Options{})
		js := jobs("t", fmt.Sprintf("s%d-", i), 4+i)
		if i != 1 {
			js = append(js, job("t", "dup", 1))
		}
		mustRecord(t, l, "w1", js...)
		ls = append(ls, l)
	}
	s, err := NewShards(ls[0], ls[1:]...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The reads of Shards cover every shard: counts summed, a stale scan and
// an id-prefix search paged through every row once in their orders
// (stale by shard then id, the prefix by id, a page that ends on "dup"
// taking both shards' rows of it), and the rows of a page of ids found
// wherever they are.
func TestShardsMergeTheirReads(t *testing.T) {
	ctx := context.Background()
	s := threeShards(t)
	const total = 4 + 5 + 6 + 2
	if n, err := s.Count(ctx); err != nil || n != total {
		t.Errorf("Count = %d, %v; want %d", n, err, total)
	}
	if n, err := s.CountStale(ctx, 1<<62); err != nil || n != total {
		t.Errorf("CountStale = %d, %v; want %d", n, err, total)
	}

	for _, limit := range []int{1, 2, 5, 100} {
		var got []Entry
		after := StaleCursor{}
		for pages := 0; ; pages++ {
			if pages > total+1 {
				t.Fatalf("stale, limit %d: paging does not end", limit)
			}
			rows, err := s.Stale(ctx, 1<<62, after, limit)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, rows...)
			if len(rows) < limit {
				break
			}
			after = StaleCursor{Shard: rows[len(rows)-1].Shard, ID: rows[len(rows)-1].ID}
		}
		if len(got) != total {
			t.Errorf("stale, limit %d: %d rows, want %d", limit, len(got), total)
		}
		for k := 1; k < len(got); k++ {
			a, b := got[k-1], got[k]
			if a.Shard > b.Shard || a.Shard == b.Shard && a.ID >= b.ID {
				t.Errorf("stale, limit %d: (shard %d, id %d) before (shard %d, id %d)", limit, a.Shard, a.ID, b.Shard, b.ID)
			}
		}
		for _, r := range got {
			if r.JobID != "dup" && !strings.HasPrefix(r.JobID, fmt.Sprintf("s%d-", r.Shard)) {
				t.Errorf("%s says shard %d", r.JobID, r.Shard)
			}
		}
	}
	if _, err := s.Stale(ctx, 1<<62, StaleCursor{Shard: 3}, 10); err == nil {
		t.Error("Stale after shard 3 of 3: no error")
	}

	if _, _, err := s.ByPrefix(ctx, "t", "", "", 10); err == nil {
		t.Error("ByPrefix with an empty prefix: no error")
	}
	for _, limit := range []int{1, 2, 100} {
		rows, next, err := s.ByPrefix(ctx, "t", "dup", "", limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2 || rows[0].Shard != 0 || rows[1].Shard != 2 || next != "" {
			t.Errorf("prefix dup, limit %d: %d rows (next %q), want both shards' on one page, the last", limit, len(rows), next)
		}
	}
	for _, limit := range []int{1, 2, 3, 100} {
		var got []Summary
		after := ""
		for pages := 0; ; pages++ {
			if pages > total+1 {
				t.Fatalf("prefix s, limit %d: paging does not end", limit)
			}
			rows, next, err := s.ByPrefix(ctx, "t", "s", after, limit)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, rows...)
			if next == "" {
				break
			}
			after = next
		}
		if len(got) != total-2 {
			t.Errorf("prefix s, limit %d: %d rows, want %d", limit, len(got), total-2)
		}
		for k := 1; k < len(got); k++ {
			if got[k-1].JobID >= got[k].JobID {
				t.Errorf("prefix s, limit %d: %s before %s", limit, got[k-1].JobID, got[k].JobID)
			}
		}
	}

	rows, err := s.RowsOf(ctx, "t", []string{"s0-1", "s1-4", "s2-5", "nope"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows["s1-4"].Shard != 1 || rows["s2-5"].Shard != 2 {
		t.Errorf("RowsOf: %v", rows)
	}
	if e, err := s.Row(ctx, "t", "s2-3"); err != nil || e.Shard != 2 {
		t.Errorf("Row s2-3: shard %d, %v; want shard 2", e.Shard, err)
	}
	if _, err := s.Row(ctx, "t", "nope"); err == nil || !strings.Contains(err.Error(), ErrNotFound.Error()) {
		t.Errorf("Row of no job: %v, want not found", err)
	}
	for _, shards := range []int{1, 3} {
		if _, err := ListShards(ctx, s.All()[:shards], ListFilter{Limit: 5, After: &Cursor{ID: 1, Shard: shards}}); !errors.Is(err, ErrBadCursor) {
			t.Errorf("%d shards, a cursor of shard %d: %v, want ErrBadCursor", shards, shards, err)
		}
	}

	// Shard 1 down: the rows of the others are still found; its own are
	// its error, not "not found".
	sqlDB, err := s.All()[1].DB().DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.Close()
	if e, err := s.Row(ctx, "t", "s2-3"); err != nil || e.Shard != 2 {
		t.Errorf("shard 1 down, Row s2-3: shard %d, %v; want shard 2", e.Shard, err)
	}
	if _, err := s.Row(ctx, "t", "s1-0"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("shard 1 down, Row s1-0: %v, want its shard's error", err)
	}
}

// Check marks each shard with its place and the list's length at the
// first start, and from then on refuses a list in another order, of
// another length or with a shard of another ledger; a shard whose schema
// has no mark table yet is reported apart.
func TestShardsCheckRefusesAnotherList(t *testing.T) {
	ctx := context.Background()
	var ls []*Ledger
	for range 4 {
		l, _ := newLedger(t, testenv.SQLite(t), Options{})
		ls = append(ls, l)
	}
	check := func(home *Ledger, further ...*Ledger) error {
		t.Helper()
		s, err := NewShards(home, further...)
		if err != nil {
			t.Fatal(err)
		}
		return s.Check(ctx)
	}
	for range 2 { // the first start marks, the second finds its marks
		if err := check(ls[0], ls[1], ls[2]); err != nil {
			t.Fatalf("the list as marked: %v", err)
		}
	}
	for name, err := range map[string]error{
		"swapped":        check(ls[0], ls[2], ls[1]),
		"one fewer":      check(ls[0], ls[1]),
		"one more":       check(ls[0], ls[1], ls[2], ls[3]),
		"another home":   check(ls[3], ls[1], ls[2]),
		"a shard first":  check(ls[1], ls[0], ls[2]),
		"one shard only": check(ls[0]),
	} {
		if !errors.Is(err, ErrShardMismatch) {
			t.Errorf("%s: %v, want ErrShardMismatch", name, err)
		}
	}
	if err := ls[2].DB().Migrator().DropTable("dq_shard_mark"); err != nil {
		t.Fatal(err)
	}
	if err := check(ls[0], ls[1], ls[2]); !errors.Is(err, ErrShardUnmarked) || !strings.Contains(err.Error(), "shard 2") {
		t.Errorf("shard 2 without its mark table: %v, want ErrShardUnmarked naming it", err)
	}
}

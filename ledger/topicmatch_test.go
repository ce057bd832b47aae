package ledger

import (
	"context"
	"maps"
	"math"
	"slices"
	"testing"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/queue"
)

// A topic's listings take its partitions' rows (their topic column holds
// the partition's name) and nothing else: not a topic whose name a LIKE
// pattern would match ("_" is LIKE's wildcard, and SQLite's LIKE ignores
// case), not a longer name. A partition's name lists its own rows only. History shows the
// topic's name with the partition beside it.
func TestListingsTakeAPartitionedTopicsRows(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		p0, p1 := dataplane.PartitionName("a_b", 2, 0), dataplane.PartitionName("a_b", 2, 1)
		topics := map[string]string{ // job id -> stored topic
			"j0": "a_b", "j1": p0, "j2": p1,
			"x0": "aXb", "x1": dataplane.PartitionName("aXb", 2, 0), "x2": "a_bc", "x3": dataplane.PartitionName("a_bc", 2, 1),
			"x4": dataplane.PartitionName("A_b", 2, 0), // SQLite's LIKE would take it
		}
		base := fixedNow.UnixMilli()
		var rows []Entry
		var hist []HistoryRow
		var dead []DeadLetter
		for id, topic := range topics {
			rows = append(rows, Entry{Topic: topic, JobID: id, Payload: []byte{}, MaxAttempts: 5, RunAt: base,
				State: queue.StateWaiting, UpdatedAt: base})
			hist = append(hist, HistoryRow{Topic: topic, JobID: id, Outcome: OutcomeDead, FinishedAt: base})
			dead = append(dead, DeadLetter{Topic: topic, JobID: id, Payload: []byte{}, DiedAt: base})
		}
		insertRows(t, l, rows)
		for _, ins := range []struct {
			table string
			rows  any
		}{{l.historyTable, &hist}, {l.deadTable, &dead}} {
			if err := l.conn(ctx).Table(ins.table).Create(ins.rows).Error; err != nil {
				t.Fatal(err)
			}
		}
		want := []string{"j0", "j1", "j2"}
		check := func(what string, ids []string) {
			t.Helper()
			slices.Sort(ids)
			if !slices.Equal(ids, want) {
				t.Errorf("%s: %v, want %v", what, ids, want)
			}
		}
		ids := func(es []Entry) (out []string) {
			for _, e := range es {
				out = append(out, e.JobID)
			}
			return out
		}
		sums := func(ss []Summary) (out []string) {
			for _, s := range ss {
				out = append(out, s.JobID)
			}
			return out
		}

		page, err := l.List(ctx, ListFilter{Topic: "a_b", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		check("List", ids(page.Rows))
		ss, _, err := l.ListSummaries(ctx, ListFilter{Topic: "a_b", State: queue.StateWaiting, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		check("ListSummaries", sums(ss))
		ss, _, err = l.ByPrefix(ctx, "a_b", "j", "", 100)
		if err != nil {
			t.Fatal(err)
		}
		check("ByPrefix", sums(ss))
		// RowsOf is exact: the job browser asks it per partition.
		byID, err := l.RowsOf(ctx, p1, []string{"j0", "j1", "j2", "x0", "x1", "x2", "x3", "x4"})
		if err != nil || len(byID) != 1 || byID["j2"].Topic != p1 {
			t.Errorf("RowsOf(%s): %v (%v), want j2 alone", p1, slices.Collect(maps.Keys(byID)), err)
		}
		inflight, err := l.InFlight(ctx, "a_b", 100)
		if err != nil {
			t.Fatal(err)
		}
		check("InFlight", ids(inflight))
		letters, err := l.DeadLetters(ctx, "a_b", 0, math.MaxInt64, 100)
		if err != nil {
			t.Fatal(err)
		}
		var dl []string
		for _, d := range letters {
			dl = append(dl, d.JobID)
		}
		check("DeadLetters", dl)
		if e, err := l.Row(ctx, "a_b", "j2"); err != nil || e.Topic != p1 {
			t.Errorf("Row(a_b, j2): %+v %v, want the row of %s", e, err, p1)
		}
		if _, err := l.Row(ctx, "a_b", "x1"); err == nil {
			t.Error("Row(a_b, x1) found another topic's partition's row")
		}
		if own, err := l.InFlight(ctx, p0, 100); err != nil || len(own) != 1 || own[0].JobID != "j1" {
			t.Errorf("InFlight(%s): %v %v, want j1 alone", p0, ids(own), err)
		}

		h, _, err := l.History(ctx, HistoryFilter{Topic: "a_b", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var hs []string
		for _, r := range h {
			hs = append(hs, r.JobID)
			wantPart := map[string]string{"j0": "", "j1": p0, "j2": p1}[r.JobID]
			if r.Topic != "a_b" || r.Partition != wantPart {
				t.Errorf("history row %s: topic %q partition %q, want a_b and %q", r.JobID, r.Topic, r.Partition, wantPart)
			}
		}
		check("History", hs)
		if n, err := l.MarkPurged(ctx, "a_b", base); err != nil || n != 3 {
			t.Errorf("MarkPurged(a_b): %d rows, %v; want 3", n, err)
		}
		if n, err := l.MarkPurgedID(ctx, "aXb", "x1"); err != nil || n != 1 {
			t.Errorf("MarkPurgedID(aXb, x1): %d rows, %v; want 1", n, err)
		}
	})
}

// ByPrefix pages through every row of a topic whose id has the prefix,
// also when one id is in several partitions (no page splits it) and when
// an id equals the prefix (the next page goes on after it).
func TestByPrefixPagesOverPartitions(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		p0, p1 := dataplane.PartitionName("t", 2, 0), dataplane.PartitionName("t", 2, 1)
		base := fixedNow.UnixMilli()
		var rows []Entry
		for _, r := range [][2]string{{"t", "o"}, {"t", "o:1"}, {p0, "o:1"}, {p1, "o:1"}, {p0, "o:2"}, {p1, "o:3"}, {"t", "p:1"}} {
			rows = append(rows, Entry{Topic: r[0], JobID: r[1], Payload: []byte{}, MaxAttempts: 1, RunAt: base,
				State: queue.StateWaiting, UpdatedAt: base})
		}
		insertRows(t, l, rows)
		for _, limit := range []int{1, 2, 3, 100} {
			var got []string
			after := ""
			for page := 0; ; page++ {
				if page > 10 {
					t.Fatalf("limit %d: still paging after %d pages: %v", limit, page, got)
				}
				ss, next, err := l.ByPrefix(ctx, "t", "o", after, limit)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range ss {
					got = append(got, s.Topic+"/"+s.JobID)
				}
				if next == "" {
					break
				}
				after = next
			}
			want := []string{"t/o", "t/o:1", p0 + "/o:1", p1 + "/o:1", p0 + "/o:2", p1 + "/o:3"}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("limit %d: %v, want %v", limit, got, want)
			}
		}
	})
}

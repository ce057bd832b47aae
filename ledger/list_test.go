package ledger

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// insertRows writes ledger rows as they are, states included (Record only
// writes in_progress rows), and returns them with their ids.
func insertRows(t testing.TB, l *Ledger, rows []Entry) []Entry {
	t.Helper()
	if err := l.conn(context.Background()).Table(l.ledgerTable).CreateInBatches(&rows, len(rows)).Error; err != nil {
		t.Fatalf("insert rows: %v", err)
	}
	return rows
}

// listRows makes n rows over two topics and the three states, with run_at
// values that repeat (so the id breaks ties) and ids that do not follow
// run_at.
func listRows(n int) []Entry {
	states := []queue.State{queue.StateWaiting, queue.StateInFlight, queue.StateRetrying}
	base := fixedNow.UnixMilli()
	out := make([]Entry, n)
	for i := range out {
		out[i] = Entry{
			Topic: fmt.Sprintf("t%d", i%2), JobID: fmt.Sprintf("j%02d", i), Payload: []byte{},
			Attempt: i % 3, MaxAttempts: 5, RunAt: base + int64((i*7)%10)*1000,
			ClaimedAt: base, LeaseUntil: base + 30_000, Worker: "h:1", State: states[(i/2)%3],
			UpdatedAt: base,
		}
	}
	return out
}

// TestList pages through every combination of filters and page sizes and
// checks the rows against the filter and order computed here: each
// matching row once, in the documented order, pages no larger than the
// limit, and a next cursor exactly when rows remain.
func TestList(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		all := insertRows(t, l, listRows(40))
		base := fixedNow.UnixMilli()

		for _, state := range []queue.State{"", queue.StateWaiting, queue.StateInFlight, queue.StateRetrying} {
			for _, topic := range []string{"", "t1", "none"} {
				for _, bounds := range [][2]int64{{0, 0}, {base + 2000, 0}, {0, base + 6000}, {base + 1000, base + 8000}} {
					var want []Entry
					for _, e := range all {
						if (state == "" || e.State == state) && (topic == "" || e.Topic == topic) &&
							(bounds[0] == 0 || e.RunAt > bounds[0]) && (bounds[1] == 0 || e.RunAt < bounds[1]) {
							want = append(want, e)
						}
					}
					if state != "" {
						slices.SortStableFunc(want, func(a, b Entry) int {
							if a.RunAt != b.RunAt {
								return int(a.RunAt - b.RunAt)
							}
							return int(a.ID - b.ID)
						})
					}
					for _, limit := range []int{1, 3, 100} {
						f := ListFilter{State: state, Topic: topic, DueAfter: bounds[0], DueBefore: bounds[1], Limit: limit}
						name := fmt.Sprintf("%+v", f)
						var got []Entry
						for pages := 0; ; pages++ {
							if pages > len(all) {
								t.Fatalf("%s: more pages than rows", name)
							}
							p, err := l.List(ctx, f)
							if err != nil {
								t.Fatalf("%s: %v", name, err)
							}
							if len(p.Rows) > limit {
								t.Fatalf("%s: page of %d rows", name, len(p.Rows))
							}
							got = append(got, p.Rows...)
							if p.Next == nil {
								break
							}
							last := p.Rows[len(p.Rows)-1]
							if *p.Next != (Cursor{RunAt: last.RunAt, ID: last.ID}) {
								t.Fatalf("%s: next %+v, last row %+v", name, *p.Next, last)
							}
							c, err := ParseCursor(p.Next.String())
							if err != nil || c != *p.Next {
								t.Fatalf("%s: cursor %q parses as %+v, %v", name, p.Next.String(), c, err)
							}
							f.After = &c
						}
						if fmt.Sprint(keys(got)) != fmt.Sprint(keys(want)) {
							t.Errorf("%s:\n got %v\nwant %v", name, keys(got), keys(want))
						}
					}
				}
			}
		}

		// Rows added between pages: one behind the cursor is not listed, one
		// ahead of it is; one deleted ahead of it is gone.
		p, err := l.List(ctx, ListFilter{State: queue.StateWaiting, Limit: 2})
		if err != nil || p.Next == nil {
			t.Fatalf("first page %+v, %v", p, err)
		}
		late := listRows(2)
		late[0].JobID, late[0].State, late[0].RunAt = "behind", queue.StateWaiting, base-1
		late[1].JobID, late[1].State, late[1].RunAt = "ahead", queue.StateWaiting, base+9999
		insertRows(t, l, late)
		var rest []Entry
		for f := (ListFilter{State: queue.StateWaiting, Limit: 2, After: p.Next}); ; {
			p, err := l.List(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			rest = append(rest, p.Rows...)
			if p.Next == nil {
				break
			}
			f.After = p.Next
		}
		got := strings.Join(keys(rest), " ")
		if strings.Contains(got, "behind") || !strings.HasSuffix(got, "ahead") {
			t.Errorf("after the first page: %s", got)
		}

		if _, err := l.List(ctx, ListFilter{State: "stuck", Limit: 1}); err == nil || !strings.Contains(err.Error(), `"stuck"`) {
			t.Errorf("bad state: %v", err)
		}
		if _, err := l.List(ctx, ListFilter{Limit: 0}); err == nil {
			t.Error("limit 0 accepted")
		}
	})
}

func keys(rows []Entry) []string {
	out := make([]string, len(rows))
	for i, e := range rows {
		out[i] = e.Topic + "/" + e.JobID
	}
	return out
}

func TestParseCursor(t *testing.T) {
	for _, c := range []Cursor{{1, 1, 0}, {1_700_000_000_000, 42, 0}, {-5, 9, 0}, {7, 3, 2}} {
		if got, err := ParseCursor(c.String()); err != nil || got != c {
			t.Errorf("ParseCursor(%q) = %+v, %v", c.String(), got, err)
		}
	}
	if c := (Cursor{RunAt: 5, ID: 6}); c.String() != "5_6" {
		t.Errorf("shard 0's cursor %q, want the form of a ledger of one shard", c.String())
	}
	for _, s := range []string{"", "_", "1", "1_", "_1", "1_0", "1_-1", "a_1", "1.5_1", " 1_1", "1_1 ",
		"1_1_0", "1_1_01", "1_1_-1", "1_1_x", "1_1_1_1", "1_1_",
		"+1_1", "1_+1", "01_1", "1_01", "-0_1", "1_1_+2"} {
		if c, err := ParseCursor(s); err == nil {
			t.Errorf("ParseCursor(%q) = %+v, want an error", s, c)
		}
	}
}

// TestListUsesTheStateIndex checks on MariaDB that a listing by state is
// one range scan of the (state, run_at) index, with no sort: the plan the
// List comment promises. The index is made here when the schema does not
// have it yet.
func TestListUsesTheStateIndex(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	l, log := newLedger(t, db, Options{})
	var indexes []struct {
		Name string `gorm:"column:INDEX_NAME"`
		Cols string `gorm:"column:cols"`
	}
	err := db.Raw("SELECT INDEX_NAME, GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX) AS cols"+
		" FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? GROUP BY INDEX_NAME",
		l.LedgerTable()).Scan(&indexes).Error
	if err != nil {
		t.Fatal(err)
	}
	index := ""
	for _, ix := range indexes {
		if strings.HasPrefix(ix.Cols, "state,run_at") {
			index = ix.Name
		}
	}
	if index == "" {
		index = "test_state_run_at"
		if err := db.Exec("CREATE INDEX " + index + " ON " + l.LedgerTable() + " (state, run_at)").Error; err != nil {
			t.Fatal(err)
		}
	}
	// Enough rows, most of them in other states, that a table scan loses.
	rows := listRows(600)
	for i := range rows {
		rows[i].JobID = fmt.Sprintf("j%04d", i)
		if i%10 != 0 {
			rows[i].State = queue.StateWaiting
		} else {
			rows[i].State = queue.StateRetrying
		}
	}
	insertRows(t, l, rows)
	if err := db.Exec("ANALYZE TABLE " + l.LedgerTable()).Error; err != nil {
		t.Fatal(err)
	}

	log.Take()
	p, err := l.List(ctx, ListFilter{State: queue.StateRetrying, DueBefore: fixedNow.UnixMilli() + 5000, Limit: 10,
		After: &Cursor{RunAt: fixedNow.UnixMilli(), ID: 3}})
	if err != nil || len(p.Rows) == 0 {
		t.Fatalf("List: %+v, %v", p, err)
	}
	stmts := log.Take()
	if len(stmts) != 1 {
		t.Fatalf("List ran %d statements: %q", len(stmts), stmts)
	}
	sql := stmts[0]
	var plan []map[string]any
	if err := db.WithContext(ctx).Raw("EXPLAIN " + sql).Scan(&plan).Error; err != nil {
		t.Fatal(err)
	}
	if len(plan) != 1 || fmt.Sprint(plan[0]["key"]) != index || strings.Contains(fmt.Sprint(plan[0]["Extra"]), "filesort") {
		t.Errorf("plan of %s:\n%v\nwant a range scan of %s without filesort", sql, plan, index)
	}
}

// ListShards pages through three shards' rows, whose ids and due times
// collide across shards, in one order: every row once, by (run_at, id,
// shard) with a state and by (id, shard) without, whatever the page size.
func TestListShardsMergesInOneOrder(t *testing.T) {
	ctx := context.Background()
	var shards []*Ledger
	total := 0
	for i := range 3 {
		l, _ := newLedger(t, testenv.SQLite(t), Options{})
		js := jobs("t", fmt.Sprintf("s%d-", i), 4+i)
		for k, j := range js {
			j.RunAt = fixedNow.UnixMilli() - int64(k%3)*1_000 // due times shared across shards
		}
		mustRecord(t, l, "w1", js...)
		shards = append(shards, l)
		total += len(js)
	}
	for _, state := range []queue.State{queue.StateInFlight, ""} {
		for _, limit := range []int{1, 2, 5, 100} {
			f := ListFilter{State: state, Topic: "t", Limit: limit}
			var got []Entry
			for pages := 0; ; pages++ {
				if pages > total+1 {
					t.Fatalf("state %q limit %d: paging does not end", state, limit)
				}
				p, err := ListShards(ctx, shards, f)
				if err != nil {
					t.Fatal(err)
				}
				if len(p.Rows) > limit {
					t.Fatalf("state %q limit %d: a page of %d", state, limit, len(p.Rows))
				}
				got = append(got, p.Rows...)
				if p.Next == nil {
					break
				}
				c, err := ParseCursor(p.Next.String())
				if err != nil {
					t.Fatal(err)
				}
				f.After = &c
			}
			seen := map[string]bool{}
			for k, r := range got {
				if seen[r.JobID] {
					t.Errorf("state %q limit %d: %s twice", state, limit, r.JobID)
				}
				seen[r.JobID] = true
				if want := fmt.Sprintf("s%d-", r.Shard); !strings.HasPrefix(r.JobID, want) {
					t.Errorf("%s says shard %d", r.JobID, r.Shard)
				}
				if k == 0 {
					continue
				}
				a, b := got[k-1], r
				before := a.ID < b.ID || a.ID == b.ID && a.Shard < b.Shard
				if state != "" {
					before = a.RunAt < b.RunAt || a.RunAt == b.RunAt && before
				}
				if !before {
					t.Errorf("state %q limit %d: %s (shard %d) before %s (shard %d): out of order", state, limit, a.JobID, a.Shard, b.JobID, b.Shard)
				}
			}
			if len(seen) != total {
				t.Errorf("state %q limit %d: %d rows, want %d", state, limit, len(seen), total)
			}
		}
	}
}

package ledger

import (
	"context"
	"fmt"
	"testing"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/queue"
)

// TestOneStatementPerBatch counts the SQL statements each call sends for a
// batch of 500 jobs: one, and two (in one transaction) for Bury, never one
// per job. Then it checks each call did its work on all 500 rows.
func TestOneStatementPerBatch(t *testing.T) {
	for _, n := range []int{500, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			eachBackend(t, func(t *testing.T, db *gorm.DB) {
				ctx := context.Background()
				l, log := newLedger(t, db, Options{})
				js := jobs("big", "j", n)
				refs := refsOf(js)
				now := fixedNow.UnixMilli()

				expect := func(op string, want ...string) {
					t.Helper()
					got := verbs(log.Take())
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("%s of %d jobs ran %v, want %v", op, n, got, want)
					}
				}

				mustRecord(t, l, "h:1", js...)
				expect("Record", "INSERT")
				if c := count(t, l); c != int64(n) {
					t.Fatalf("Record: %d rows, want %d", c, n)
				}
				log.Take()

				if err := opsOf(l).Extend(ctx, refs, now+99_000); err != nil {
					t.Fatal(err)
				}
				expect("Extend", "UPDATE")
				if c, _ := l.CountStale(ctx, now+99_000); c != 0 {
					t.Errorf("Extend: %d rows not extended", c)
				}
				log.Take()

				marks := make([]dataplane.RetryRequest, n)
				for i, r := range refs {
					marks[i] = dataplane.RetryRequest{Ref: r, RunAt: now + int64(i), LeaseUntil: now + 100 + int64(i), Error: fmt.Sprint("err ", i)}
				}
				if err := opsOf(l).MarkRetrying(ctx, marks); err != nil {
					t.Fatal(err)
				}
				expect("MarkRetrying", "UPDATE")
				for _, i := range []int{0, n / 2, n - 1} {
					r := mustRow(t, l, "big", js[i].ID)
					if r.State != queue.StateRetrying || r.RunAt != now+int64(i) || r.LeaseUntil != now+100+int64(i) || r.LastError != fmt.Sprint("err ", i) {
						t.Errorf("MarkRetrying: row %d = %+v", i, r)
					}
				}
				log.Take()

				half := n / 2
				if err := opsOf(l).Complete(ctx, refs[:half]); err != nil {
					t.Fatal(err)
				}
				expect("Complete", "INSERT", "DELETE") // the history rows, then the delete
				if h := historyCount(t, l, OutcomeSucceeded); h != int64(half) {
					t.Errorf("Complete: %d history rows, want %d", h, half)
				}
				if c := count(t, l); c != int64(n-half) {
					t.Errorf("Complete: %d rows left, want %d", c, n-half)
				}
				log.Take()

				dead := make([]queue.DeadJob, 0, n-half)
				for _, j := range js[half:] {
					dead = append(dead, queue.DeadJob{Job: j, Error: "dead", DiedAt: now})
				}
				if err := opsOf(l).Bury(ctx, dead); err != nil {
					t.Fatal(err)
				}
				expect("Bury", "INSERT", "INSERT", "DELETE") // dead letters, history, delete
				if h := historyCount(t, l, OutcomeDead); h != int64(n-half) {
					t.Errorf("Bury: %d history rows, want %d", h, n-half)
				}
				if c := count(t, l); c != 0 {
					t.Errorf("Bury: %d rows left", c)
				}
				if dl, err := l.DeadLetters(ctx, "big", now, now+1, n); err != nil || len(dl) != n-half {
					t.Errorf("Bury: %d dead letters (%v), want %d", len(dl), err, n-half)
				}
			})
		})
	}
}

// TestSplitAtPlaceholderLimit lowers the placeholder limit so that batches
// must be split, and checks the split statements cover every job once.
func TestSplitAtPlaceholderLimit(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		// 15 columns per row: 70 placeholders hold 4 rows, so 23 jobs take
		// 6 INSERTs; Complete binds 3 per job and 2 more: 22 per statement,
		// 2 INSERT ... SELECTs into history and 2 DELETEs.
		l, log := newLedger(t, db, Options{MaxPlaceholders: 70})
		js := jobs("t", "j", 23)
		mustRecord(t, l, "h:1", js...)
		if got := verbs(log.Take()); len(got) != 6 {
			t.Errorf("split Record ran %v, want 6 INSERTs", got)
		}
		if c := count(t, l); c != 23 {
			t.Fatalf("split Record wrote %d rows, want 23", c)
		}
		if err := opsOf(l).Complete(ctx, refsOf(js)); err != nil {
			t.Fatal(err)
		}
		if got := verbs(log.Take()); len(got) != 5 { // 2 INSERTs and 2 DELETEs + the Count above
			t.Errorf("split Complete ran %v", got)
		}
		if c := count(t, l); c != 0 {
			t.Fatalf("split Complete left %d rows", c)
		}
		if h := historyCount(t, l, OutcomeSucceeded); h != 23 {
			t.Fatalf("split Complete left %d history rows, want 23", h)
		}
	})
}

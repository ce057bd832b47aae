package ledger

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"gorm.io/gorm"

	"github.com/delayq/delayq/queue"
)

// TestStalePaging pages through the stale rows the way the recoverer does
// and checks every stale row comes back exactly once and no fresh one does,
// even when rows are deleted and added between pages.
func TestStalePaging(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		cutoff := fixedNow.UnixMilli()
		var all []*queue.Job
		wantStale := map[string]bool{}
		for i := 0; i < 61; i++ {
			j := job(fmt.Sprintf("t%d", i%3), fmt.Sprintf("j%d", i), 1)
			switch i % 4 {
			case 0: // fresh
				j.LeaseUntil = cutoff + int64(i)
			case 1: // exactly at the cutoff: not before it, so not stale
				j.LeaseUntil = cutoff
			default:
				j.LeaseUntil = cutoff - 1 - int64(i)*1000
				wantStale[j.Topic+"/"+j.ID] = true
			}
			all = append(all, j)
		}
		// Several Record batches, so ids are not one contiguous run per topic.
		for lo := 0; lo < len(all); lo += 10 {
			mustRecord(t, l, "h:1", all[lo:min(lo+10, len(all))]...)
		}
		if n, err := l.CountStale(ctx, cutoff); err != nil || n != int64(len(wantStale)) {
			t.Fatalf("CountStale = %d, %v; want %d", n, err, len(wantStale))
		}

		seen := map[string]int{}
		var after int64
		pages := 0
		for {
			page, err := l.Stale(ctx, cutoff, after, 7)
			if err != nil {
				t.Fatalf("Stale: %v", err)
			}
			if len(page) > 7 {
				t.Fatalf("page of %d rows, limit 7", len(page))
			}
			if len(page) == 0 {
				break
			}
			pages++
			for _, r := range page {
				if r.ID <= after {
					t.Fatalf("row id %d not after cursor %d", r.ID, after)
				}
				after = r.ID
				seen[r.Topic+"/"+r.JobID]++
			}
			if pages == 2 {
				// Between pages: a stale row is completed, another one is
				// re-claimed (its row rewritten in place, id kept) and a new
				// stale row appears. The rewritten one must not show twice.
				if err := opsOf(l).Complete(ctx, []queue.Ref{{Topic: "t2", ID: "j59", Attempt: 1}}); err != nil {
					t.Fatal(err)
				}
				delete(wantStale, "t2/j59")
				re := job("t2", "j2", 2) // already seen on page 1
				re.LeaseUntil = cutoff - 5
				mustRecord(t, l, "h:2", re)
				late := job("t9", "late", 1)
				late.LeaseUntil = cutoff - 1
				mustRecord(t, l, "h:2", late)
				wantStale["t9/late"] = true
			}
		}
		for k := range wantStale {
			if seen[k] != 1 {
				t.Errorf("stale row %s returned %d times", k, seen[k])
			}
		}
		for k, n := range seen {
			if !wantStale[k] {
				t.Errorf("row %s returned %d times but is not stale", k, n)
			}
		}
		if pages < 5 {
			t.Errorf("only %d pages: paging not exercised", pages)
		}
	})
}

func TestAuditQueries(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		mustRecord(t, l, "hostA:1", job("orders", "o1", 1), job("orders", "o2", 1), job("mail", "m1", 1))
		mustRecord(t, l, "hostB:2", job("orders", "o3", 2), job("mail", "m2", 1))

		ids := func(rows []Entry) (out []string) {
			for _, r := range rows {
				out = append(out, r.Topic+"/"+r.JobID)
			}
			return out
		}
		check := func(what string, rows []Entry, err error, want ...string) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if got := ids(rows); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s = %v, want %v", what, got, want)
			}
		}
		// By id: batch by batch, and within a batch in (topic, id) order,
		// the order Record writes in.
		rows, err := l.InFlight(ctx, "", 100)
		check("InFlight(all)", rows, err, "mail/m1", "orders/o1", "orders/o2", "mail/m2", "orders/o3")
		rows, err = l.InFlight(ctx, "orders", 2)
		check("InFlight(orders, 2)", rows, err, "orders/o1", "orders/o2")
		rows, err = l.InFlight(ctx, "none", 10)
		check("InFlight(none)", rows, err)
		rows, err = l.ByWorker(ctx, "hostB:2", 10)
		check("ByWorker(hostB)", rows, err, "mail/m2", "orders/o3")
		if rows[1].Attempt != 2 {
			t.Errorf("ByWorker row attempt %d, want 2", rows[1].Attempt)
		}
		if _, err := l.InFlight(ctx, "", 0); err == nil {
			t.Error("limit 0 accepted")
		}

		if n := count(t, l); n != 5 {
			t.Errorf("Count = %d, want 5", n)
		}
		if r := mustRow(t, l, "mail", "m2"); r.Worker != "hostB:2" {
			t.Errorf("Row(mail, m2).Worker = %q", r.Worker)
		}
		if _, err := l.Row(ctx, "mail", "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Row of a missing job: %v, want ErrNotFound", err)
		}

		// Dead letters: a day is [start, end).
		day := int64(1_700_006_400_000) // a UTC midnight
		dayEnd := day + 86_400_000
		dead := []queue.DeadJob{
			{Job: job("orders", "before", 1), Error: "e", DiedAt: day - 1},
			{Job: job("orders", "first", 1), Error: "e", DiedAt: day},
			{Job: job("mail", "other-topic", 1), Error: "e", DiedAt: day + 5},
			{Job: job("orders", "last", 1), Error: "e", DiedAt: dayEnd - 1},
			{Job: job("orders", "mid", 1), Error: "e", DiedAt: day + 10},
			{Job: job("orders", "after", 1), Error: "e", DiedAt: dayEnd},
		}
		if err := opsOf(l).Bury(ctx, dead); err != nil {
			t.Fatal(err)
		}
		dl, err := l.DeadLetters(ctx, "orders", day, dayEnd, 10)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range dl {
			got = append(got, d.JobID)
		}
		if fmt.Sprint(got) != "[first mid last]" {
			t.Errorf("DeadLetters(orders, day) = %v, want [first mid last]", got)
		}
		dl, err = l.DeadLetters(ctx, "", day, dayEnd, 2)
		if err != nil || len(dl) != 2 || dl[0].JobID != "first" || dl[1].JobID != "other-topic" {
			t.Errorf("DeadLetters(all, day, 2) = %+v, %v", dl, err)
		}
	})
}

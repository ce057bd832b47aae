package ledger

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// Every write of one job seeks its row through the unique key, however
// large the ledger: a durable topic's ledger holds every waiting job, and a
// worker often records, extends or completes a single one. (MariaDB reads a
// one-tuple row IN, (a,b) IN ((?,?)), as a row comparison, which its UPDATE
// and DELETE cannot seek with: each such statement read the whole table.)
func TestOneJobWritesSeekTheRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.MySQL(t)
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	// One connection: the Handler_ counters read below are the session's.
	sqlDB.SetMaxOpenConns(1)
	l, _ := newLedger(t, db, Options{})
	const waiting = 3000
	var nj []queue.NewJob
	for i := 0; i < waiting; i++ {
		nj = append(nj, queue.NewJob{ID: fmt.Sprintf("w%05d", i), MaxAttempts: 3})
	}
	mustSchedule(t, l, "t", nj...)
	mustSchedule(t, l, "t", queue.NewJob{ID: "one", MaxAttempts: 3})

	// rowsRead returns how many rows the session's statements have read
	// by scanning (a table or an index from its start) rather than seeking.
	rowsRead := func() int64 {
		t.Helper()
		var n int64
		rows, err := db.Raw("SHOW SESSION STATUS WHERE Variable_name IN ('Handler_read_rnd_next', 'Handler_read_next', 'Handler_read_first')").Rows()
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var name, v string
			if err := rows.Scan(&name, &v); err != nil {
				t.Fatal(err)
			}
			x, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			n += x
		}
		return n
	}
	ref := queue.Ref{Topic: "t", ID: "one", Attempt: 1}
	j := claimOf(t, l, "t", "one")
	last := queue.Ref{Topic: "t", ID: "one", Attempt: 2}
	steps := []struct {
		name string
		op   func() error
	}{
		{"Record (durable)", func() error { return opsOf(l).Record(ctx, []*queue.Job{j}, "w:1") }},
		{"Extend", func() error { return opsOf(l).Extend(ctx, []queue.Ref{ref}, j.LeaseUntil+1) }},
		{"MarkRetrying", func() error {
			return opsOf(l).MarkRetrying(ctx, []dataplane.RetryRequest{{Ref: ref, RunAt: j.RunAt, LeaseUntil: j.LeaseUntil, Error: "again"}})
		}},
		{"Record (durable), the retry", func() error { return opsOf(l).Record(ctx, []*queue.Job{claimOf(t, l, "t", "one")}, "w:1") }},
		{"Unclaim", func() error { return opsOf(l).Unclaim(ctx, []queue.Ref{{Topic: "t", ID: "one", Attempt: 2}}) }},
		{"Record (durable) again", func() error { return opsOf(l).Record(ctx, []*queue.Job{claimOf(t, l, "t", "one")}, "w:1") }},
		{"Complete", func() error { return opsOf(l).Complete(ctx, []queue.Ref{last}) }},
		{"Record (redis)", func() error { return opsOf(l).Record(ctx, []*queue.Job{job("r", "x", 1)}, "w:1") }},
		{"Bury", func() error {
			return opsOf(l).Bury(ctx, []queue.DeadJob{{Job: job("r", "x", 1), Error: "dead", DiedAt: fixedNow.UnixMilli()}})
		}},
	}
	// The statements of the reads themselves, measured once.
	base := rowsRead()
	self := rowsRead() - base
	for _, s := range steps {
		before := rowsRead()
		if err := s.op(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if n := rowsRead() - before - self; n > 10 {
			t.Errorf("%s of one job read %d rows of %d by scanning, want it to seek its row", s.name, n, waiting+1)
		}
	}
	if n := count(t, l); n != waiting {
		t.Errorf("%d rows at the end, want the %d waiting ones", n, waiting)
	}
}

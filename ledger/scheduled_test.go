package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"slices"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/delayq/delayq/internal/tcpproxy"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

func TestUnclaim(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, log := newLedger(t, db, Options{})
		_, now := mustSchedule(t, l, "t", queue.NewJob{ID: "first", RunAt: 2_000_000_000_000, MaxAttempts: 5})
		first := job("t", "first", 1)
		first.RunAt = 2_000_000_000_000
		// second is the case where MySQL's left-to-right assignments would
		// decide differently from SQLite if attempt were assigned first.
		second := job("t", "second", 2)
		third := job("t", "third", 3)
		other := job("t", "other", 2)
		mustRecord(t, l, "h:1", first, second, third, other)
		log.Take()
		// A stale claim (attempt 1 of other, which is at 2) changes nothing.
		refs := []queue.Ref{first.Ref(), second.Ref(), third.Ref(), {Topic: "t", ID: "other", Attempt: 1}, {Topic: "t", ID: "gone", Attempt: 1}}
		if err := opsOf(l).Unclaim(ctx, refs); err != nil {
			t.Fatal(err)
		}
		if got := verbs(log.Take()); fmt.Sprint(got) != "[UPDATE]" {
			t.Errorf("Unclaim ran %v", got)
		}
		r := mustRow(t, l, "t", "first")
		if r.State != queue.StateWaiting || r.Attempt != 0 || r.LeaseUntil != NeverStale || r.Worker != "" ||
			r.UpdatedAt != fixedNow.UnixMilli() || r.EnqueuedAt != now {
			t.Errorf("first, handed back to its first run: %+v", r)
		}
		if r = mustRow(t, l, "t", "second"); r.State != queue.StateRetrying || r.Attempt != 1 {
			t.Errorf("second, handed back to a retry: %+v", r)
		}
		r = mustRow(t, l, "t", "third")
		if r.State != queue.StateRetrying || r.Attempt != 2 || r.LeaseUntil != third.RunAt || r.Worker != "" {
			t.Errorf("third, handed back to a retry: %+v", r)
		}
		if r = mustRow(t, l, "t", "other"); r.State != queue.StateInFlight || r.Attempt != 2 || r.Worker != "h:1" {
			t.Errorf("other, fenced off: %+v", r)
		}
		// Again: the attempts moved on, so nothing changes.
		if err := opsOf(l).Unclaim(ctx, refs); err != nil {
			t.Fatal(err)
		}
		if r = mustRow(t, l, "t", "first"); r.Attempt != 0 || r.State != queue.StateWaiting {
			t.Errorf("first after a second Unclaim: %+v", r)
		}
		if r = mustRow(t, l, "t", "third"); r.Attempt != 2 {
			t.Errorf("third after a second Unclaim: %+v", r)
		}
		if err := opsOf(l).Unclaim(ctx, nil); err != nil {
			t.Fatal(err)
		}

		got, err := opsOf(l).Lookup(ctx, "t", "first")
		if err != nil || got == nil || got.State != queue.StateWaiting || got.EnqueuedAt != now || got.RunAt != first.RunAt {
			t.Errorf("Lookup of a scheduled row: %+v, %v", got, err)
		}
		if got, err = opsOf(l).Lookup(ctx, "t", "third"); err != nil || got == nil || got.State != queue.StateRetrying {
			t.Errorf("Lookup of a retrying row: %+v, %v", got, err)
		}
	})
}

func TestScheduledPaging(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		base := int64(2_000_000_000_000)
		// Three run times, ids inserted out of order, two topics, so that
		// (run_at, id) differs from both id and insertion order.
		for _, topic := range []string{"b", "a"} {
			var js []queue.NewJob
			for i := 9; i >= 0; i-- {
				js = append(js, queue.NewJob{ID: fmt.Sprint(topic, i), RunAt: base + int64(i%3)*1000, MaxAttempts: 1,
					Payload: []byte("p" + fmt.Sprint(topic, i))})
			}
			mustSchedule(t, l, topic, js...)
		}
		// Rows in other states are not scheduled rows.
		mustRecord(t, l, "h:1", job("a", "a4", 1))
		all, err := opsOf(l).Scheduled(ctx, "", Cursor{}, base+10_000, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 19 {
			t.Fatalf("%d scheduled rows, want 19", len(all))
		}
		if !slices.IsSortedFunc(all, func(x, y Entry) int {
			if x.RunAt != y.RunAt {
				return int(x.RunAt - y.RunAt)
			}
			return int(x.ID - y.ID)
		}) {
			t.Errorf("not in (run_at, id) order")
		}
		for _, e := range all {
			if e.JobID == "a4" || string(e.Payload) != "p"+e.JobID || e.State != queue.StateWaiting || e.EnqueuedAt == 0 {
				t.Errorf("row %+v", e)
			}
		}

		// Pages of 4 give the same rows in the same order.
		var paged []Entry
		var cur Cursor
		for {
			page, err := opsOf(l).Scheduled(ctx, "", cur, base+10_000, 4)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			paged = append(paged, page...)
			last := page[len(page)-1]
			cur = Cursor{RunAt: last.RunAt, ID: last.ID}
		}
		if ids(paged) != ids(all) {
			t.Errorf("paged\n %s\nall\n %s", ids(paged), ids(all))
		}

		// upTo and topic bound the scan.
		upTo, err := opsOf(l).Scheduled(ctx, "a", Cursor{}, base+1000, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range upTo {
			if e.Topic != "a" || e.RunAt > base+1000 {
				t.Errorf("row beyond the bounds: %+v", e)
			}
		}
		if len(upTo) != 6 { // a0 a1 a3 a6 a7 a9, a4 being in progress
			t.Errorf("%d rows of a up to +1s: %s", len(upTo), ids(upTo))
		}
		if _, err := opsOf(l).Scheduled(ctx, "", cur, 0, 0); err == nil {
			t.Error("limit 0 accepted")
		}

		counts, err := l.ScheduledCounts(ctx, base+1000)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]ScheduledCount{"a": {Total: 9, Beyond: 3}, "b": {Total: 10, Beyond: 3}}
		if fmt.Sprint(counts) != fmt.Sprint(want) {
			t.Errorf("counts %v, want %v", counts, want)
		}
	})
}

func ids(rows []Entry) string {
	var b strings.Builder
	for _, e := range rows {
		fmt.Fprintf(&b, "%s/%s ", e.Topic, e.JobID)
	}
	return b.String()
}

// TestScheduledUsesTheIndex: on MariaDB, the relay's scan reads the
// (state, run_at) index in order, without a sort, once the table holds more
// than the scheduled rows.
func TestScheduledUsesTheIndex(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	l, _ := newLedger(t, db, Options{})
	var js []queue.NewJob
	for i := range 2000 {
		js = append(js, queue.NewJob{ID: fmt.Sprint("j", i), RunAt: 2_000_000_000_000 + int64(i%97)*1000, MaxAttempts: 1})
	}
	mustSchedule(t, l, "t", js...)
	var claimed []*queue.Job
	for i := range 2000 {
		claimed = append(claimed, job("t", fmt.Sprint("c", i), 1))
	}
	mustRecord(t, l, "h:1", claimed...)
	if err := db.Exec("ANALYZE TABLE dq_ledger").Error; err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"", "t"} {
		q := "EXPLAIN SELECT " + entrySelect + " FROM dq_ledger WHERE state = 'scheduled' AND run_at >= 2000000000000" +
			" AND run_at <= 2000000050000 AND (run_at > 2000000000000 OR id > 5)"
		if topic != "" {
			q += " AND topic = 't'"
		}
		q += " ORDER BY run_at, id LIMIT 100"
		rows, err := db.Raw(q).Rows()
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			plan := map[string]string{}
			for i, c := range cols {
				plan[c] = fmt.Sprintf("%s", vals[i])
			}
			if plan["key"] != "idx_dq_ledger_state_run_at" || strings.Contains(plan["Extra"], "filesort") {
				t.Errorf("topic %q: plan %v", topic, plan)
			}
		}
		rows.Close()
	}
}

// TestScheduleMySQLCut: the link to MariaDB is cut in the middle of a
// Schedule that takes several statements (its transaction): the call
// returns an error, promptly, and nothing of it is left; once the link is
// back, the same call creates every job.
func TestScheduleMySQLCut(t *testing.T) {
	t.Parallel()
	dsn := testenv.MySQLDSN(t)
	direct, _ := newLedger(t, openMySQL(t, dsn), Options{})
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := tcpproxy.New(t, cfg.Addr)
	cfg.Addr = proxy.Addr()
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = time.Second, 2*time.Second, 2*time.Second
	// The driver logs every cut connection; a logger of this connector's
	// own keeps it quiet without touching the driver's global one, which
	// parallel tests read.
	cfg.Logger = log.New(io.Discard, "", 0)
	connector, err := gomysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sqlDB := sql.OpenDB(connector)
	t.Cleanup(func() { _ = sqlDB.Close() })
	viaProxy, err := gorm.Open(mysql.New(mysql.Config{Conn: sqlDB}), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(viaProxy, Options{MaxPlaceholders: 31}) // 10 rows per INSERT
	if err != nil {
		t.Fatal(err)
	}
	var js []queue.NewJob
	for i := range 35 {
		js = append(js, queue.NewJob{ID: fmt.Sprintf("j%02d", i), MaxAttempts: 1})
	}
	// Cut the link right after the first INSERT went through.
	var inserts int
	err = viaProxy.Callback().Raw().After("gorm:raw").Register("test:cut", func(d *gorm.DB) {
		if strings.HasPrefix(d.Statement.SQL.String(), "INSERT") && d.Error == nil {
			if inserts++; inserts == 1 {
				proxy.Cut()
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.ContextTimeout(t, 20*time.Second)
	start := time.Now()
	if _, _, err := l.Schedule(ctx, "t", js); err == nil {
		t.Fatal("Schedule over a cut link succeeded")
	}
	if inserts != 1 {
		t.Fatalf("%d INSERTs went through, want the cut after the first", inserts)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Schedule took %s to fail", d)
	}
	if n := count(t, direct); n != 0 {
		t.Fatalf("a cut Schedule left %d rows", n)
	}
	// A cut before the call: an error at once, and nothing written.
	if _, _, err := l.Schedule(ctx, "t", js[:1]); err == nil {
		t.Fatal("Schedule with the link down succeeded")
	}
	proxy.Restore()
	testenv.WaitFor(ctx, t, "Schedule through the restored link", func() bool {
		out, _, err := l.Schedule(ctx, "t", js)
		if err != nil {
			return false
		}
		for _, r := range out {
			if r.Duplicate {
				t.Fatalf("after the cut, %s is a duplicate: something was left", r.ID)
			}
		}
		return true
	})
	if n := count(t, direct); n != int64(len(js)) {
		t.Errorf("%d rows, want %d", n, len(js))
	}
}

func openMySQL(t *testing.T, dsn string) *gorm.DB {
	t.Helper()
	db, err := gorm.Open(mysql.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
	})
	return db
}

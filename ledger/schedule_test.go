package ledger

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/queue"
)

// serverClock reads the SQL server's clock (Unix ms) with another
// expression than the ledger's, so that a test of the ledger's clock is not
// circular. SQLite's strftime has whole seconds: the result is rounded down
// to one, and slack is what a caller adds to compare with it.
func serverClock(t *testing.T, db *gorm.DB) (now, slack int64) {
	t.Helper()
	q := "SELECT CAST(UNIX_TIMESTAMP(NOW(3))*1000 AS SIGNED)"
	if db.Dialector.Name() == "sqlite" {
		q, slack = "SELECT CAST(strftime('%s','now') AS INTEGER)*1000", 1000
	}
	if err := db.Raw(q).Row().Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now, slack
}

func mustSchedule(t *testing.T, s queue.DurableStore, topic string, jobs ...queue.NewJob) ([]queue.EnqueueResult, int64) {
	t.Helper()
	out, now, err := s.Schedule(context.Background(), topic, jobs)
	if err != nil {
		t.Fatalf("Schedule: %v", err)
	}
	if len(out) != len(jobs) {
		t.Fatalf("Schedule: %d results for %d jobs", len(out), len(jobs))
	}
	return out, now
}

func TestSchedule(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, log := newLedger(t, db, Options{})
		before, slack := serverClock(t, db)
		later := before + 3_600_000
		out, now := mustSchedule(t, l, "t",
			queue.NewJob{ID: "a", Payload: []byte("pa"), Delay: 5 * time.Second, MaxAttempts: 3},
			queue.NewJob{ID: "b", RunAt: 1_000_000_000_000, MaxAttempts: 1}, // in the past: due now
			queue.NewJob{ID: "c", Payload: []byte("pc"), RunAt: later, MaxAttempts: 7},
			queue.NewJob{ID: "a", Payload: []byte("other"), MaxAttempts: 3}, // earlier in the call
		)
		after, _ := serverClock(t, db)
		if got := verbs(log.Take()); fmt.Sprint(got) != "[SELECT INSERT]" {
			t.Errorf("Schedule ran %v, want one SELECT and one INSERT", got)
		}
		// The SQL server's clock, not the ledger's (fixedNow, 2023) nor
		// this process's.
		if now < before || now > after+slack {
			t.Fatalf("now %d: not between the server's %d and %d", now, before, after)
		}
		want := []queue.EnqueueResult{
			{ID: "a", RunAt: now + 5000}, {ID: "b", RunAt: now}, {ID: "c", RunAt: later},
			{ID: "a", Duplicate: true, RunAt: now + 5000},
		}
		if fmt.Sprint(out) != fmt.Sprint(want) {
			t.Errorf("results\n got %+v\nwant %+v", out, want)
		}
		for i, j := range []struct {
			id      string
			payload string
			max     int
		}{{"a", "pa", 3}, {"b", "", 1}, {"c", "pc", 7}} {
			r := mustRow(t, l, "t", j.id)
			if r.State != queue.StateWaiting || r.Attempt != 0 || r.MaxAttempts != j.max || r.RunAt != out[i].RunAt ||
				r.LeaseUntil != NeverStale || r.EnqueuedAt != now || r.UpdatedAt != now || r.ClaimedAt != 0 ||
				r.Worker != "" || r.LastError != "" || !bytes.Equal(r.Payload, []byte(j.payload)) {
				t.Errorf("row %s: %+v", j.id, r)
			}
		}
		if n := count(t, l); n != 3 {
			t.Fatalf("%d rows, want 3", n)
		}

		// Ids with a row already: scheduled (its run_at), in flight (0),
		// retrying (its run_at). The job of another topic is another job.
		claimed := job("t", "b", 1)
		mustRecord(t, l, "h:1", claimed)
		retry := now + 60_000
		if err := opsOf(l).MarkRetrying(ctx, []dataplane.RetryRequest{{Ref: queue.Ref{Topic: "t", ID: "b", Attempt: 1}, RunAt: retry, LeaseUntil: retry + 30_000}}); err != nil {
			t.Fatal(err)
		}
		mustRecord(t, l, "h:1", job("t", "d", 1))
		out, _ = mustSchedule(t, l, "t", queue.NewJob{ID: "c", MaxAttempts: 1}, queue.NewJob{ID: "b", MaxAttempts: 1},
			queue.NewJob{ID: "d", MaxAttempts: 1}, queue.NewJob{ID: "e", MaxAttempts: 1})
		want = []queue.EnqueueResult{
			{ID: "c", Duplicate: true, RunAt: later}, {ID: "b", Duplicate: true, RunAt: retry},
			{ID: "d", Duplicate: true, RunAt: 0}, {ID: "e", RunAt: out[3].RunAt},
		}
		if fmt.Sprint(out) != fmt.Sprint(want) || out[3].RunAt == 0 {
			t.Errorf("results over existing rows\n got %+v\nwant %+v", out, want)
		}
		if r := mustRow(t, l, "t", "c"); string(r.Payload) != "pc" || r.MaxAttempts != 7 {
			t.Errorf("a duplicate rewrote row c: %+v", r)
		}
		out, _ = mustSchedule(t, l, "other", queue.NewJob{ID: "a", MaxAttempts: 1})
		if out[0].Duplicate {
			t.Errorf("other/a is a duplicate of t/a")
		}

		// A claim of a scheduled row makes it in_progress and keeps its
		// enqueued_at.
		a := job("t", "a", 1)
		a.EnqueuedAt = 1
		mustRecord(t, l, "h:1", a)
		if r := mustRow(t, l, "t", "a"); r.State != queue.StateInFlight || r.Attempt != 1 || r.EnqueuedAt != now {
			t.Errorf("claimed scheduled row: %+v", r)
		}

		// No jobs: only the clock.
		log.Take()
		if out, n, err := l.Schedule(ctx, "t", nil); err != nil || len(out) != 0 || n < now {
			t.Errorf("empty Schedule: %v, %d, %v", out, n, err)
		}
	})
}

func TestScheduleRejectsBadKeysAndWritesNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, log := newLedger(t, db, Options{})
		for name, c := range map[string]struct {
			topic string
			id    string
		}{
			"long topic": {strings.Repeat("t", maxTopicLen+1), "a"},
			"long id":    {"t", strings.Repeat("i", maxJobIDLen+1)},
			"empty id":   {"t", ""},
			"bad utf-8":  {"t", "a\xff"},
		} {
			_, _, err := l.Schedule(ctx, c.topic, []queue.NewJob{{ID: "ok", MaxAttempts: 1}, {ID: c.id, MaxAttempts: 1}})
			if err == nil {
				t.Errorf("%s: accepted", name)
			}
		}
		if got := log.Take(); len(got) != 0 {
			t.Errorf("bad input ran statements: %v", got)
		}
		if n := count(t, l); n != 0 {
			t.Errorf("bad input wrote %d rows", n)
		}
	})
}

// TestScheduleSplit: a batch beyond the placeholder limit, or with payloads
// beyond the statement budget, takes several statements, all or nothing.
func TestScheduleSplit(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		// 31 placeholders: 30 ids per SELECT, 10 rows (3 each) per INSERT.
		l, log := newLedger(t, db, Options{MaxPlaceholders: 31})
		l.clock.fresh = time.Hour // the first call's read of the clock serves the rest
		mustSchedule(t, l, "t", queue.NewJob{ID: "j05", MaxAttempts: 1})
		var js []queue.NewJob
		for i := range 45 {
			js = append(js, queue.NewJob{ID: fmt.Sprintf("j%02d", i), MaxAttempts: 2})
		}
		log.Take()
		out, _ := mustSchedule(t, l, "t", js...)
		// The INSERT goes first (the clock is known); its first statement
		// meets j05, and the ids are read, the clock with them.
		if got := verbs(log.Take()); fmt.Sprint(got) != "[INSERT SELECT SELECT INSERT INSERT INSERT INSERT INSERT]" {
			t.Errorf("split Schedule ran %v", got)
		}
		for i, r := range out {
			if r.Duplicate != (i == 5) {
				t.Errorf("job %d: %+v", i, r)
			}
		}
		if n := count(t, l); n != 45 {
			t.Fatalf("%d rows, want 45", n)
		}

		// Big payloads: one INSERT each, about scheduleStmtBytes apiece.
		big := bytes.Repeat([]byte("x"), scheduleStmtBytes/2+1)
		log.Take()
		mustSchedule(t, l, "big", queue.NewJob{ID: "1", Payload: big, MaxAttempts: 1},
			queue.NewJob{ID: "2", Payload: big, MaxAttempts: 1}, queue.NewJob{ID: "3", Payload: big, MaxAttempts: 1})
		if got := verbs(log.Take()); fmt.Sprint(got) != "[INSERT INSERT INSERT]" {
			t.Errorf("big payloads ran %v", got)
		}
		if r := mustRow(t, l, "big", "3"); !bytes.Equal(r.Payload, big) {
			t.Errorf("big payload came back as %d bytes", len(r.Payload))
		}

		// All or nothing: a trigger fails the last INSERT of a split call.
		poison := "CREATE TRIGGER poison BEFORE INSERT ON dq_ledger FOR EACH ROW" +
			" BEGIN IF NEW.job_id = 'zz' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'poison'; END IF; END"
		if db.Dialector.Name() == "sqlite" {
			poison = "CREATE TRIGGER poison BEFORE INSERT ON dq_ledger WHEN NEW.job_id = 'zz'" +
				" BEGIN SELECT RAISE(ABORT, 'poison'); END"
		}
		if err := db.Exec(poison).Error; err != nil {
			t.Fatal(err)
		}
		js = js[:0]
		for i := range 25 {
			js = append(js, queue.NewJob{ID: fmt.Sprintf("p%02d", i), MaxAttempts: 1})
		}
		js = append(js, queue.NewJob{ID: "zz", MaxAttempts: 1})
		log.Take()
		if _, _, err := l.Schedule(ctx, "p", js); err == nil || !strings.Contains(err.Error(), "poison") {
			t.Fatalf("Schedule with a failing INSERT: %v", err)
		}
		if got := verbs(log.Take()); fmt.Sprint(got) != "[INSERT INSERT INSERT]" {
			t.Errorf("failing split Schedule ran %v", got)
		}
		if c, err := l.ScheduledCounts(ctx, 0); err != nil || c["p"].Total != 0 {
			t.Errorf("a failed split Schedule left %+v (%v)", c["p"], err)
		}
	})
}

// raceInsert makes the next INSERT into the ledger table lose the race for
// id: right before it goes out, another connection schedules id of topic.
// It returns how many times it did so.
func raceInsert(t *testing.T, db *gorm.DB, other *Ledger, topic, id string) *atomic.Int64 {
	t.Helper()
	var fired atomic.Int64
	var busy atomic.Bool
	err := db.Callback().Raw().Before("gorm:raw").Register("test:race_insert", func(d *gorm.DB) {
		if !strings.HasPrefix(d.Statement.SQL.String(), "INSERT INTO `dq_ledger` (topic, job_id, payload, attempt") ||
			!busy.CompareAndSwap(false, true) {
			return
		}
		defer busy.Store(false)
		if fired.Load() > 0 {
			return
		}
		fired.Add(1)
		if _, _, err := other.Schedule(context.Background(), topic, []queue.NewJob{{ID: id, Payload: []byte("winner"), MaxAttempts: 9}}); err != nil {
			t.Errorf("the racing Schedule: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Callback().Raw().Remove("test:race_insert") })
	return &fired
}

// TestScheduleLosesRaceForAnID: an enqueue of the same id commits between
// Schedule's SELECT and INSERT. The INSERT fails on the unique key; Schedule
// reads again and writes the rest, reporting the id as a duplicate.
func TestScheduleLosesRaceForAnID(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		l, log := newLedger(t, db, Options{})
		l.clock.fresh = time.Hour // the racing call, after ours read the clock, inserts alone
		fired := raceInsert(t, db, l, "t", "b")
		out, _ := mustSchedule(t, l, "t", queue.NewJob{ID: "a", MaxAttempts: 1}, queue.NewJob{ID: "b", MaxAttempts: 1},
			queue.NewJob{ID: "c", MaxAttempts: 1})
		if fired.Load() != 1 {
			t.Fatal("the race did not happen")
		}
		if got := verbs(log.Take()); fmt.Sprint(got) != "[SELECT INSERT INSERT SELECT INSERT]" {
			t.Errorf("ran %v: want SELECT (ids and clock), the other's INSERT, the failed INSERT, SELECT, INSERT", got)
		}
		winner := mustRow(t, l, "t", "b")
		if !out[1].Duplicate || out[1].RunAt != winner.RunAt || out[0].Duplicate || out[2].Duplicate {
			t.Errorf("results %+v", out)
		}
		if string(winner.Payload) != "winner" || count(t, l) != 3 {
			t.Errorf("row b %+v, %d rows", winner, count(t, l))
		}
	})
}

// TestScheduleConcurrentCreatesEachIDOnce: many goroutines schedule
// overlapping ids at once; each id is created by exactly one of them.
func TestScheduleConcurrentCreatesEachIDOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		const goroutines, ids, batch = 16, 300, 25
		var created [ids]atomic.Int64
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Each goroutine walks the ids from its own offset, in
				// batches: every id is in flight in several calls at once.
				for lo := 0; lo < ids; lo += batch {
					js := make([]queue.NewJob, batch)
					for k := range js {
						js[k] = queue.NewJob{ID: fmt.Sprintf("id%03d", (g*37+lo+k)%ids), MaxAttempts: 1}
					}
					out, _, err := l.Schedule(ctx, "t", js)
					if err != nil {
						t.Error(err)
						return
					}
					for k, r := range out {
						if !r.Duplicate {
							created[(g*37+lo+k)%ids].Add(1)
						}
					}
				}
			}()
		}
		wg.Wait()
		for i := range created {
			if n := created[i].Load(); n != 1 {
				t.Errorf("id%03d created %d times", i, n)
			}
		}
		if n := count(t, l); n != ids {
			t.Errorf("%d rows, want %d", n, ids)
		}
	})
}

// TestScheduleInsertsFirstWithAKnownClock: once the SQL clock was read
// (within clockFresh), Schedule of new ids is one INSERT, with due times
// never before the server's clock; an id that has a row fails that INSERT,
// and the ids are read as without the estimate, the duplicate reported.
func TestScheduleInsertsFirstWithAKnownClock(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, log := newLedger(t, db, Options{})
		l.clock.fresh = time.Hour
		first, _ := mustSchedule(t, l, "t", queue.NewJob{ID: "a", MaxAttempts: 1})
		if got := verbs(log.Take()); fmt.Sprint(got) != "[SELECT INSERT]" {
			t.Fatalf("first Schedule ran %v", got)
		}
		before, err := l.SQLNow(ctx)
		if err != nil {
			t.Fatal(err)
		}
		log.Take()
		out, now := mustSchedule(t, l, "t", queue.NewJob{ID: "b", MaxAttempts: 1}, queue.NewJob{ID: "c", MaxAttempts: 1, Delay: time.Minute})
		if got := verbs(log.Take()); fmt.Sprint(got) != "[INSERT]" {
			t.Fatalf("Schedule of new ids ran %v, want one INSERT", got)
		}
		if now < before || out[0].RunAt != now || out[1].RunAt != now+60_000 {
			t.Fatalf("due times %+v on clock %d; the server's clock read before was %d", out, now, before)
		}
		out, _ = mustSchedule(t, l, "t", queue.NewJob{ID: "a", MaxAttempts: 1}, queue.NewJob{ID: "d", MaxAttempts: 1})
		if got := verbs(log.Take()); fmt.Sprint(got) != "[INSERT SELECT INSERT]" {
			t.Fatalf("Schedule with an existing id ran %v", got)
		}
		if !out[0].Duplicate || out[0].RunAt != first[0].RunAt || out[1].Duplicate || count(t, l) != 4 {
			t.Fatalf("results %+v, %d rows", out, count(t, l))
		}
	})
}

// The estimate of the SQL clock is never behind what the server said plus
// the time since the read was sent, and goes stale.
func TestSQLClockEstimate(t *testing.T) {
	var c sqlClock
	if _, ok := c.now(); ok {
		t.Fatal("an estimate without a read")
	}
	sent := time.Now().Add(-50 * time.Millisecond)
	c.observe(1_000_000, sent)
	got, ok := c.now()
	if !ok || got < 1_000_000+50+1 || got > 1_000_000+50+1+100 {
		t.Fatalf("estimate %d %v, want 1,000,051 or a little more", got, ok)
	}
	c.observe(900_000, sent.Add(-time.Millisecond)) // an older read changes nothing
	if again, _ := c.now(); again < got {
		t.Fatalf("an older read moved the estimate back: %d < %d", again, got)
	}
	var old sqlClock
	old.observe(2_000_000, time.Now().Add(-2*clockFresh))
	if _, ok := old.now(); ok {
		t.Fatal("a stale estimate")
	}
}

// A scheduled row stores its worker as waitingWorker's padding, so that
// the claim's UPDATE shrinks the row instead of growing it; every reader
// sees "" all the same, and an unclaimed row gets the padding back.
func TestAWaitingRowsWorkerIsPaddedAndReadsEmpty(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		mustSchedule(t, l, "t", queue.NewJob{ID: "a", MaxAttempts: 3})
		raw := func() int {
			var n int
			if err := db.Raw("SELECT LENGTH(worker) FROM `" + l.LedgerTable() + "` WHERE job_id = 'a'").Row().Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := raw(); n != len(waitingWorker) {
			t.Fatalf("stored worker of a scheduled row: %d bytes, want %d", n, len(waitingWorker))
		}
		readers := map[string]func() string{
			"Row": func() string { return mustRow(t, l, "t", "a").Worker },
			"List": func() string {
				p, err := l.List(ctx, ListFilter{Limit: 10})
				if err != nil || len(p.Rows) != 1 {
					t.Fatalf("List: %v, %d rows", err, len(p.Rows))
				}
				return p.Rows[0].Worker
			},
			"RowsOf": func() string {
				m, err := l.RowsOf(ctx, "t", []string{"a"})
				if err != nil {
					t.Fatal(err)
				}
				return m["a"].Worker
			},
			"Scheduled": func() string {
				rows, err := opsOf(l).Scheduled(ctx, "t", Cursor{}, 1<<62, 10)
				if err != nil || len(rows) != 1 {
					t.Fatalf("Scheduled: %v, %d rows", err, len(rows))
				}
				return rows[0].Worker
			},
		}
		for name, read := range readers {
			if w := read(); w != "" {
				t.Errorf("%s reads a scheduled row's worker as %q, want \"\"", name, w)
			}
		}
		claim := claimOf(t, l, "t", "a")
		mustRecord(t, l, "w:1", claim)
		if w := mustRow(t, l, "t", "a").Worker; w != "w:1" {
			t.Errorf("claimed row's worker %q, want w:1", w)
		}
		if err := opsOf(l).Unclaim(ctx, []queue.Ref{claim.Ref()}); err != nil {
			t.Fatal(err)
		}
		if n := raw(); n != len(waitingWorker) {
			t.Errorf("stored worker of an unclaimed row: %d bytes, want %d", n, len(waitingWorker))
		}
	})
}

// ScheduleEach writes the jobs of several partitions in one commit, each
// on its partition's rows, a duplicate found in its own partition only.
func TestScheduleEachIsOneCommit(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		l, _ := newLedger(t, db, Options{})
		mustSchedule(t, l, "t~2.1~5", queue.NewJob{ID: "dup", MaxAttempts: 1})
		before := l.WriteStats().Commits
		out, _, err := l.ScheduleEach(context.Background(), []string{"t~2.0~0", "t~2.1~5"}, [][]queue.NewJob{
			{{ID: "a", MaxAttempts: 1}, {ID: "dup", MaxAttempts: 1}},
			{{ID: "b", MaxAttempts: 1}, {ID: "dup", MaxAttempts: 1}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if c := l.WriteStats().Commits - before; c != 1 {
			t.Errorf("%d commits, want 1", c)
		}
		got := fmt.Sprint(out[0][0].Duplicate, out[0][1].Duplicate, out[1][0].Duplicate, out[1][1].Duplicate)
		if got != "false false false true" {
			t.Errorf("duplicates %s, want only the second partition's dup", got)
		}
		for _, r := range []struct{ topic, id string }{{"t~2.0~0", "a"}, {"t~2.0~0", "dup"}, {"t~2.1~5", "b"}} {
			mustRow(t, l, r.topic, r.id)
		}
	})
}

// With new ids and a fresh estimate of the SQL clock, ScheduleEach is as
// cheap as Schedule: one INSERT for every partition's rows, no transaction
// around it, one commit; the rows are each partition's, with the due times
// the results give.
func TestScheduleEachNewIDsIsOneStatement(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, log := newLedger(t, db, Options{})
		mustSchedule(t, l, "warm", queue.NewJob{ID: "w", MaxAttempts: 1}) // reads the SQL clock
		log.Take()
		before := l.WriteStats().Commits
		topics := []string{"t~3.0~1", "t~3.1~0", "t~3.2~4"}
		out, now, err := l.ScheduleEach(ctx, topics, [][]queue.NewJob{
			{{ID: "b", MaxAttempts: 1, Delay: time.Second}, {ID: "a", MaxAttempts: 2}},
			{{ID: "c", MaxAttempts: 3}, {ID: "c", MaxAttempts: 3}},
			{{ID: "d", MaxAttempts: 4, Delay: time.Minute}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := verbs(log.Take()); fmt.Sprint(got) != "[INSERT]" {
			t.Errorf("ScheduleEach ran %v, want one INSERT", got)
		}
		if c := l.WriteStats().Commits - before; c != 1 {
			t.Errorf("%d commits, want 1", c)
		}
		if !out[1][1].Duplicate || out[1][1].RunAt != out[1][0].RunAt || out[0][0].RunAt != now+1000 || out[2][0].RunAt != now+60_000 {
			t.Errorf("results %+v (now %d)", out, now)
		}
		for p, ids := range [][]string{{"b", "a"}, {"c"}, {"d"}} {
			for k, id := range ids {
				if r := mustRow(t, l, topics[p], id); r.RunAt != out[p][k].RunAt || r.State != queue.StateWaiting {
					t.Errorf("row %s/%s: %+v, want due %d", topics[p], id, r, out[p][k].RunAt)
				}
			}
		}
	})
}

package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/queue"
)

// Every way a job with a row finishes leaves one history row copied from
// that row, in the transaction that deletes it: a success, a death, a
// cancel; a job cancelled without a row gets one from what Redis had. The
// first claim's time survives a retry and the next claim.
func TestHistoryOfEveryOutcome(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		var clock time.Time = fixedNow
		l, _ := newLedger(t, db, Options{Now: func() time.Time { return clock }})
		o := opsOf(l)

		ok, dead, cancelled := job("t", "ok", 1), job("t", "dead", 1), job("t", "cancelled", 1)
		mustRecord(t, l, "w:1", ok, dead, cancelled)
		// ok fails once and is claimed again, by another worker, later.
		if err := o.MarkRetrying(ctx, []dataplane.RetryRequest{{Ref: ok.Ref(), RunAt: fixedNow.UnixMilli() + 5000,
			LeaseUntil: fixedNow.UnixMilli() + 5000, Error: "smtp 451"}}); err != nil {
			t.Fatal(err)
		}
		clock = fixedNow.Add(5 * time.Second)
		again := job("t", "ok", 2)
		again.RunAt, again.LastError = fixedNow.UnixMilli()+5000, "smtp 451" // as the retried envelope has them
		mustRecord(t, l, "w:2", again)
		clock = fixedNow.Add(6 * time.Second)
		if err := o.Complete(ctx, []queue.Ref{again.Ref()}); err != nil {
			t.Fatal(err)
		}
		if err := o.Bury(ctx, []queue.DeadJob{{Job: dead, Error: "boom"}}); err != nil {
			t.Fatal(err)
		}
		if err := o.CancelRows(ctx, []queue.Ref{cancelled.Ref()}); err != nil {
			t.Fatal(err)
		}
		never := &queue.Job{Topic: "t", ID: "never", MaxAttempts: 25, EnqueuedAt: fixedNow.UnixMilli(), RunAt: fixedNow.UnixMilli() + 60_000}
		if err := o.Cancelled(ctx, []*queue.Job{never}); err != nil {
			t.Fatal(err)
		}
		// A durable job cancelled while it waited: its row had no worker.
		mustSchedule(t, l, "t", queue.NewJob{ID: "waiting", Payload: []byte("p"), MaxAttempts: 3})
		if err := o.CancelRows(ctx, []queue.Ref{{Topic: "t", ID: "waiting", Attempt: 0}}); err != nil {
			t.Fatal(err)
		}
		if rows, _, err := l.History(ctx, HistoryFilter{Topic: "t", ID: "waiting", Limit: 1}); err != nil || len(rows) != 1 ||
			rows[0].Worker != "" || rows[0].Outcome != OutcomeCancelled || rows[0].FirstClaimedAt != 0 {
			t.Fatalf("history of a waiting row cancelled: %+v, %v", rows, err)
		}
		if n := count(t, l); n != 0 {
			t.Fatalf("%d ledger rows left", n)
		}
		want := map[string]HistoryRow{
			"ok": {Topic: "t", JobID: "ok", Outcome: OutcomeSucceeded, Attempts: 2, MaxAttempts: 5, EnqueuedAt: ok.EnqueuedAt,
				DueAt: again.RunAt, FirstClaimedAt: fixedNow.UnixMilli(), ClaimedAt: fixedNow.UnixMilli() + 5000,
				FinishedAt: fixedNow.UnixMilli() + 6000, Worker: "w:2", LastError: "smtp 451"},
			"dead": {Topic: "t", JobID: "dead", Outcome: OutcomeDead, Attempts: 1, MaxAttempts: 5, EnqueuedAt: dead.EnqueuedAt,
				DueAt: dead.RunAt, FirstClaimedAt: fixedNow.UnixMilli(), ClaimedAt: fixedNow.UnixMilli(),
				FinishedAt: fixedNow.UnixMilli() + 6000, Worker: "w:1"},
			"cancelled": {Topic: "t", JobID: "cancelled", Outcome: OutcomeCancelled, Attempts: 1, MaxAttempts: 5,
				EnqueuedAt: cancelled.EnqueuedAt, DueAt: cancelled.RunAt, FirstClaimedAt: fixedNow.UnixMilli(),
				ClaimedAt: fixedNow.UnixMilli(), FinishedAt: fixedNow.UnixMilli() + 6000, Worker: "w:1"},
			"never": {Topic: "t", JobID: "never", Outcome: OutcomeCancelled, MaxAttempts: 25, EnqueuedAt: never.EnqueuedAt,
				DueAt: never.RunAt, FinishedAt: fixedNow.UnixMilli() + 6000},
		}
		for id, w := range want {
			rows, next, err := l.History(ctx, HistoryFilter{Topic: "t", ID: id, Limit: 10})
			if err != nil || len(rows) != 1 || next != "" {
				t.Fatalf("history of %s: %+v, %q, %v", id, rows, next, err)
			}
			got := rows[0]
			got.ID = 0
			if !reflect.DeepEqual(got, w) {
				t.Errorf("history of %s:\n got %+v\nwant %+v", id, got, w)
			}
		}
	})
}

// A topic in Options.NoHistory finishes its jobs without history rows;
// the others keep theirs.
func TestNoHistoryTopics(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{NoHistory: []string{"quiet_t"}})
		// A partition's rows (topic~k.p~n) are its topic's; "_" is no
		// wildcard there, and case counts: quietXt's and Quiet_t's
		// partitions keep their history.
		a, b, p, x := job("quiet_t", "a", 1), job("loud", "a", 1), job("quiet_t~2.1~4", "p", 1), job("quietXt~2.0~1", "x", 1)
		y := job("Quiet_t~2.0~1", "y", 1)
		mustRecord(t, l, "w", a, b, p, x, y)
		if err := opsOf(l).Complete(ctx, []queue.Ref{a.Ref(), b.Ref(), p.Ref(), x.Ref(), y.Ref()}); err != nil {
			t.Fatal(err)
		}
		if err := opsOf(l).Cancelled(ctx, []*queue.Job{{Topic: "quiet_t", ID: "c"}, {Topic: "quiet_t~2.1~4", ID: "d"}}); err != nil {
			t.Fatal(err)
		}
		for topic, want := range map[string]int{"quiet_t": 0, "quiet_t~2.1~4": 0, "loud": 1, "quietXt~2.0~1": 1, "Quiet_t~2.0~1": 1} {
			if rows, _, err := l.History(ctx, HistoryFilter{Topic: topic, Limit: 10}); err != nil || len(rows) != want {
				t.Errorf("history of %s: %d rows (%v), want %d", topic, len(rows), err, want)
			}
		}
	})
}

// History pages by finish time (newest first) or by id (a prefix, an
// exact id), filters by outcome and time, and refuses another listing's
// cursor.
func TestHistorySearch(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		var clock time.Time
		l, _ := newLedger(t, db, Options{Now: func() time.Time { return clock }})
		for i := range 7 {
			clock = fixedNow.Add(time.Duration(i) * time.Second)
			j := job("t", fmt.Sprintf("order:%d", i), 1)
			mustRecord(t, l, "w", j)
			var err error
			if i%3 == 0 {
				err = opsOf(l).Bury(ctx, []queue.DeadJob{{Job: j, Error: "x"}})
			} else {
				err = opsOf(l).Complete(ctx, []queue.Ref{j.Ref()})
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		page := func(f HistoryFilter) (ids []string) {
			t.Helper()
			for range 10 {
				rows, next, err := l.History(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rows {
					ids = append(ids, r.JobID)
				}
				if f.After = next; next == "" {
					return ids
				}
			}
			t.Fatal("more than 10 pages")
			return nil
		}
		if got := fmt.Sprint(page(HistoryFilter{Topic: "t", Limit: 3})); got != "[order:6 order:5 order:4 order:3 order:2 order:1 order:0]" {
			t.Errorf("by time: %s", got)
		}
		if got := fmt.Sprint(page(HistoryFilter{Topic: "t", Outcome: OutcomeDead, Limit: 1})); got != "[order:6 order:3 order:0]" {
			t.Errorf("dead: %s", got)
		}
		if got := fmt.Sprint(page(HistoryFilter{Topic: "t", FinishedFrom: fixedNow.UnixMilli() + 2000, FinishedBefore: fixedNow.UnixMilli() + 4000, Limit: 5})); got != "[order:3 order:2]" {
			t.Errorf("time range: %s", got)
		}
		if got := fmt.Sprint(page(HistoryFilter{Topic: "t", Prefix: "order:", Limit: 2})); got != "[order:0 order:1 order:2 order:3 order:4 order:5 order:6]" {
			t.Errorf("prefix: %s", got)
		}
		_, timeCursor, _ := l.History(ctx, HistoryFilter{Topic: "t", Limit: 1})
		if _, _, err := l.History(ctx, HistoryFilter{Topic: "t", Prefix: "order:", After: timeCursor, Limit: 1}); !errors.Is(err, ErrBadCursor) {
			t.Errorf("a time cursor on a prefix search: %v", err)
		}
		// The cursor's numbers in another spelling: not one History gave.
		for _, bad := range []string{"t~+1~1", "t~1~01", "i~01~order:1", "e~-0~order:1"} {
			if _, _, err := l.History(ctx, HistoryFilter{Topic: "t", After: bad, Limit: 1}); !errors.Is(err, ErrBadCursor) {
				t.Errorf("cursor %q: %v, want ErrBadCursor", bad, err)
			}
		}
		if n, err := l.MarkPurged(ctx, "t", fixedNow.UnixMilli()+3000); err != nil || n != 2 {
			t.Errorf("MarkPurged: %d, %v; want 2 (order:0 and order:3)", n, err)
		}
		if got := fmt.Sprint(page(HistoryFilter{Topic: "t", Outcome: OutcomePurged, Limit: 5})); got != "[order:3 order:0]" {
			t.Errorf("purged: %s", got)
		}
		// One dead job deleted by id: its row only; a succeeded row is left.
		if n, err := l.MarkPurgedID(ctx, "t", "order:6"); err != nil || n != 1 {
			t.Errorf("MarkPurgedID of the dead order:6: %d, %v; want 1", n, err)
		}
		if n, err := l.MarkPurgedID(ctx, "t", "order:5"); err != nil || n != 0 {
			t.Errorf("MarkPurgedID of the succeeded order:5: %d, %v; want 0", n, err)
		}
		if got := fmt.Sprint(page(HistoryFilter{Topic: "t", Outcome: OutcomePurged, Limit: 5})); got != "[order:6 order:3 order:0]" {
			t.Errorf("purged after MarkPurgedID: %s", got)
		}
		if _, err := l.MarkPurgedID(ctx, "t", ""); err == nil {
			t.Error("MarkPurgedID took an empty id")
		}
	})
}

// PurgeHistory deletes what finished before each topic's cutoff, in
// batches, and keeps the rest; a partition's rows keep their topic's.
func TestPurgeHistory(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		longPart := dataplane.PartitionName("long", 2, 1)
		var rows []HistoryRow
		for i := range 2500 {
			for _, topic := range []string{"short", "long", longPart} {
				rows = append(rows, HistoryRow{Topic: topic, JobID: fmt.Sprint("j", i), Outcome: OutcomeSucceeded, FinishedAt: int64(i)})
			}
		}
		if err := l.db.Table(l.historyTable).CreateInBatches(&rows, 500).Error; err != nil {
			t.Fatal(err)
		}
		n, err := l.PurgeHistory(ctx, 2000, map[string]int64{"long": 100})
		if err != nil || n != 2000+100+100 {
			t.Fatalf("purged %d, %v; want 2200", n, err)
		}
		for topic, want := range map[string]int64{"short": 500, "long": 2400, longPart: 2400} {
			var c int64
			l.db.Table(l.historyTable).Where("topic = ?", topic).Count(&c)
			if c != want {
				t.Errorf("%s: %d rows left, want %d", topic, c, want)
			}
		}
	})
}

// PurgeHistoryWith deletes at most Batch rows per statement, reports each
// statement and its commit, rests by Duty, and refuses options out of
// range before it deletes anything.
func TestPurgeHistoryOptions(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		var rows []HistoryRow
		for i := range 250 {
			rows = append(rows, HistoryRow{Topic: "t", JobID: fmt.Sprint("j", i), Outcome: OutcomeSucceeded, FinishedAt: int64(i)})
		}
		if err := l.db.Table(l.historyTable).CreateInBatches(&rows, 500).Error; err != nil {
			t.Fatal(err)
		}
		for _, bad := range []PurgeOptions{{Batch: -1}, {Batch: 10_001}, {Duty: -0.5}, {Duty: 1.5}, {Duty: math.NaN()}} {
			if n, err := l.PurgeHistoryWith(ctx, 1000, nil, bad); err == nil || n != 0 {
				t.Errorf("options %+v: purged %d, %v; want an error and nothing deleted", bad, n, err)
			}
		}
		var sizes []int64
		n, err := l.PurgeHistoryWith(ctx, 1000, nil, PurgeOptions{Batch: 100, Duty: 1, Each: func(rows int64, stmt, commit time.Duration) {
			if stmt <= 0 || commit <= 0 {
				t.Errorf("statement %s, commit %s: want both measured", stmt, commit)
			}
			sizes = append(sizes, rows)
		}})
		if err != nil || n != 250 || fmt.Sprint(sizes) != "[100 100 50]" {
			t.Fatalf("purged %d in %v, %v; want 250 in [100 100 50]", n, sizes, err)
		}
	})
}

// HistoryShards pages through three shards' history, whose ids and
// finished times collide across shards, in History's order with the
// shard last: every row once in each mode (by time, one id, a prefix),
// whatever the page size.
func TestHistoryShardsMergesInOneOrder(t *testing.T) {
	ctx := context.Background()
	var shards []*Ledger
	total := 0
	for s := range 3 {
		var clock time.Time
		l, _ := newLedger(t, testenv.SQLite(t), Options{Now: func() time.Time { return clock }})
		for i := range 3 + s {
			clock = fixedNow.Add(time.Duration(i%2) * time.Second) // finished times shared across shards
			j := job("t", fmt.Sprintf("order:%d", i), 1)           // so are ids and job ids
			mustRecord(t, l, "w", j)
			if err := opsOf(l).Complete(ctx, []queue.Ref{j.Ref()}); err != nil {
				t.Fatal(err)
			}
			total++
		}
		shards = append(shards, l)
	}
	for _, base := range []HistoryFilter{{Topic: "t"}, {Topic: "t", Prefix: "order:"}, {Topic: "t", ID: "order:1"}} {
		want := total
		if base.ID != "" {
			want = 3 // order:1 on each shard
		}
		for _, limit := range []int{1, 2, 4, 100} {
			f := base
			f.Limit = limit
			var got []HistoryRow
			for pages := 0; ; pages++ {
				if pages > total+1 {
					t.Fatalf("%+v: paging does not end", f)
				}
				rows, next, err := HistoryShards(ctx, shards, f)
				if err != nil {
					t.Fatal(err)
				}
				if len(rows) > limit {
					t.Fatalf("%+v: a page of %d", f, len(rows))
				}
				got = append(got, rows...)
				if f.After = next; next == "" {
					break
				}
			}
			if len(got) != want {
				t.Errorf("prefix %q id %q limit %d: %d rows, want %d", base.Prefix, base.ID, limit, len(got), want)
			}
			for k := 1; k < len(got); k++ {
				a, b := got[k-1], got[k]
				ok := a.FinishedAt >= b.FinishedAt
				if base.Prefix != "" {
					ok = a.JobID <= b.JobID
				}
				if !ok {
					t.Errorf("prefix %q id %q limit %d: %s (%d) before %s (%d): out of order", base.Prefix, base.ID, limit, a.JobID, a.FinishedAt, b.JobID, b.FinishedAt)
				}
			}
		}
	}
	if _, _, err := HistoryShards(ctx, shards, HistoryFilter{Topic: "t", Limit: 1, After: "3~t~1~1"}); !errors.Is(err, ErrBadCursor) {
		t.Errorf("a cursor of shard 3 of 3: %v, want ErrBadCursor", err)
	}
}

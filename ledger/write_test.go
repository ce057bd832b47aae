package ledger

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/queue"
)

func TestRecord(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, log := newLedger(t, db, Options{})

		if err := opsOf(l).Record(ctx, nil, "h:1"); err != nil {
			t.Fatalf("empty Record: %v", err)
		}
		if got := log.Take(); len(got) != 0 {
			t.Fatalf("empty Record ran %d statements: %v", len(got), got)
		}

		a, b := job("orders", "a", 1), job("orders", "b", 1)
		b.Payload = nil // no payload: stored as zero bytes (NOT NULL column)
		b.LastError = "previous failure"
		c := job("mail", "a", 3) // same id, other topic: another job
		mustRecord(t, l, "host1:42", a, b, c)

		ra := mustRow(t, l, "orders", "a")
		want := Entry{
			ID: ra.ID, Topic: "orders", JobID: "a", Payload: a.Payload,
			Attempt: 1, MaxAttempts: 5, RunAt: a.RunAt, ClaimedAt: fixedNow.UnixMilli(),
			LeaseUntil: a.LeaseUntil, Worker: "host1:42", State: queue.StateInFlight,
			UpdatedAt: fixedNow.UnixMilli(), EnqueuedAt: a.EnqueuedAt, FirstClaimedAt: fixedNow.UnixMilli(),
		}
		if !equalEntry(ra, want) {
			t.Errorf("row a:\n got %+v\nwant %+v", ra, want)
		}
		if rb := mustRow(t, l, "orders", "b"); len(rb.Payload) != 0 || rb.LastError != "previous failure" {
			t.Errorf("row b: payload %q, last error %q", rb.Payload, rb.LastError)
		}
		if rc := mustRow(t, l, "mail", "a"); rc.Attempt != 3 || rc.ID == ra.ID {
			t.Errorf("row mail/a: attempt %d id %d (orders/a id %d)", rc.Attempt, rc.ID, ra.ID)
		}

		// Claimed again (retry or takeover): the row is rewritten in place.
		a2 := job("orders", "a", 2)
		a2.Payload = []byte("v2")
		a2.LeaseUntil += 5_000
		a2.RunAt += 7
		a2.LastError = "boom"
		a2.EnqueuedAt++ // the job was enqueued once: the row keeps the first value
		mustRecord(t, l, "host2:7", a2)
		got := mustRow(t, l, "orders", "a")
		if got.ID != ra.ID || got.Attempt != 2 || got.Worker != "host2:7" || string(got.Payload) != "v2" ||
			got.LeaseUntil != a2.LeaseUntil || got.RunAt != a2.RunAt || got.LastError != "boom" || got.State != queue.StateInFlight ||
			got.EnqueuedAt != a.EnqueuedAt {
			t.Errorf("re-recorded row: %+v", got)
		}
		if n := count(t, l); n != 3 {
			t.Errorf("count %d, want 3", n)
		}

		// The same job twice in one batch: the last one wins.
		d1, d2 := job("orders", "d", 1), job("orders", "d", 2)
		mustRecord(t, l, "h:1", d1, d2)
		if got := mustRow(t, l, "orders", "d"); got.Attempt != 2 {
			t.Errorf("duplicate in batch: attempt %d, want 2", got.Attempt)
		}

		// Ids and topics are case-sensitive, as in Redis.
		mustRecord(t, l, "h:1", job("orders", "A", 1))
		if got := mustRow(t, l, "orders", "A"); got.Attempt != 1 || mustRow(t, l, "orders", "a").Attempt != 2 {
			t.Errorf("ids differing in case collided")
		}
	})
}

func TestRecordRejectsBadInputAndWritesNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		cases := map[string]struct {
			jobs   []*queue.Job
			worker string
		}{
			"id too long":    {[]*queue.Job{job("t", "ok", 1), job("t", strings.Repeat("x", 201), 1)}, "h:1"},
			"topic too long": {[]*queue.Job{job(strings.Repeat("t", 65), "x", 1)}, "h:1"},
			"empty id":       {[]*queue.Job{job("t", "", 1)}, "h:1"},
			"id not UTF-8":   {[]*queue.Job{job("t", "a\xff", 1)}, "h:1"},
			"nil job":        {[]*queue.Job{job("t", "ok", 1), nil}, "h:1"},
			"worker too long": {
				[]*queue.Job{job("t", "ok", 1)}, strings.Repeat("w", 256)},
		}
		for name, c := range cases {
			if err := opsOf(l).Record(ctx, c.jobs, c.worker); err == nil {
				t.Errorf("%s: accepted", name)
			}
		}
		if n := count(t, l); n != 0 {
			t.Errorf("%d rows written by rejected batches", n)
		}
		// The longest legal values fit on both backends (MySQL would refuse
		// longer ones; characters, not bytes, count).
		long := job(strings.Repeat("é", 64), strings.Repeat("ü", 200), 1)
		mustRecord(t, l, strings.Repeat("w", 255), long)
		mustRow(t, l, long.Topic, long.ID)
	})
}

func TestCompleteIsFencedByAttempt(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		mustRecord(t, l, "h:1", job("t", "a", 1), job("t", "b", 2), job("t", "c", 1), job("u", "a", 1))

		err := opsOf(l).Complete(ctx, []queue.Ref{
			{Topic: "t", ID: "a", Attempt: 1},    // current claim: deleted
			{Topic: "t", ID: "b", Attempt: 1},    // stale claim (row is attempt 2): kept
			{Topic: "t", ID: "gone", Attempt: 1}, // no row: ignored
			{Topic: "u", ID: "a", Attempt: 1},    // same id, other topic: deleted
		})
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		assertRows(t, l, map[string]int{"t/b": 2, "t/c": 1})

		if err := opsOf(l).Complete(ctx, nil); err != nil {
			t.Fatalf("empty Complete: %v", err)
		}
	})
}

func TestExtendNeverShortens(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		a, b, c := job("t", "a", 1), job("t", "b", 3), job("t", "c", 1)
		base := a.LeaseUntil
		mustRecord(t, l, "h:1", a, b, c)

		later := base + 10_000
		// Not fenced: b's ref carries an older attempt and is extended anyway.
		if err := opsOf(l).Extend(ctx, []queue.Ref{a.Ref(), {Topic: "t", ID: "b", Attempt: 1}}, later); err != nil {
			t.Fatalf("Extend: %v", err)
		}
		for id, want := range map[string]int64{"a": later, "b": later, "c": base} {
			if got := mustRow(t, l, "t", id).LeaseUntil; got != want {
				t.Errorf("after Extend to %d: %s lease_until %d, want %d", later, id, got, want)
			}
		}

		// An earlier deadline (a late heartbeat) leaves the lease alone.
		if err := opsOf(l).Extend(ctx, []queue.Ref{a.Ref(), c.Ref()}, base-5_000); err != nil {
			t.Fatalf("Extend earlier: %v", err)
		}
		if got := mustRow(t, l, "t", "a").LeaseUntil; got != later {
			t.Errorf("Extend shortened a's lease: %d, want %d", got, later)
		}
		if got := mustRow(t, l, "t", "c").LeaseUntil; got != base {
			t.Errorf("Extend shortened c's lease: %d, want %d", got, base)
		}
	})
}

func TestMarkRetrying(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		a, b, c, d := job("t", "a", 1), job("t", "b", 2), job("t", "c", 1), job("u", "a", 1)
		mustRecord(t, l, "h:1", a, b, c, d)
		now := fixedNow.UnixMilli()
		longErr := strings.Repeat("ë", maxErrorBytes) // twice the byte limit

		err := opsOf(l).MarkRetrying(ctx, []dataplane.RetryRequest{
			{Ref: a.Ref(), RunAt: now + 1_000, LeaseUntil: now + 31_000, Error: "timeout a"},
			{Ref: queue.Ref{Topic: "t", ID: "b", Attempt: 1}, RunAt: now + 2_000, LeaseUntil: now + 32_000, Error: "stale"},
			{Ref: d.Ref(), RunAt: now + 3_000, LeaseUntil: now + 33_000, Error: "bad \xff\xfe bytes"},
			{Ref: c.Ref(), RunAt: now + 4_000, LeaseUntil: now + 34_000, Error: longErr},
		})
		if err != nil {
			t.Fatalf("MarkRetrying: %v", err)
		}
		ra := mustRow(t, l, "t", "a")
		if ra.State != queue.StateRetrying || ra.RunAt != now+1_000 || ra.LeaseUntil != now+31_000 || ra.LastError != "timeout a" || ra.Attempt != 1 {
			t.Errorf("row a: %+v", ra)
		}
		// Fenced: b's row belongs to attempt 2.
		if rb := mustRow(t, l, "t", "b"); rb.State != queue.StateInFlight || rb.RunAt != b.RunAt || rb.LeaseUntil != b.LeaseUntil || rb.LastError != "" {
			t.Errorf("stale MarkRetrying changed row b: %+v", rb)
		}
		if rd := mustRow(t, l, "u", "a"); rd.State != queue.StateRetrying || rd.RunAt != now+3_000 || rd.LeaseUntil != now+33_000 ||
			rd.LastError != "bad \uFFFD bytes" {
			t.Errorf("row u/a: %+v", rd)
		}
		rc := mustRow(t, l, "t", "c")
		// Exactly the cleaned message: a short first value in the batch must
		// not narrow the column of values the UPDATE joins with.
		if rc.LastError != cleanError(longErr) {
			t.Errorf("row c: last error of %d bytes, want %d", len(rc.LastError), len(cleanError(longErr)))
		}
		if rc.State != queue.StateRetrying || rc.RunAt != now+4_000 || len(rc.LastError) > maxErrorBytes ||
			!utf8.ValidString(rc.LastError) || !strings.HasPrefix(rc.LastError, "ëëë") || !strings.HasSuffix(rc.LastError, "[truncated]") {
			t.Errorf("row c: state %s run_at %d, last error %d bytes, valid %v", rc.State, rc.RunAt, len(rc.LastError), utf8.ValidString(rc.LastError))
		}

		// A retry may shorten the lease (next run is sooner than the old
		// lease): MarkRetrying sets it, unlike Extend.
		if err := opsOf(l).MarkRetrying(ctx, []dataplane.RetryRequest{{Ref: a.Ref(), RunAt: now + 10, LeaseUntil: now + 20, Error: "again"}}); err != nil {
			t.Fatal(err)
		}
		if ra := mustRow(t, l, "t", "a"); ra.LeaseUntil != now+20 || ra.LastError != "again" {
			t.Errorf("second MarkRetrying: %+v", ra)
		}

		// The same job twice: the last mark wins. A job whose row is gone
		// (completed, cancelled) is not brought back.
		if err := opsOf(l).Complete(ctx, []queue.Ref{c.Ref()}); err != nil {
			t.Fatal(err)
		}
		big := int64(1) << 53
		err = opsOf(l).MarkRetrying(ctx, []dataplane.RetryRequest{
			{Ref: a.Ref(), RunAt: 1, LeaseUntil: 2, Error: "first"},
			{Ref: c.Ref(), RunAt: 1, LeaseUntil: 2, Error: "gone"},
			{Ref: a.Ref(), RunAt: big, LeaseUntil: big + 1, Error: "second"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if ra := mustRow(t, l, "t", "a"); ra.RunAt != big || ra.LeaseUntil != big+1 || ra.LastError != "second" {
			t.Errorf("duplicate marks: %+v", ra)
		}
		if _, err := l.Row(ctx, "t", "c"); !errors.Is(err, ErrNotFound) {
			t.Errorf("MarkRetrying recreated a deleted row: %v", err)
		}
	})
}

func TestBury(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		binary := []byte("\x00\x01\xff\xfe\x80 not UTF-8 \xc3\x28 \x00 end\x00")
		a, b, keep := job("t", "a", 5), job("t", "b", 3), job("t", "keep", 1)
		a.Payload = binary
		mustRecord(t, l, "h:1", a, b, keep)
		died := fixedNow.UnixMilli() + 123

		err := opsOf(l).Bury(ctx, []queue.DeadJob{
			{Job: a, Error: "permanent: card declined", DiedAt: died},
			// Not fenced: b's row is attempt 3, this job says 2.
			{Job: &queue.Job{Topic: "t", ID: "b", Attempt: 2, Payload: b.Payload}, Error: "out of attempts", DiedAt: died + 1},
			// No ledger row (died in Redis before any claim was recorded).
			{Job: &queue.Job{Topic: "t", ID: "never", Attempt: 1}, Error: "poison", DiedAt: 0},
		})
		if err != nil {
			t.Fatalf("Bury: %v", err)
		}
		assertRows(t, l, map[string]int{"t/keep": 1})

		dead, err := l.DeadLetters(ctx, "t", 0, died+1_000_000, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(dead) != 3 {
			t.Fatalf("dead letters: %d, want 3: %+v", len(dead), dead)
		}
		// Ordered by died_at: "never" died at 0 → fixedNow.
		byID := map[string]DeadLetter{}
		for _, d := range dead {
			byID[d.JobID] = d
		}
		if d := byID["a"]; !bytes.Equal(d.Payload, binary) || d.LastError != "permanent: card declined" || d.Attempts != 5 || d.DiedAt != died || d.Topic != "t" {
			t.Errorf("dead a: payload %q (want %q), %+v", d.Payload, binary, d)
		}
		if d := byID["b"]; d.Attempts != 2 || d.LastError != "out of attempts" || d.DiedAt != died+1 {
			t.Errorf("dead b: %+v", d)
		}
		if d := byID["never"]; d.DiedAt != fixedNow.UnixMilli() || len(d.Payload) != 0 {
			t.Errorf("dead never: %+v", d)
		}
	})
}

// TestBuryIsAtomic: when the archive INSERT fails, the ledger rows stay.
func TestBuryIsAtomic(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		a := job("t", "a", 1)
		mustRecord(t, l, "h:1", a)
		// Break the archive: the INSERT will fail, and the transaction with it.
		if err := db.Migrator().DropTable(l.DeadLetterTable()); err != nil {
			t.Fatal(err)
		}
		if err := opsOf(l).Bury(ctx, []queue.DeadJob{{Job: a, Error: "x"}}); err == nil {
			t.Fatal("Bury into a missing archive succeeded")
		}
		assertRows(t, l, map[string]int{"t/a": 1})
	})
}

// Lookup gives the queue a row as a RestoreRow: a job a worker holds, one
// waiting for a retry, none.
func TestLookup(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		a, b := job("t", "a", 4), job("t", "b", 1)
		mustRecord(t, l, "h:1", a, b)
		if err := opsOf(l).MarkRetrying(ctx, []dataplane.RetryRequest{{Ref: b.Ref(), RunAt: 7, LeaseUntil: 9, Error: "boom"}}); err != nil {
			t.Fatal(err)
		}
		ra, err := opsOf(l).Lookup(ctx, "t", "a")
		if err != nil || ra == nil || ra.State != queue.StateInFlight || ra.Attempt != 4 || ra.Topic != "t" || ra.ID != "a" ||
			string(ra.Payload) != string(a.Payload) || ra.MaxAttempts != 5 {
			t.Fatalf("Lookup of a held row: %+v, %v", ra, err)
		}
		rb, err := opsOf(l).Lookup(ctx, "t", "b")
		if err != nil || rb == nil || rb.State != queue.StateRetrying || rb.RunAt != 7 || rb.LastError != "boom" || rb.Attempt != 1 {
			t.Fatalf("Lookup of a retrying row: %+v, %v", rb, err)
		}
		if r, err := opsOf(l).Lookup(ctx, "t", "missing"); r != nil || err != nil {
			t.Fatalf("Lookup of a missing row: %+v, %v, want nil, nil", r, err)
		}
	})
}

// assertRows checks the whole ledger: topic/id → attempt.
func assertRows(t *testing.T, l *Ledger, want map[string]int) {
	t.Helper()
	rows, err := l.InFlight(context.Background(), "", 10_000)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, r := range rows {
		got[r.Topic+"/"+r.JobID] = r.Attempt
	}
	if len(got) != len(want) {
		t.Errorf("ledger rows %v, want %v", got, want)
		return
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("ledger rows %v, want %v", got, want)
			return
		}
	}
}

func equalEntry(a, b Entry) bool {
	return bytes.Equal(a.Payload, b.Payload) && reflect.DeepEqual(withoutPayload(a), withoutPayload(b))
}

func withoutPayload(e Entry) Entry { e.Payload = nil; return e }

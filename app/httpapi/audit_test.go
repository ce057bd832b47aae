package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

func TestLedgerAudit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		now := time.Now().UnixMilli()
		past, future := now-60_000, now+3_600_000
		rows := []*queue.Job{
			{Topic: "a", ID: "stuck-1", Payload: []byte("secret payload"), Attempt: 2, MaxAttempts: 5, RunAt: past, LeaseUntil: past},
			{Topic: "a", ID: "running", Payload: []byte("x"), Attempt: 1, MaxAttempts: 5, RunAt: now, LeaseUntil: future},
			{Topic: "b", ID: "stuck-2", Attempt: 1, MaxAttempts: 3, RunAt: past, LeaseUntil: past},
		}
		if err := ledgerops.Of(e.l).Record(testenv.Context(t), rows, "host-7:4242"); err != nil {
			t.Fatal(err)
		}

		r := e.get(t, "/v1/ledger/inflight")
		expect(t, r, http.StatusOK)
		if strings.Contains(string(r.body), "secret payload") {
			t.Fatalf("audit listing shows a payload: %s", r.body)
		}
		p := decode[httpapi.LedgerPage](t, r)
		if len(p.Rows) != 3 {
			t.Fatalf("in flight %+v", p)
		}
		// Rows come by id; the ledger writes a batch in (topic, id) order.
		first := p.Rows[1]
		if first.Topic != "a" || first.JobID != "stuck-1" || first.Worker != "host-7:4242" || first.Attempt != 2 ||
			first.MaxAttempts != 5 || first.LeaseUntil != past || first.State != "in_flight" ||
			first.PayloadSize != len("secret payload") || first.ClaimedAt == 0 || first.ID == 0 {
			t.Fatalf("row %+v", first)
		}
		if p := decode[httpapi.LedgerPage](t, e.get(t, "/v1/ledger/inflight?topic=b")); len(p.Rows) != 1 || p.Rows[0].JobID != "stuck-2" {
			t.Fatalf("in flight of b %+v", p)
		}
		if p := decode[httpapi.LedgerPage](t, e.get(t, "/v1/ledger/inflight?limit=1")); len(p.Rows) != 1 {
			t.Fatalf("in flight, limit 1: %+v", p)
		}

		// Stale: leases that ended before now, paged by id.
		p = decode[httpapi.LedgerPage](t, e.get(t, "/v1/ledger/stale?limit=1"))
		if len(p.Rows) != 1 || p.Rows[0].JobID != "stuck-1" || p.NextAfterID != p.Rows[0].ID {
			t.Fatalf("stale page 1 %+v", p)
		}
		p = decode[httpapi.LedgerPage](t, e.get(t, fmt.Sprintf("/v1/ledger/stale?limit=1&after_id=%d", p.NextAfterID)))
		if len(p.Rows) != 1 || p.Rows[0].JobID != "stuck-2" {
			t.Fatalf("stale page 2 %+v", p)
		}
		p = decode[httpapi.LedgerPage](t, e.get(t, fmt.Sprintf("/v1/ledger/stale?after_id=%d", p.Rows[0].ID)))
		if len(p.Rows) != 0 || p.NextAfterID != 0 {
			t.Fatalf("stale page 3 %+v", p)
		}
		if p := decode[httpapi.LedgerPage](t, e.get(t, fmt.Sprintf("/v1/ledger/stale?older_than=%d", past))); len(p.Rows) != 0 {
			t.Fatalf("stale before %d: %+v", past, p)
		}

		expectError(t, e.get(t, "/v1/ledger/stale?older_than=abc"), http.StatusBadRequest, httpapi.CodeInvalidValue, "older_than")
		expectError(t, e.get(t, "/v1/ledger/stale?after_id=-1"), http.StatusBadRequest, httpapi.CodeInvalidValue, "after_id")
		expectError(t, e.get(t, "/v1/ledger/inflight?limit=5000"), http.StatusBadRequest, httpapi.CodeInvalidValue, "limit")
		expectError(t, e.get(t, "/v1/ledger/inflight?topic=a%7Bb"), http.StatusBadRequest, httpapi.CodeInvalidTopic, "topic")
	})
}

// GET /v1/ledger: filters by state, topic and due time, pages by cursor in
// the documented order, answers the same under its older name, and refuses
// every bad parameter with 400 naming it.
func TestLedgerList(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := testenv.Context(t)
		now := time.Now().UnixMilli()
		const hour = 3_600_000
		if err := ledgerops.Of(e.l).Record(ctx, []*queue.Job{
			{Topic: "a", ID: "running", Attempt: 1, MaxAttempts: 5, RunAt: now - hour, LeaseUntil: now + 60_000},
			{Topic: "b", ID: "running", Attempt: 1, MaxAttempts: 5, RunAt: now, LeaseUntil: now + 60_000},
		}, "host-7:4242"); err != nil {
			t.Fatal(err)
		}
		waiting := []ledger.Entry{
			{Topic: "a", JobID: "s1", State: queue.StateWaiting, RunAt: now + hour, MaxAttempts: 5, Payload: []byte("p"),
				LeaseUntil: ledger.NeverStale}, // as a durable enqueue writes it
			{Topic: "a", JobID: "s2", State: queue.StateWaiting, RunAt: now + 2*hour, MaxAttempts: 5, Payload: []byte{}},
			{Topic: "b", JobID: "s3", State: queue.StateWaiting, RunAt: now + hour/2, MaxAttempts: 5, Payload: []byte{}},
			{Topic: "a", JobID: "r1", State: queue.StateRetrying, RunAt: now - 2*hour, Attempt: 2, MaxAttempts: 5,
				LastError: "boom", Worker: "host-7:4242", Payload: []byte{}},
		}
		if err := e.l.DB().WithContext(ctx).Table(e.l.LedgerTable()).Create(&waiting).Error; err != nil {
			t.Fatal(err)
		}
		list := func(query string) httpapi.LedgerPage {
			t.Helper()
			r := e.get(t, "/v1/ledger?"+query)
			expect(t, r, http.StatusOK)
			if alias := e.get(t, "/v1/ledger/inflight?"+query); alias.status != r.status || string(alias.body) != string(r.body) {
				t.Fatalf("?%s: /v1/ledger/inflight answered %d %s, /v1/ledger %d %s", query, alias.status, alias.body, r.status, r.body)
			}
			return decode[httpapi.LedgerPage](t, r)
		}
		ids := func(p httpapi.LedgerPage) string {
			var out []string
			for _, r := range p.Rows {
				out = append(out, r.Topic+"/"+r.JobID)
			}
			return strings.Join(out, " ")
		}
		for query, want := range map[string]string{
			"":                        "a/running b/running a/s1 a/s2 b/s3 a/r1", // by id
			"topic=a":                 "a/running a/s1 a/s2 a/r1",
			"state=scheduled":         "b/s3 a/s1 a/s2", // by due time
			"state=scheduled&topic=a": "a/s1 a/s2",
			"state=in_flight":         "a/running b/running",
			"state=retrying":          "a/r1",
			fmt.Sprintf("state=scheduled&due_after=%d", now+hour):                              "a/s2",
			fmt.Sprintf("state=scheduled&due_before=%d", now+hour):                             "b/s3",
			fmt.Sprintf("state=retrying&due_before=%d", now-hour):                              "a/r1",
			fmt.Sprintf("due_after=%d&due_before=%d", now-hour-1, now+hour+1):                  "a/running b/running a/s1 b/s3",
			fmt.Sprintf("state=scheduled&topic=b&due_after=%d&due_before=%d", now, now+2*hour): "b/s3",
		} {
			if got := ids(list(query)); got != want {
				t.Errorf("?%s: %s, want %s", query, got, want)
			}
		}
		p := list("state=scheduled")
		if s := p.Rows[1]; s.State != "waiting" || s.PayloadSize != 1 || s.Attempt != 0 || s.RunAt != now+hour || s.LeaseUntil != 0 {
			t.Errorf("scheduled row %+v (a waiting row holds no lease: lease_until 0)", s)
		}
		if raw := e.get(t, "/v1/ledger?state=waiting"); strings.Contains(string(raw.body), "9223372036854775807") {
			t.Errorf("a waiting row's lease shows as the column's sentinel: %s", raw.body)
		}

		// Paging: next_cursor until the last page, which has none even when
		// it is full.
		var got []string
		query := "state=scheduled&limit=1"
		for pages := 0; ; pages++ {
			if pages > 3 {
				t.Fatal("more pages than rows")
			}
			p := list(query)
			got = append(got, ids(p))
			if p.NextCursor == "" {
				break
			}
			query = "state=scheduled&limit=1&cursor=" + p.NextCursor
		}
		if strings.Join(got, " ") != "b/s3 a/s1 a/s2" {
			t.Errorf("pages of one: %q", got)
		}
		if p := list("state=scheduled&limit=3"); p.NextCursor != "" || len(p.Rows) != 3 {
			t.Errorf("a full last page: %+v", p)
		}
		if p := list("limit=4"); p.NextCursor == "" || ids(list("cursor="+p.NextCursor)) != "b/s3 a/r1" {
			t.Errorf("paging by id: %+v", p)
		}

		before := list("limit=1000")
		for _, c := range []struct{ query, code, field string }{
			{"state=running", httpapi.CodeInvalidValue, "state"},
			{"state=IN_PROGRESS", httpapi.CodeInvalidValue, "state"},
			{"state=dead", httpapi.CodeInvalidValue, "state"},
			{"state=", httpapi.CodeInvalidValue, "state"},
			{"state=scheduled&state=retrying", httpapi.CodeInvalidValue, "state"},
			{"topic=a%7Bb", httpapi.CodeInvalidTopic, "topic"},
			{"due_after=-1", httpapi.CodeInvalidValue, "due_after"},
			{"due_after=yesterday", httpapi.CodeInvalidValue, "due_after"},
			{"due_before=0", httpapi.CodeInvalidValue, "due_before"},
			{"due_before=2026-12-01T00:00:00Z", httpapi.CodeInvalidValue, "due_before"},
			{"due_after=5&due_before=5", httpapi.CodeInvalidValue, "due_before"},
			{"due_after=6&due_before=5", httpapi.CodeInvalidValue, "due_before"},
			{"cursor=abc", httpapi.CodeInvalidValue, "cursor"},
			{"cursor=1_0", httpapi.CodeInvalidValue, "cursor"},
			{"cursor=1", httpapi.CodeInvalidValue, "cursor"},
			{"limit=0", httpapi.CodeInvalidValue, "limit"},
			{"limit=1001", httpapi.CodeInvalidValue, "limit"},
			{"after_id=1", httpapi.CodeUnknownField, "after_id"},
		} {
			for _, path := range []string{"/v1/ledger?", "/v1/ledger/inflight?"} {
				expectError(t, e.get(t, path+c.query), http.StatusBadRequest, c.code, c.field)
			}
		}
		if after := list("limit=1000"); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("the ledger changed:\n%+v\n%+v", before, after)
		}
	})
}

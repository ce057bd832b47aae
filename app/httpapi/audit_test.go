package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/testenv"
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
		if err := e.l.Record(testenv.Context(t), rows, "host-7:4242"); err != nil {
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
			first.MaxAttempts != 5 || first.LeaseUntil != past || first.State != "in_progress" ||
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

package httpapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// The job browser's listings (docs/design.md §4.17), one state each: a
// waiting page marks the retries, an in-flight page carries the ledger
// rows' worker and lease, retrying comes from the ledger with its last
// error, dead from the dead set with its reason; a durable topic's SQL
// rows page by keyset.
func TestJobBrowserStates(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := testenv.Context(t)
		for i := range 4 {
			expect(t, e.post(t, "/v1/topics/t/jobs", fmt.Sprintf(`{"id":"j%d","payload":{"n":%d}}`, i, i)), http.StatusAccepted)
		}
		jobs := e.claimAll(t, "t") // j0..j3 in flight
		if err := ledgerops.Of(e.l).Record(ctx, jobs, "host-a:42"); err != nil {
			t.Fatal(err)
		}
		// j0 fails: back in due (attempt 1) and its row retrying.
		runAt := time.Now().Add(time.Hour).UnixMilli()
		retry := []dataplane.RetryRequest{{Ref: jobs[0].Ref(), RunAt: runAt, LeaseUntil: runAt + 60000, Error: "smtp: 451 try later"}}
		if err := ledgerops.Of(e.l).MarkRetrying(ctx, retry); err != nil {
			t.Fatal(err)
		}
		if _, err := e.q.Retry(ctx, retry); err != nil {
			t.Fatal(err)
		}
		// j1 dies.
		if n, _, err := e.q.Bury(ctx, []queue.DeadJob{{Job: jobs[1], Error: "permanent: bad address"}}); err != nil || n != 1 {
			t.Fatalf("bury: %d %v", n, err)
		}
		expect(t, e.post(t, "/v1/topics/t/jobs", `{"id":"fresh","delay_ms":1000}`), http.StatusAccepted)

		w := decode[httpapi.JobPage](t, e.get(t, "/v1/topics/t/jobs?state=waiting"))
		if w.State != "waiting" || w.Total != 2 || len(w.Jobs) != 2 || w.Jobs[0].ID != "fresh" || w.Jobs[0].Retrying ||
			w.Jobs[1].ID != "j0" || !w.Jobs[1].Retrying || w.Jobs[1].LastError != "smtp: 451 try later" || w.Jobs[1].Attempt != 1 {
			t.Fatalf("waiting page %s", e.get(t, "/v1/topics/t/jobs?state=waiting").body)
		}
		f := decode[httpapi.JobPage](t, e.get(t, "/v1/topics/t/jobs?state=in_flight&limit=1"))
		if f.Total != 2 || len(f.Jobs) != 1 || f.NextOffset != 1 || f.Jobs[0].Ledger == nil ||
			f.Jobs[0].Ledger.Worker != "host-a:42" || f.Jobs[0].Ledger.State != "in_flight" || f.Jobs[0].Ledger.ClaimedAt == 0 ||
			f.Jobs[0].Ledger.PayloadSize != 7 || f.Jobs[0].PayloadSize != 7 {
			t.Fatalf("in-flight page %+v", f)
		}
		f2 := decode[httpapi.JobPage](t, e.get(t, "/v1/topics/t/jobs?state=in_flight&offset=1&limit=1"))
		if len(f2.Jobs) != 1 || f2.Jobs[0].ID == f.Jobs[0].ID || f2.NextOffset != 0 || f2.Jobs[0].Ledger == nil {
			t.Fatalf("second in-flight page %+v", f2)
		}
		r := decode[httpapi.JobPage](t, e.get(t, "/v1/topics/t/jobs?state=retrying"))
		if r.Total != -1 || len(r.Jobs) != 1 || r.Jobs[0].ID != "j0" || !r.Jobs[0].Retrying || r.Jobs[0].RunAt != runAt ||
			r.Jobs[0].LastError != "smtp: 451 try later" || r.Jobs[0].Ledger == nil || r.Jobs[0].Ledger.State != "retrying" || r.NextAfter != "" ||
			r.Jobs[0].PayloadSize != len(`{"n":0}`) || r.Jobs[0].Ledger.PayloadSize != len(`{"n":0}`) || r.Jobs[0].Payload != nil {
			t.Fatalf("retrying page %+v", r)
		}
		d := decode[httpapi.JobPage](t, e.get(t, "/v1/topics/t/jobs?state=dead"))
		if d.Total != 1 || d.Jobs[0].ID != "j1" || d.Jobs[0].LastError != "permanent: bad address" || d.Jobs[0].DiedAt == 0 {
			t.Fatalf("dead page %+v", d)
		}
		// The older name of waiting still answers.
		if s := decode[httpapi.JobPage](t, e.get(t, "/v1/topics/t/jobs?state=scheduled")); s.State != "waiting" || s.Total != 2 {
			t.Fatalf("scheduled page %+v", s)
		}
		// One job's page: Redis's view with its ledger row next to it.
		g := decode[httpapi.JobView](t, e.get(t, "/v1/topics/t/jobs/j2"))
		if g.State != "in_flight" || g.Ledger == nil || g.Ledger.Worker != "host-a:42" || g.Ledger.LeaseUntil == 0 || string(g.Payload) != `{"n":2}` {
			t.Fatalf("job j2 %+v", g)
		}
		if g := decode[httpapi.JobView](t, e.get(t, "/v1/topics/t/jobs/fresh")); g.Ledger != nil {
			t.Fatalf("a redis topic's waiting job has no row: %+v", g)
		}
	})
}

// A durable topic: its SQL-only waiting jobs page by keyset, and a prefix
// search (an order's close job by its order number) pages through the
// ledger's (topic, job_id) index byte-wise; a redis topic refuses a prefix.
func TestJobBrowserDurableSearch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		for i := range 5 {
			expect(t, e.post(t, "/v1/topics/d/jobs", fmt.Sprintf(`{"id":"order_close:10%d","delay_ms":%d}`, i, (i+1)*3_600_000)), http.StatusAccepted)
		}
		expect(t, e.post(t, "/v1/topics/d/jobs", `{"id":"Order_close:100","delay_ms":7200000}`), http.StatusAccepted)
		expect(t, e.post(t, "/v1/topics/d/jobs", `{"id":"order_closeX","delay_ms":7200000}`), http.StatusAccepted)

		var ids []string
		after := ""
		for range 5 {
			path := "/v1/topics/d/jobs?state=waiting_sql&limit=3"
			if after != "" {
				path += "&after=" + after
			}
			p := decode[httpapi.JobPage](t, e.get(t, path))
			for _, j := range p.Jobs {
				ids = append(ids, j.ID)
				if j.Ledger == nil || j.Ledger.State != "waiting" || j.State != "waiting" {
					t.Fatalf("waiting_sql job %+v", j)
				}
			}
			if after = p.NextAfter; after == "" {
				break
			}
		}
		if len(ids) != 7 || ids[0] != "order_close:100" || ids[6] != "order_close:104" {
			t.Fatalf("waiting_sql pages: %v", ids)
		}

		ids, after = nil, ""
		for range 5 {
			path := "/v1/topics/d/jobs?prefix=order_close:10&limit=2"
			if after != "" {
				path += "&after=" + after
			}
			p := decode[httpapi.JobPage](t, e.get(t, path))
			if p.Prefix != "order_close:10" || p.State != "" {
				t.Fatalf("prefix page %+v", p)
			}
			for _, j := range p.Jobs {
				ids = append(ids, j.ID)
			}
			if after = p.NextAfter; after == "" {
				break
			}
		}
		if strings.Join(ids, ",") != "order_close:100,order_close:101,order_close:102,order_close:103,order_close:104" {
			t.Fatalf("prefix pages: %v", ids)
		}
		if p := decode[httpapi.JobPage](t, e.get(t, "/v1/topics/d/jobs?prefix=order_close:103")); len(p.Jobs) != 1 || p.Jobs[0].ID != "order_close:103" {
			t.Fatalf("the order's job: %+v", p)
		}
		if p := decode[httpapi.JobPage](t, e.get(t, "/v1/topics/d/jobs?prefix=order_close:9")); len(p.Jobs) != 0 {
			t.Fatalf("no such prefix: %+v", p)
		}
		// The % and _ of LIKE mean nothing here: "_" is a literal.
		if p := decode[httpapi.JobPage](t, e.get(t, "/v1/topics/d/jobs?prefix=order_")); len(p.Jobs) != 6 {
			t.Fatalf("prefix order_: %+v", p)
		}
		// A cursor belongs to its listing: on another topic, state or
		// prefix it would resume at a position that means nothing there.
		sqlCursor := decode[httpapi.JobPage](t, e.get(t, "/v1/topics/d/jobs?state=waiting_sql&limit=1")).NextAfter
		prefixCursor := decode[httpapi.JobPage](t, e.get(t, "/v1/topics/d/jobs?prefix=order_close:10&limit=1")).NextAfter
		if sqlCursor == "" || prefixCursor == "" {
			t.Fatalf("cursors %q %q", sqlCursor, prefixCursor)
		}
		expect(t, e.get(t, "/v1/topics/d/jobs?state=waiting_sql&after="+url.QueryEscape(sqlCursor)), http.StatusOK)
		expect(t, e.get(t, "/v1/topics/d/jobs?prefix=order_close:10&after="+url.QueryEscape(prefixCursor)), http.StatusOK)
		for _, q := range []string{
			"/v1/topics/d2/jobs?state=waiting_sql&after=" + url.QueryEscape(sqlCursor),   // another durable topic
			"/v1/topics/d/jobs?state=retrying&after=" + url.QueryEscape(sqlCursor),       // another state
			"/v1/topics/d/jobs?prefix=order_&after=" + url.QueryEscape(prefixCursor),     // another prefix
			"/v1/topics/d/jobs?state=waiting_sql&after=" + url.QueryEscape(prefixCursor), // a search's cursor
		} {
			expectError(t, e.get(t, q), http.StatusBadRequest, httpapi.CodeInvalidValue, "after")
		}
		e2 := expectError(t, e.get(t, "/v1/topics/t/jobs?prefix=order_close:"), http.StatusBadRequest, httpapi.CodeInvalidValue, "prefix")
		if !strings.Contains(e2.Message, "redis topic") {
			t.Errorf("the refusal of a prefix on a redis topic says %q", e2.Message)
		}
	}, withDurable(time.Hour, "d", "d2"))
}

// Bad parameters of the job browser: each is 400 naming it, nothing read.
func TestJobBrowserBadParams(t *testing.T) {
	e := newEnv(t, embedded, withDurable(time.Hour, "d"))
	for _, c := range []struct{ query, code, field string }{
		{"state=done", httpapi.CodeInvalidValue, "state"},
		{"state=", httpapi.CodeInvalidValue, "state"},
		{"sort=id", httpapi.CodeUnknownField, "sort"},
		{"state=waiting&after=1_1", httpapi.CodeConflictingFields, "after"},
		{"state=dead&after=1_1", httpapi.CodeConflictingFields, "after"},
		{"state=retrying&offset=5", httpapi.CodeConflictingFields, "offset"},
		{"state=retrying&after=nope", httpapi.CodeInvalidValue, "after"},
		{"state=waiting_sql&after=1_0", httpapi.CodeInvalidValue, "after"},
		{"limit=0", httpapi.CodeInvalidValue, "limit"},
		{"limit=1001", httpapi.CodeInvalidValue, "limit"},
		{"offset=-1", httpapi.CodeInvalidValue, "offset"},
		{"prefix=", httpapi.CodeInvalidValue, "prefix"},
		{"prefix=a%25", httpapi.CodeInvalidValue, "prefix"},
		{"prefix=a%20b", httpapi.CodeInvalidValue, "prefix"},
		{"prefix=a&state=waiting", httpapi.CodeConflictingFields, "state"},
		{"prefix=a&offset=1", httpapi.CodeConflictingFields, "offset"},
		{"prefix=a&after=a%2A", httpapi.CodeInvalidValue, "after"},
	} {
		t.Run(c.query, func(t *testing.T) {
			expectError(t, e.get(t, "/v1/topics/d/jobs?"+c.query), http.StatusBadRequest, c.code, c.field)
		})
	}
}

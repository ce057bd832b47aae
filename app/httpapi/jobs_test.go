package httpapi_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

func TestEnqueueAndGet(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		before := time.Now().UnixMilli()
		r := e.post(t, "/v1/topics/orders/jobs", `{"id":"order_close:1","payload":{"order":1,"note":"<b>"},"delay_ms":60000}`)
		expect(t, r, http.StatusAccepted)
		created := decode[httpapi.EnqueueResponse](t, r)
		if created.ID != "order_close:1" || created.Topic != "orders" || created.Duplicate ||
			created.RunAt < before+60000 || created.RunAt > time.Now().UnixMilli()+60000+5000 {
			t.Fatalf("created %+v (sent at %d)", created, before)
		}
		if loc := r.header.Get("Location"); loc != "/v1/topics/orders/jobs/order_close:1" {
			t.Fatalf("Location %q", loc)
		}

		// The same id again: nothing written, the waiting job's due time.
		r = e.post(t, "/v1/topics/orders/jobs", `{"id":"order_close:1","payload":{"other":true}}`)
		expect(t, r, http.StatusOK)
		if dup := decode[httpapi.EnqueueResponse](t, r); !dup.Duplicate || dup.RunAt != created.RunAt {
			t.Fatalf("duplicate %+v, want run_at %d", dup, created.RunAt)
		}

		r = e.get(t, "/v1/topics/orders/jobs/order_close:1")
		expect(t, r, http.StatusOK)
		v := decode[httpapi.JobView](t, r)
		if v.State != "waiting" || v.RunAt != created.RunAt || v.Attempt != 0 || v.MaxAttempts != 25 ||
			v.EnqueuedAt == 0 || v.LeaseUntil != 0 || v.DiedAt != 0 || v.PayloadBase64 != "" {
			t.Fatalf("job %+v", v)
		}
		var got map[string]any
		if err := json.Unmarshal(v.Payload, &got); err != nil || !reflect.DeepEqual(got, map[string]any{"order": 1.0, "note": "<b>"}) {
			t.Fatalf("payload %s (%v)", v.Payload, err)
		}
		if v.PayloadSize != len(`{"order":1,"note":"<b>"}`) {
			t.Fatalf("payload size %d: the payload must be stored as sent", v.PayloadSize)
		}

		// A binary payload, an id with slashes, a due time, max attempts.
		bin := []byte{0, 1, 2, 0xff, '{'}
		runAt := time.Now().Add(time.Hour).UnixMilli()
		body := fmt.Sprintf(`{"id":"shop/7/order:9","payload_base64":%q,"run_at":%d,"max_attempts":3}`,
			base64.StdEncoding.EncodeToString(bin), runAt)
		r = e.post(t, "/v1/topics/orders/jobs", body)
		expect(t, r, http.StatusAccepted)
		if c := decode[httpapi.EnqueueResponse](t, r); c.RunAt != runAt {
			t.Fatalf("run_at %d, want %d", c.RunAt, runAt)
		}
		if loc := r.header.Get("Location"); loc != "/v1/topics/orders/jobs/shop%2F7%2Forder:9" {
			t.Fatalf("Location %q", loc)
		}
		expect(t, e.get(t, r.header.Get("Location")), http.StatusOK)
		v = decode[httpapi.JobView](t, e.get(t, "/v1/topics/orders/jobs/shop/7/order:9"))
		if v.ID != "shop/7/order:9" || v.RunAt != runAt || v.MaxAttempts != 3 || v.Payload != nil || v.PayloadSize != len(bin) {
			t.Fatalf("binary job %+v", v)
		}
		if p, err := base64.StdEncoding.DecodeString(v.PayloadBase64); err != nil || string(p) != string(bin) {
			t.Fatalf("payload_base64 %q (%v)", v.PayloadBase64, err)
		}

		// An id with an empty segment is reachable with its slashes
		// percent-encoded; one with no payload shows neither form.
		expect(t, e.post(t, "/v1/topics/orders/jobs", `{"id":"a//b"}`), http.StatusAccepted)
		v = decode[httpapi.JobView](t, e.get(t, "/v1/topics/orders/jobs/a%2F%2Fb"))
		if v.ID != "a//b" || v.Payload != nil || v.PayloadBase64 != "" || v.PayloadSize != 0 {
			t.Fatalf("job a//b %+v", v)
		}
		// A JSON string payload comes back as that string.
		expect(t, e.post(t, "/v1/topics/orders/jobs", `{"id":"s","payload":"hello"}`), http.StatusAccepted)
		if v := decode[httpapi.JobView](t, e.get(t, "/v1/topics/orders/jobs/s")); string(v.Payload) != `"hello"` {
			t.Fatalf("string payload %s", v.Payload)
		}

		expectError(t, e.get(t, "/v1/topics/orders/jobs/nope"), http.StatusNotFound, httpapi.CodeNotFound, "")
		expectError(t, e.get(t, "/v1/topics/orders/jobs/has%20space"), http.StatusBadRequest, httpapi.CodeInvalidID, "id")
	})
}

func TestGetShowsLeaseAndDeath(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		expect(t, e.post(t, "/v1/topics/t/jobs", `{"id":"held"}`), http.StatusAccepted)
		held := e.claimAll(t, "t")
		v := decode[httpapi.JobView](t, e.get(t, "/v1/topics/t/jobs/held"))
		if v.State != "in_flight" || v.LeaseUntil != held[0].LeaseUntil || v.Attempt != 1 {
			t.Fatalf("in-flight job %+v, want lease until %d", v, held[0].LeaseUntil)
		}
		if _, _, err := e.q.Bury(testenv.Context(t), []queue.DeadJob{{Job: held[0], Error: "card declined"}}); err != nil {
			t.Fatal(err)
		}
		v = decode[httpapi.JobView](t, e.get(t, "/v1/topics/t/jobs/held"))
		if v.State != "dead" || v.DiedAt == 0 || v.LastError != "card declined" || v.LeaseUntil != 0 {
			t.Fatalf("dead job %+v", v)
		}
	})
}

func TestTopicStats(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		expect(t, e.post(t, "/v1/topics/a/jobs", `{"id":"1"}`), http.StatusAccepted)
		expect(t, e.post(t, "/v1/topics/a/jobs", `{"id":"2","delay_ms":3600000}`), http.StatusAccepted)
		expect(t, e.post(t, "/v1/topics/b/jobs", `{"id":"1"}`), http.StatusAccepted)
		e.claimAll(t, "b")

		s := decode[httpapi.TopicStats](t, e.get(t, "/v1/topics/a"))
		if s.Topic != "a" || s.Due != 2 || s.InFlight != 0 || s.Dead != 0 || s.NextDue == 0 || s.Now == 0 {
			t.Fatalf("stats of a %+v", s)
		}
		list := decode[httpapi.TopicList](t, e.get(t, "/v1/topics"))
		if len(list.Topics) != 2 || list.Topics[0].Topic != "a" || list.Topics[1].Topic != "b" || list.Topics[1].InFlight != 1 {
			t.Fatalf("topics %+v", list)
		}
		// A topic nobody used is empty, not missing.
		if s := decode[httpapi.TopicStats](t, e.get(t, "/v1/topics/never")); s.Due != 0 || s.Topic != "never" {
			t.Fatalf("unused topic %+v", s)
		}
		expectError(t, e.get(t, "/v1/topics/bad%7Bname"), http.StatusBadRequest, httpapi.CodeInvalidTopic, "topic")
	})
}

func TestCancel(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := testenv.Context(t)
		expect(t, e.post(t, "/v1/topics/t/jobs", `{"id":"waiting","payload":[1,2],"delay_ms":3600000}`), http.StatusAccepted)
		r := e.del(t, "/v1/topics/t/jobs/waiting")
		expect(t, r, http.StatusOK)
		if v := decode[httpapi.JobView](t, r); v.State != "cancelled" || v.ID != "waiting" || string(v.Payload) != "[1,2]" {
			t.Fatalf("cancelled %+v", v)
		}
		expectError(t, e.del(t, "/v1/topics/t/jobs/waiting"), http.StatusNotFound, httpapi.CodeNotFound, "")
		expectError(t, e.get(t, "/v1/topics/t/jobs/waiting"), http.StatusNotFound, httpapi.CodeNotFound, "")

		// In flight: its run is cancelled (202), the job still held and
		// shown with its cancel asked; asked again, the first time stays.
		// Dead: refused.
		expect(t, e.post(t, "/v1/topics/t/jobs", `{"id":"held"}`), http.StatusAccepted)
		held := e.claimAll(t, "t")
		r = e.del(t, "/v1/topics/t/jobs/held")
		expect(t, r, http.StatusAccepted)
		asked := decode[httpapi.JobView](t, r)
		if asked.State != queue.StateInFlight || asked.CancelRequestedAt <= 0 || asked.LeaseUntil <= 0 || asked.ID != "held" {
			t.Fatalf("cancel of a held job: %+v", asked)
		}
		r = e.get(t, "/v1/topics/t/jobs/held")
		expect(t, r, http.StatusOK)
		if v := decode[httpapi.JobView](t, r); v.State != queue.StateInFlight || v.CancelRequestedAt != asked.CancelRequestedAt {
			t.Fatalf("GET of a job whose cancel was asked: %+v, want in_flight with cancel_requested_at %d", v, asked.CancelRequestedAt)
		}
		r = e.del(t, "/v1/topics/t/jobs/held")
		expect(t, r, http.StatusAccepted)
		if v := decode[httpapi.JobView](t, r); v.CancelRequestedAt != asked.CancelRequestedAt {
			t.Fatalf("asked again: %+v, want the first ask's time %d", v, asked.CancelRequestedAt)
		}
		if _, _, err := e.q.Bury(ctx, []queue.DeadJob{{Job: held[0], Error: "x"}}); err != nil {
			t.Fatal(err)
		}
		expectError(t, e.del(t, "/v1/topics/t/jobs/held"), http.StatusConflict, httpapi.CodeJobDead, "")

		// Waiting for a retry: its ledger row goes too, or the recoverer
		// would bring the job back.
		expect(t, e.post(t, "/v1/topics/t/jobs", `{"id":"retrying"}`), http.StatusAccepted)
		jobs := e.claimAll(t, "t")
		if err := ledgerops.Of(e.l).Record(ctx, jobs, "host:1"); err != nil {
			t.Fatal(err)
		}
		due, err := e.q.Retry(ctx, []dataplane.RetryRequest{{Ref: jobs[0].Ref(), Delay: time.Hour, Error: "timeout"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := ledgerops.Of(e.l).MarkRetrying(ctx, []dataplane.RetryRequest{{Ref: jobs[0].Ref(), RunAt: due[0], LeaseUntil: due[0] + 60000, Error: "timeout"}}); err != nil {
			t.Fatal(err)
		}
		r = e.del(t, "/v1/topics/t/jobs/retrying")
		expect(t, r, http.StatusOK)
		if v := decode[httpapi.JobView](t, r); v.Attempt != 1 || v.LastError != "timeout" {
			t.Fatalf("cancelled retrying job %+v", v)
		}
		if _, err := e.l.Row(ctx, "t", "retrying"); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("ledger row after cancel: %v, want ErrNotFound", err)
		}
	})
}

// TestCancelLedgerOnly covers a job Redis no longer knows but the ledger
// still holds (Redis lost it, or an earlier DELETE failed half way): a row
// waiting for a retry is cancelled; one a worker holds is not.
func TestCancelLedgerOnly(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := testenv.Context(t)
		lease := time.Now().Add(time.Hour).UnixMilli()
		lost := []*queue.Job{
			{Topic: "t", ID: "lost-retrying", Payload: []byte(`{"n":1}`), Attempt: 2, MaxAttempts: 5, RunAt: lease, LeaseUntil: lease},
			{Topic: "t", ID: "lost-running", Attempt: 1, MaxAttempts: 5, RunAt: lease, LeaseUntil: lease},
		}
		if err := ledgerops.Of(e.l).Record(ctx, lost, "host:1"); err != nil {
			t.Fatal(err)
		}
		if err := ledgerops.Of(e.l).MarkRetrying(ctx, []dataplane.RetryRequest{{Ref: lost[0].Ref(), RunAt: lease, LeaseUntil: lease, Error: "e"}}); err != nil {
			t.Fatal(err)
		}
		r := e.del(t, "/v1/topics/t/jobs/lost-retrying")
		expect(t, r, http.StatusOK)
		if v := decode[httpapi.JobView](t, r); v.State != "cancelled" || v.Attempt != 2 || string(v.Payload) != `{"n":1}` {
			t.Fatalf("cancelled %+v", v)
		}
		if _, err := e.l.Row(ctx, "t", "lost-retrying"); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("row after cancel: %v", err)
		}
		expectError(t, e.del(t, "/v1/topics/t/jobs/lost-running"), http.StatusConflict, httpapi.CodeJobInFlight, "")
		if _, err := e.l.Row(ctx, "t", "lost-running"); err != nil {
			t.Fatalf("row of a running job: %v, want kept", err)
		}
	})
}

func TestListJobs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		for i := 0; i < 3; i++ {
			expect(t, e.post(t, "/v1/topics/t/jobs", fmt.Sprintf(`{"id":"now%d","payload":"p"}`, i)), http.StatusAccepted)
		}
		e.claimAll(t, "t")
		for i := 0; i < 3; i++ {
			expect(t, e.post(t, "/v1/topics/t/jobs", fmt.Sprintf(`{"id":"later%d","delay_ms":%d}`, i, (i+1)*60000)), http.StatusAccepted)
		}
		p := decode[httpapi.JobPage](t, e.get(t, "/v1/topics/t/jobs?limit=2"))
		if p.State != "waiting" || p.Total != 3 || len(p.Jobs) != 2 || p.NextOffset != 2 ||
			p.Jobs[0].ID != "later0" || p.Jobs[1].ID != "later1" || p.Jobs[0].RunAt >= p.Jobs[1].RunAt {
			t.Fatalf("scheduled page %+v", p)
		}
		p = decode[httpapi.JobPage](t, e.get(t, "/v1/topics/t/jobs?state=in_flight"))
		if p.Total != 3 || len(p.Jobs) != 3 || p.NextOffset != 0 {
			t.Fatalf("in-flight page %+v", p)
		}
		for _, j := range p.Jobs {
			if j.State != "in_flight" || j.LeaseUntil == 0 || j.Attempt != 1 || j.Payload != nil || j.PayloadSize != 3 {
				t.Fatalf("in-flight job %+v", j)
			}
		}
		if p := decode[httpapi.JobPage](t, e.get(t, "/v1/topics/t/jobs?state=dead")); p.Total != 0 || len(p.Jobs) != 0 {
			t.Fatalf("dead page %+v", p)
		}
		expectError(t, e.get(t, "/v1/topics/t/jobs?state=done"), http.StatusBadRequest, httpapi.CodeInvalidValue, "state")
	})
}

func (e *env) patch(t testing.TB, path, body string) resp {
	t.Helper()
	return e.send(t, req{method: "PATCH", path: path, body: body})
}

func TestReschedule(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := testenv.Context(t)
		expect(t, e.post(t, "/v1/topics/t/jobs", `{"id":"w/1","payload":{"a":1},"delay_ms":3600000}`), http.StatusAccepted)
		before := mustInfo(t, e, "t", "w/1").Score

		r := e.patch(t, "/v1/topics/t/jobs/w/1", `{"shift_ms":-1800000}`)
		expect(t, r, http.StatusOK)
		v := decode[httpapi.RescheduledView](t, r)
		if v.State != "waiting" || v.ID != "w/1" || v.RunAt != before-1800000 || v.PreviousRunAt != before || string(v.Payload) != `{"a":1}` {
			t.Fatalf("shift: %+v", v)
		}
		if got := mustInfo(t, e, "t", "w/1").Score; got != v.RunAt {
			t.Fatalf("Redis has %d, the answer %d", got, v.RunAt)
		}
		at := time.Now().Add(2 * time.Hour).UnixMilli()
		r = e.patch(t, "/v1/topics/t/jobs/w/1", fmt.Sprintf(`{"run_at":%d}`, at))
		expect(t, r, http.StatusOK)
		if v := decode[httpapi.RescheduledView](t, r); v.RunAt != at {
			t.Fatalf("run_at: %+v", v)
		}
		r = e.patch(t, "/v1/topics/t/jobs/w/1", `{"delay_ms":60000}`)
		expect(t, r, http.StatusOK)
		if v := decode[httpapi.RescheduledView](t, r); v.RunAt < time.Now().Add(50*time.Second).UnixMilli() || v.PreviousRunAt != at {
			t.Fatalf("delay_ms: %+v", v)
		}

		// Bad input names the field and moves nothing.
		now := mustInfo(t, e, "t", "w/1").Score
		for _, c := range []struct{ body, code, field string }{
			{`{}`, httpapi.CodeMissingField, "run_at"},
			{`{"run_at":1,"shift_ms":1}`, httpapi.CodeConflictingFields, "shift_ms"},
			{`{"delay_ms":1,"run_at":5}`, httpapi.CodeConflictingFields, "delay_ms"},
			{`{"at":1}`, httpapi.CodeUnknownField, "at"},
			{`{"shift_ms":"1"}`, httpapi.CodeInvalidValue, "shift_ms"},
			{`{"run_at":5}`, httpapi.CodeInvalidRunAt, "run_at"},
			{`{"delay_ms":-1}`, httpapi.CodeInvalidRunAt, "delay_ms"},
			{`{"shift_ms":-9223372036854775808}`, httpapi.CodeInvalidRunAt, "shift_ms"},
			{`{"shift_ms":40000000000}`, httpapi.CodeInvalidRunAt, "shift_ms"},
		} {
			t.Run(c.body, func(t *testing.T) {
				expectError(t, e.patch(t, "/v1/topics/t/jobs/w/1", c.body), http.StatusBadRequest, c.code, c.field)
			})
		}
		expectError(t, e.patch(t, "/v1/topics/t/jobs/a%20b", `{"delay_ms":1}`), http.StatusBadRequest, httpapi.CodeInvalidID, "id")
		if got := mustInfo(t, e, "t", "w/1").Score; got != now {
			t.Fatalf("bad input moved the job from %d to %d", now, got)
		}

		// Unknown, in flight, dead.
		expectError(t, e.patch(t, "/v1/topics/t/jobs/nope", `{"delay_ms":1}`), http.StatusNotFound, httpapi.CodeNotFound, "")
		expect(t, e.post(t, "/v1/topics/t/jobs", `{"id":"held"}`), http.StatusAccepted)
		held := e.claimAll(t, "t")
		expectError(t, e.patch(t, "/v1/topics/t/jobs/held", `{"delay_ms":1}`), http.StatusConflict, httpapi.CodeJobInFlight, "")
		if _, _, err := e.q.Bury(ctx, []queue.DeadJob{{Job: held[0], Error: "x"}}); err != nil {
			t.Fatal(err)
		}
		expectError(t, e.patch(t, "/v1/topics/t/jobs/held", `{"delay_ms":1}`), http.StatusConflict, httpapi.CodeJobDead, "")
	})
}

// Read-only leaves reschedule open, like cancel: it is the application's.
func TestRescheduleReadOnly(t *testing.T) {
	e := newEnv(t, embedded, withReadOnly())
	expect(t, e.post(t, "/v1/topics/t/jobs", `{"id":"a","delay_ms":60000}`), http.StatusAccepted)
	expect(t, e.patch(t, "/v1/topics/t/jobs/a", `{"delay_ms":1000}`), http.StatusOK)
}

func mustInfo(t testing.TB, e *env, topic, id string) *queue.JobInfo {
	t.Helper()
	info, err := e.q.Get(testenv.Context(t), topic, id)
	if err != nil || info.State != queue.StateWaiting {
		t.Fatalf("get %s: %+v, %v", id, info, err)
	}
	return info
}

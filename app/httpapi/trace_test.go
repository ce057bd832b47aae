package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/testenv"
)

// With tracing on, an enqueue keeps the traceparent its request carried,
// one job or a batch; a header that is no valid traceparent (garbage, an
// all-zero trace id, a very long one) is ignored and the enqueue goes on;
// with tracing off no header is kept.
func TestEnqueueKeepsTheRequestsTraceParent(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	post := func(e *env, path, body, traceparent string) int {
		return e.send(t, req{method: "POST", path: path, body: body, header: http.Header{"Traceparent": {traceparent}}}).status
	}
	on := newEnv(t, embedded, func(s *setup) { s.qcfg.Trace = true })
	ctx := testenv.Context(t)
	if code := post(on, "/v1/topics/t/jobs", `{"id":"one","delay_ms":60000}`, tp); code != http.StatusAccepted {
		t.Fatalf("enqueue: %d", code)
	}
	if code := post(on, "/v1/topics/t/jobs:batch", `{"jobs":[{"id":"b1","delay_ms":60000}]}`, tp); code != http.StatusOK {
		t.Fatalf("batch: %d", code)
	}
	for _, id := range []string{"one", "b1"} {
		if got, err := on.rdb.Get(ctx, on.ns+":{t}:tp:"+id).Result(); err != nil || got != tp {
			t.Fatalf("%s's trace: %q %v", id, got, err)
		}
	}
	if v := decode[httpapi.JobView](t, on.get(t, "/v1/topics/t/jobs/one")); v.TraceParent != tp {
		t.Fatalf("the job's view: trace_parent %q, want %q", v.TraceParent, tp)
	}
	for i, bad := range []string{"garbage", "00-" + strings.Repeat("0", 32) + "-00f067aa0ba902b7-01", strings.Repeat("f", 4000)} {
		id := "bad" + string(rune('0'+i))
		if code := post(on, "/v1/topics/t/jobs", `{"id":"`+id+`","delay_ms":60000}`, bad); code != http.StatusAccepted {
			t.Fatalf("enqueue with traceparent %.20q: %d", bad, code)
		}
		if n, _ := on.rdb.Exists(ctx, on.ns+":{t}:tp:"+id).Result(); n != 0 {
			t.Fatalf("an invalid traceparent %.20q was kept", bad)
		}
	}
	off := newEnv(t, embedded)
	if code := post(off, "/v1/topics/t/jobs", `{"id":"quiet","delay_ms":60000}`, tp); code != http.StatusAccepted {
		t.Fatalf("enqueue without tracing: %d", code)
	}
	if n, _ := off.rdb.Exists(ctx, off.ns+":{t}:tp:quiet").Result(); n != 0 {
		t.Fatal("a trace kept with tracing off")
	}
}

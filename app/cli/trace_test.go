package cli

import (
	"strings"
	"testing"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// delayq enqueue --traceparent keeps the trace with the job, directly (with
// tracing.enabled) and through the API (the header); a bad value, or
// tracing off in direct mode, is exit 2 and enqueues nothing.
func TestEnqueueKeepsATraceParent(t *testing.T) {
	e := newCLIEnv(t, "tracing: {enabled: true}\n", queue.Config{Trace: true})
	rdb, ns, on, q, api := e.rdb, e.ns, e.cfg, e.q, e.api
	off := directConfig(t, ns, "")
	ctx := testenv.Context(t)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for id, via := range map[string][]string{"direct": {"--config", on}, "api": {"--api", api}} {
		if code, _, errOut := runCLI(t, append([]string{"enqueue", "t", id, "--delay", "1h", "--traceparent", tp}, via...)...); code != ExitOK {
			t.Fatalf("%s: exit %d: %s", id, code, errOut)
		}
		if got, err := rdb.Get(ctx, ns+":{t}:tp:"+id).Result(); err != nil || got != tp {
			t.Fatalf("%s: the job's trace %q, %v; want %q", id, got, err, tp)
		}
		if code, out, errOut := runCLI(t, append([]string{"get", "t", id}, via...)...); code != ExitOK || !strings.Contains(out, "trace: "+tp) {
			t.Fatalf("get %s: exit %d: %s%s", id, code, out, errOut)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--traceparent", "00-" + strings.Repeat("0", 32) + "-00f067aa0ba902b7-01", "--config", on}, "--traceparent"},
		{[]string{"--traceparent", "nonsense", "--api", api}, "--traceparent"},
		{[]string{"--traceparent", tp, "--config", off}, "tracing.enabled"},
	} {
		code, _, errOut := runCLI(t, append([]string{"enqueue", "t", "refused"}, c.args...)...)
		if code != ExitUsage || !strings.Contains(errOut, c.want) {
			t.Fatalf("%v: exit %d: %s", c.args, code, errOut)
		}
	}
	if n, _ := rdb.Exists(ctx, ns+":{t}:tp:refused").Result(); n != 0 {
		t.Fatal("a refused enqueue kept a trace")
	}
	if info, err := q.Get(ctx, "t", "refused"); err != nil || info.State != queue.StateUnknown {
		t.Fatalf("a refused enqueue wrote the job: %+v %v", info, err)
	}
}

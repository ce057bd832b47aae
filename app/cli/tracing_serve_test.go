package cli_test

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/delayq/delayq/internal/testenv"
)

// An order created through POST /v1/orders with a traceparent header has
// its close job run, in `delayq serve` running in this process, in a span
// of the same trace: the child of the request's span, with the job's
// topic, id, attempt and lateness; the spans go to the process's global
// TracerProvider (tracing.exporter: global), the SDK's in-memory exporter.
//
// Not parallel: it sets the process's global TracerProvider.
func TestServeTracesAnOrdersCloseJob(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	logs := serveAnOrder(t, "{enabled: true, exporter: global}", "00-"+traceID+"-"+parentID+"-01")
	ctx := testenv.Context(t)
	var run sdktrace.ReadOnlySpan
	testenv.WaitFor(ctx, t, "the close job's run span", func() bool {
		for _, s := range exp.GetSpans().Snapshots() {
			if s.Name() == "delayq.run order_close" {
				run = s
				return true
			}
		}
		return false
	}, func() string { return "logs:\n" + logs() })
	if got := run.SpanContext().TraceID().String(); got != traceID {
		t.Fatalf("the run's trace %s, want the order request's %s", got, traceID)
	}
	if got := run.Parent().SpanID().String(); got != parentID || !run.Parent().IsRemote() {
		t.Fatalf("the run's parent %s (remote %t), want the request's span %s", got, run.Parent().IsRemote(), parentID)
	}
	want := map[string]bool{"delayq.topic": false, "delayq.job.id": false, "delayq.attempt": false, "delayq.lateness_ms": false, "delayq.outcome": false}
	for _, a := range run.Attributes() {
		if _, ok := want[string(a.Key)]; ok {
			want[string(a.Key)] = true
		}
	}
	for k, ok := range want {
		if !ok {
			t.Errorf("the run's span has no %s: %v", k, run.Attributes())
		}
	}
}

// With tracing.exporter otlp (the default) the spans go to the collector
// the standard OTEL_EXPORTER_OTLP_ENDPOINT names, over OTLP/HTTP, with the
// service's name from OTEL_SERVICE_NAME.
//
// Not parallel: it sets environment variables.
func TestServeExportsSpansOverOTLP(t *testing.T) {
	got := make(chan *coltracepb.ExportTraceServiceRequest, 16)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if r.URL.Path == "/v1/traces" && proto.Unmarshal(b, &req) == nil {
			got <- &req
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(nil)
	}))
	t.Cleanup(collector.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_SERVICE_NAME", "shop-delayq")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")

	const traceID = "0af7651916cd43dd8448eb211c80319c"
	logs := serveAnOrder(t, "{enabled: true}", "00-"+traceID+"-b7ad6b7169203331-01")
	ctx := testenv.Context(t)
	for {
		select {
		case req := <-got:
			for _, rs := range req.ResourceSpans {
				service := ""
				for _, a := range rs.GetResource().GetAttributes() {
					if a.Key == "service.name" {
						service = a.GetValue().GetStringValue()
					}
				}
				for _, ss := range rs.ScopeSpans {
					for _, s := range ss.Spans {
						if s.Name == "delayq.run order_close" && hex.EncodeToString(s.TraceId) == traceID {
							if service != "shop-delayq" {
								t.Fatalf("service.name %q, want OTEL_SERVICE_NAME's", service)
							}
							return
						}
					}
				}
			}
		case <-ctx.Done():
			t.Fatalf("no span of the order's trace reached the collector; logs:\n%s", logs())
		}
	}
}

// serveAnOrder starts `delayq serve` in the test's process with the orders
// module and tracing (the YAML of its tracing section), and creates an
// order through POST /v1/orders with the traceparent tp and a payment
// window of 300 ms, so that its close job runs at once. It returns serve's
// logs.
func serveAnOrder(t *testing.T, tracing, tp string) func() string {
	t.Helper()
	_, ns := testenv.Redis(t)
	port := testenv.FreePort(t)
	logs := startCommand(t, fmt.Sprintf(`log: {level: warn, format: json}
redis: {mode: single, addrs: [%q], namespace: %q}
sql: {driver: sqlite, sqlite_path: %q}
http: {listen: "127.0.0.1:%d"}
worker: {max_idle: 200ms}
orders: {enabled: true}
tracing: %s
`, redisAddr(), ns, filepath.Join(t.TempDir(), "ledger.db"), port, tracing), "serve")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	ctx := testenv.Context(t)
	testenv.WaitFor(ctx, t, "serve to answer /readyz", func() bool {
		code, _, err := httpGet(base + "/readyz")
		return err == nil && code == 200
	}, func() string { return "logs:\n" + logs() })
	for _, c := range []struct{ method, path, body, tp string }{
		{"PUT", "/v1/products/TEA", `{"stock":10,"price_cents":300}`, ""},
		{"POST", "/v1/orders", `{"items":[{"sku":"TEA","quantity":1}],"payment_window_ms":300,"user":"u1"}`, tp},
	} {
		req, err := http.NewRequestWithContext(ctx, c.method, base+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if c.tp != "" {
			req.Header.Set("Traceparent", c.tp)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, resp.StatusCode, b)
		}
	}
	return logs
}

package httptarget_test

import (
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/jobs/httptarget"
)

// A call made in a run's span carries it as traceparent; one made without
// a span carries none.
func TestRequestForwardsTheRunsSpan(t *testing.T) {
	rc := newReceiver(t, status(200, ""))
	tg := newTarget(t, httptarget.Config{URL: rc.URL})
	ctx, span := sdktrace.NewTracerProvider().Tracer("test").Start(testenv.Context(t), "delayq.run t")
	defer span.End()
	if err := tg.Handle(ctx, job(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := tg.Handle(testenv.Context(t), job(`{}`)); err != nil {
		t.Fatal(err)
	}
	reqs := rc.requests()
	sc := span.SpanContext()
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	if got := reqs[0].header.Get("Traceparent"); got != want {
		t.Fatalf("traceparent %q, want %q", got, want)
	}
	if got := reqs[1].header.Get("Traceparent"); got != "" {
		t.Fatalf("a call outside a span sent traceparent %q", got)
	}
}

package dataplane_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
)

// attr returns the value of span attribute k, "" when it has none.
func attr(s sdktrace.ReadOnlySpan, k string) string {
	for _, a := range s.Attributes() {
		if string(a.Key) == k {
			return a.Value.Emit()
		}
	}
	return ""
}

// A job enqueued in a span runs, each attempt, in a child span of it with
// the job's topic, id, attempt and outcome; the handler's context carries
// that span; a job enqueued without a span runs in a root span; without
// Config.Trace nothing of the enqueue's trace is kept.
func TestRunSpansAreChildrenOfTheEnqueue(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	c, err := dataplane.New(e.rdb, dataplane.Config{Namespace: e.ns, Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	reqCtx, req := tp.Tracer("test").Start(ctx, "POST /orders")
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "once"})
	if _, err := c.Enqueue(reqCtx, "t", dataplane.NewJob{ID: "flaky", MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	req.End()
	if _, err := c.EnqueueBatch(reqCtx, "t", []dataplane.NewJob{{ID: "batch"}}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	inHandler := map[string]trace.SpanContext{}
	obs := &settled{}
	w := newWorker(t, e, dataplane.WorkerConfig{Observer: obs, TracerProvider: tp})
	if err := w.Handle("t", dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		mu.Lock()
		inHandler[j.ID] = trace.SpanContextFromContext(ctx)
		mu.Unlock()
		if j.ID == "flaky" && j.Attempt == 1 {
			return dataplane.RetryAfter(errors.New("not yet"), time.Millisecond)
		}
		return nil
	}), dataplane.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	obs.completed.WaitAtLeast(ctx, t, 3, "three jobs done")
	testenv.WaitFor(ctx, t, "four run spans", func() bool { return len(exp.GetSpans()) >= 5 })

	runs := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range exp.GetSpans().Snapshots() {
		if s.Name() == "delayq.run t" {
			runs[attr(s, "delayq.job.id")] = append(runs[attr(s, "delayq.job.id")], s)
		}
	}
	want := req.SpanContext()
	for _, id := range []string{"flaky", "batch"} {
		for _, s := range runs[id] {
			if s.Parent().SpanID() != want.SpanID() || s.SpanContext().TraceID() != want.TraceID() || s.SpanKind() != trace.SpanKindConsumer {
				t.Errorf("%s's run span: parent %v trace %v kind %v; want the child of %v", id, s.Parent().SpanID(), s.SpanContext().TraceID(), s.SpanKind(), want)
			}
			if attr(s, "delayq.topic") != "t" || attr(s, "delayq.lateness_ms") == "" {
				t.Errorf("%s's run span attributes: %v", id, s.Attributes())
			}
		}
	}
	if f := runs["flaky"]; len(f) != 2 || attr(f[0], "delayq.attempt") != "1" || attr(f[0], "delayq.outcome") != "retry" ||
		attr(f[1], "delayq.attempt") != "2" || attr(f[1], "delayq.outcome") != "succeeded" {
		t.Fatalf("flaky's runs: %d spans %v", len(f), f)
	}
	if o := runs["once"]; len(o) != 1 || o[0].Parent().IsValid() {
		t.Fatalf("a job enqueued outside a span: %v", o)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := inHandler["batch"]; got.SpanID() != runs["batch"][0].SpanContext().SpanID() {
		t.Fatalf("the handler's context carries span %v, want its run's %v", got.SpanID(), runs["batch"][0].SpanContext().SpanID())
	}
	var events []string
	for _, ev := range runs["batch"][0].Events() {
		events = append(events, ev.Name)
	}
	if len(events) != 2 || events[0] != "delayq.claimed" || events[1] != "delayq.settle" {
		t.Fatalf("events %v, want delayq.claimed and delayq.settle", events)
	}

	// Without Config.Trace the enqueue keeps no trace.
	off, err := dataplane.New(e.rdb, dataplane.Config{Namespace: e.ns})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := off.Enqueue(reqCtx, "quiet", dataplane.NewJob{ID: "x", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if n, err := e.rdb.Exists(ctx, e.ns+":{quiet}:tp:x").Result(); err != nil || n != 0 {
		t.Fatalf("a trace key without Config.Trace: %d %v", n, err)
	}
}

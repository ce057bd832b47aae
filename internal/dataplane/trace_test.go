package dataplane_test

import (
	"context"
	"errors"
	"strings"
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
	testenv.WaitFor(ctx, t, "four run spans and the request's", func() bool { return len(exp.GetSpans()) >= 5 })

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
	// The claim's time, on Redis's clock: at or before the run's start
	// (the host's clock, within the test's Redis's offset of a few ms).
	b := runs["batch"][0]
	if claimed := b.Events()[0].Time; claimed.After(b.StartTime().Add(50*time.Millisecond)) || claimed.Before(b.StartTime().Add(-10*time.Second)) {
		t.Fatalf("claimed at %v, the run started at %v", claimed, b.StartTime())
	}
	// The settled jobs' trace keys are gone.
	for _, id := range []string{"once", "flaky", "batch"} {
		if n, _ := e.rdb.Exists(ctx, e.ns+":{t}:tp:"+id).Result(); n != 0 {
			t.Errorf("%s's trace key outlived its job", id)
		}
	}

	// A duplicate's enqueue keeps the job's own trace; a partitioned
	// topic's traces are under their partitions' names.
	if _, err := c.Enqueue(reqCtx, "t", dataplane.NewJob{ID: "later", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	otherCtx, other := tp.Tracer("test").Start(ctx, "a retry")
	other.End()
	if r, err := c.Enqueue(otherCtx, "t", dataplane.NewJob{ID: "later"}); err != nil || !r.Duplicate {
		t.Fatal(r, err)
	}
	if got, _ := e.rdb.Get(ctx, e.ns+":{t}:tp:later").Result(); !strings.Contains(got, req.SpanContext().SpanID().String()) {
		t.Fatalf("a duplicate's enqueue replaced the job's trace: %q", got)
	}
	l, err := c.SetPartitions(ctx, "parts", 4)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Enqueue(reqCtx, "parts", dataplane.NewJob{ID: "p1", Delay: time.Hour})
	if err != nil || res.Duplicate {
		t.Fatal(res, err)
	}
	found := ""
	for _, name := range l.Names("parts") {
		if n, _ := e.rdb.Exists(ctx, e.ns+":{"+name+"}:tp:p1").Result(); n == 1 {
			found = name
		}
	}
	if found == "" {
		t.Fatal("no partition holds p1's trace")
	}
	if info, err := c.Get(ctx, "parts", "p1"); err != nil || info.Job == nil || info.Job.Partition != found {
		t.Fatalf("p1 is in partition %+v (%v), its trace in %s", info, err, found)
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

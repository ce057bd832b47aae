package recoverer_test

import (
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// durableClient gives e a client whose durableTopic is durable, with a
// horizon of a minute, and tracing on with trace.
func (e *renv) durableClient(t *testing.T, trace bool) *dataplane.Client {
	t.Helper()
	c, err := dataplane.New(e.rdb, queue.Config{
		Namespace:       e.ns,
		TopicDurability: map[string]queue.Durability{durableTopic: queue.DurabilityDurable},
		Store:           e.led,
		Horizon:         time.Minute,
		Trace:           trace,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	return c
}

// A durable job's trace survives a Redis data loss: its ledger row keeps
// the enqueue's traceparent, and the relay's reload writes the job's trace
// key back with the job, so its run is still the enqueue's child; a job
// enqueued without a span has none. The recoverer's restore of a job whose
// worker died does the same from its row.
func TestTraceOfADurableJobSurvivesRedisLoss(t *testing.T) {
	e := newREnv(t)
	c := e.durableClient(t, true)
	ctx := testenv.Context(t)
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traced := trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}))
	if _, err := c.EnqueueBatch(traced, durableTopic, []queue.NewJob{
		{ID: "later", Delay: 30 * time.Second}, {ID: "running"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, durableTopic, queue.NewJob{ID: "plain", Delay: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	// A job beyond the horizon waits in SQL only: its trace shows from its
	// row (an outside probe found get showing none).
	if _, err := c.Enqueue(traced, durableTopic, queue.NewJob{ID: "far", Delay: 3 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	if info, err := c.Find(ctx, ledgerops.Of(e.led), durableTopic, "far"); err != nil || !info.SQLOnly || info.Job.TraceParent != tp {
		t.Fatalf("far, in SQL only: %+v %v, want its trace %s", info, err, tp)
	}
	rows := e.scheduledRows(t, durableTopic)
	if rows["later"].Trace != tp || rows["plain"].Trace != "" {
		t.Fatalf("the rows keep traces %q and %q, want %q and none", rows["later"].Trace, rows["plain"].Trace, tp)
	}
	// "running" is claimed and recorded by a worker that then dies.
	cl, err := c.Claim(ctx, durableTopic, 1, time.Millisecond)
	if err != nil || len(cl.Jobs) != 1 || cl.Jobs[0].ID != "running" {
		t.Fatalf("claim: %v %v", cl, err)
	}
	if err := ledgerops.Of(e.led).Record(ctx, cl.Jobs, "dead-worker:1"); err != nil {
		t.Fatal(err)
	}
	r := e.relay(t, recoverer.RelayConfig{})
	e.relayOnce(t, r)

	// Redis loses everything of the namespace: the jobs and their traces.
	e.wipeNamespace(t)
	if rep := e.relayOnce(t, r); !rep.Reload || rep.Reloaded[durableTopic] != 2 {
		t.Fatalf("after the loss: %+v, want later and plain reloaded", rep)
	}
	traceOf := func(id string) string {
		t.Helper()
		info, err := c.Get(ctx, durableTopic, id)
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		return info.Job.TraceParent
	}
	if got := traceOf("later"); got != tp {
		t.Errorf("later's trace after the reload: %q, want %q", got, tp)
	}
	if got := traceOf("plain"); got != "" {
		t.Errorf("plain's trace after the reload: %q, want none", got)
	}
	// The recoverer puts the dead worker's job back from its row, trace
	// and all.
	rec := e.recoverer(t, recoverer.Config{}) // its grace: 2 s past the dead worker's lease
	testenv.WaitFor(ctx, t, "the recoverer restores the dead worker's job", func() bool {
		rep, err := rec.RunOnce(ctx)
		return err == nil && rep.Reenqueued == 1
	})
	if got := traceOf("running"); got != tp {
		t.Errorf("running's trace after its restore: %q, want %q", got, tp)
	}
	cl, err = c.Claim(ctx, durableTopic, 1, time.Minute)
	if err != nil || len(cl.Jobs) != 1 || cl.Jobs[0].ID != "running" {
		t.Fatalf("claim after the restore: %v %v", cl, err)
	}
}

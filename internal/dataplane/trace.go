package dataplane

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Traces (docs/design.md §4.21): an enqueue with Config.Trace keeps the
// W3C traceparent of the span in its context under a key of its own per
// job; a worker with a TracerProvider reads them for the jobs it claimed
// and runs each handler in a child span of it.

// traceKeep is how long a job's trace context outlives its due time if
// nothing deletes it: the settlement of a traced job deletes it (Ack,
// AckCancelled, Cancel, DeleteDead with Config.Trace), so this bounds only
// what a settlement missed (a dead job purged by time, a worker with
// tracing off). A run later than it (a retry or a reschedule more than a
// week out) has no parent.
const traceKeep = 7 * 24 * time.Hour

// tracerName names the tracer of the runs' spans.
const tracerName = "github.com/delayq/delayq"

// traceKey is the key of the trace context of job id of name, a topic's or
// a partition's: that name's hash tag, so that a partition's keys are on
// its node and a claim's keys (one partition's) are read in one MGET.
func traceKey(namespace, name, id string) string {
	return namespace + ":{" + name + "}:tp:" + id
}

// traceParent returns the W3C traceparent of ctx's span, "" when ctx has
// no valid span context.
func traceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return carrier.Get("traceparent")
}

// noteTraces writes the trace context of ctx for jobs of topic before
// they are enqueued (Config.Trace), so that no worker claims one before
// its trace is there; each under its partition's name. SET NX: the trace
// of a job that exists already (a duplicate's enqueue) stays its own.
// Best effort: skipped while pushes are (Redis failed to answer one less
// than PushTimeout ago), and a write that fails skips them for as long, so
// an unreachable Redis delays traced enqueues once, as it delays pushes; a
// job whose trace was not written runs in a span without a parent. A trace
// is never worth a job.
//
// It sets each job's TraceParent first, which a durable topic's ledger row
// keeps (the push after a Redis loss writes the key back): the context's,
// unless the job carries a valid one; none without Config.Trace.
func (c *Client) noteTraces(ctx context.Context, topic string, jobs []NewJob) {
	if !c.cfg.Trace {
		for i := range jobs {
			jobs[i].TraceParent = ""
		}
		return
	}
	tp, traced := traceParent(ctx), false
	for i := range jobs {
		if !validTraceParent(jobs[i].TraceParent) {
			jobs[i].TraceParent = tp
		}
		traced = traced || jobs[i].TraceParent != ""
	}
	if !traced || c.pushesPaused() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.PushTimeout)
	defer cancel()
	nameOf := func(int) string { return topic }
	if l, err := c.enqueueLayout(ctx, topic); err == nil && l.Current() > 1 {
		homes := c.keyHomes(ctx, l, topic, jobs)
		nameOf = func(i int) string {
			if name, ok := homes[i]; ok {
				return name
			}
			return c.route(l, topic, jobs[i].PartitionKey, jobs[i].ID)
		}
	}
	now := time.Now()
	pipe := c.rdb.Pipeline()
	for i := range jobs {
		j := &jobs[i]
		if j.TraceParent == "" {
			continue
		}
		untilDue := j.Delay
		if j.RunAt != 0 {
			untilDue = time.UnixMilli(j.RunAt).Sub(now)
		}
		pipe.SetNX(ctx, traceKey(c.cfg.Namespace, nameOf(i), j.ID), j.TraceParent, traceTTL(untilDue))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		c.pausePushes()
	}
}

// validTraceParent says whether tp is a W3C traceparent of a valid span
// context.
func validTraceParent(tp string) bool {
	if tp == "" {
		return false
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	return trace.SpanContextFromContext(ctx).IsValid()
}

// traceTTL is how long a trace key lives for a job due in untilDue: past
// its due time by traceKeep.
func traceTTL(untilDue time.Duration) time.Duration { return max(untilDue, 0) + traceKeep }

// restoreTraces writes, in pipe, the trace keys of rows that carry one (a
// durable job's ledger row keeps its trace, checked when it was written):
// SET NX, so a key already there stays, and before the restore's scripts
// in the same pipeline, so no worker claims a job restored before its
// trace is there. A row the restore then finds tracked or gone leaves a
// key that expires.
func (c *Client) restoreTraces(ctx context.Context, pipe redis.Pipeliner, rows []RestoreRow) {
	now := time.Now()
	for _, r := range rows {
		if r.TraceParent != "" {
			pipe.SetNX(ctx, traceKey(c.cfg.Namespace, r.Topic, r.ID), r.TraceParent, traceTTL(time.UnixMilli(r.RunAt).Sub(now)))
		}
	}
}

// readTraces sets the TraceParent of claimed jobs from their trace keys:
// one MGET (the jobs of one claim are of one partition). An error leaves
// them without one.
func (c *Client) readTraces(ctx context.Context, jobs []*Job) error {
	if len(jobs) == 0 {
		return nil
	}
	ks := make([]string, len(jobs))
	for i, j := range jobs {
		ks[i] = traceKey(c.cfg.Namespace, j.Topic, j.ID)
	}
	vals, err := c.rdb.MGet(ctx, ks...).Result()
	if err != nil {
		return err
	}
	for i, v := range vals {
		if s, ok := v.(string); ok {
			jobs[i].TraceParent = s
		}
	}
	return nil
}

// traceInfo sets the TraceParent of the job info shows, with Config.Trace:
// the trace its enqueue kept, for an operator to find its runs. Best
// effort: none on an error.
func (c *Client) traceInfo(ctx context.Context, info *JobInfo) {
	if !c.cfg.Trace || info == nil || info.Job == nil {
		return
	}
	if tp, err := c.rdb.Get(ctx, traceKey(c.cfg.Namespace, info.Job.Ref().Topic, info.Job.ID)).Result(); err == nil {
		info.Job.TraceParent = tp
	}
}

// forgetTraces deletes the trace keys of the jobs of refs, which ended
// (with Config.Trace): one round trip, an UNLINK per topic or partition
// (a multi-key command stays within one hash tag, as a cluster needs).
// Best effort: their expiry is the fallback. A ref whose claim no longer
// owned its job (the settlement did nothing) loses its trace too; the
// newer claim read it at its claim.
func (c *Client) forgetTraces(ctx context.Context, refs ...Ref) {
	if !c.cfg.Trace || len(refs) == 0 {
		return
	}
	pipe := c.rdb.Pipeline()
	for name, rs := range byTopic(refs) {
		ks := make([]string, len(rs))
		for i, r := range rs {
			ks[i] = traceKey(c.cfg.Namespace, name, r.ID)
		}
		pipe.Unlink(ctx, ks...)
	}
	_, _ = pipe.Exec(ctx)
}

// runSpan starts the span of a run of j (topic its topic's name), the
// child of its enqueue's span when it has one, in ctx.
func runSpan(ctx context.Context, tp trace.TracerProvider, topic string, j *Job, late time.Duration, claimedAt time.Time) (context.Context, trace.Span) {
	parent := ctx
	if j.TraceParent != "" {
		parent = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": j.TraceParent})
	}
	ctx, span := tp.Tracer(tracerName).Start(parent, "delayq.run "+topic,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("messaging.system", "delayq"),
			attribute.String("messaging.destination.name", topic),
			attribute.String("delayq.topic", topic),
			attribute.String("delayq.job.id", j.ID),
			attribute.Int("delayq.attempt", j.Attempt),
			attribute.Int("delayq.delivery", j.Delivery),
			attribute.Int64("delayq.lateness_ms", late.Milliseconds()),
		))
	if j.Partition != "" {
		span.SetAttributes(attribute.String("delayq.partition", j.Partition))
	}
	span.AddEvent("delayq.claimed", trace.WithTimestamp(claimedAt))
	return ctx, span
}

// endRunSpan ends a run's span with how the run ended: the outcome handed
// to the completer (succeeded, retry, dead, cancelled, released, let go)
// and the handler's error.
func endRunSpan(span trace.Span, outcome string, err error) {
	span.AddEvent("delayq.settle", trace.WithAttributes(attribute.String("delayq.outcome", outcome)))
	span.SetAttributes(attribute.String("delayq.outcome", outcome))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

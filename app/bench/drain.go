package bench

import (
	"context"
	"time"

	"github.com/delayq/delayq/queue"
)

// Drain measures the worker's throughput: Jobs jobs already due, then a
// worker with Concurrency handlers (no-op) starts, every claimed job
// recorded in the ledger before its handler runs. Rate is jobs per second
// from the worker's start to the last job's handler.
//
// With HTTPTarget the handler is an HTTP target (jobs/httptarget, signed)
// on a loopback receiver that answers 200 at once, and Rate counts the
// deliveries the receiver got; the same drain with a no-op handler runs
// right before and after it (Result.NoopBaseline).
func Drain(ctx context.Context, o Options) (Result, error) {
	return run(ctx, "drain", o, drainBody)
}

func drainBody(ctx context.Context, s *sandbox, o Options, r *Result) error {
	const topic = "bench.drain"
	if o.HTTPTarget {
		return withNoopBaseline(ctx, s, o, r, topic, drainPhase)
	}
	return drainPhase(ctx, s, o, topic, false, r)
}

func drainPhase(ctx context.Context, s *sandbox, o Options, topic string, target bool, r *Result) error {
	t := newTracker(o.Jobs, true, false, s.offset)
	if err := s.preload(ctx, topic, o.Jobs, t, nil, o.Progress); err != nil {
		return err
	}
	if err := s.countDurableRows(ctx, r); err != nil {
		return err
	}
	var failed failures
	h, stopTarget, err := s.handlerFor(ctx, o, t, target, &failed)
	if err != nil {
		return err
	}
	defer stopTarget()
	if o.HandlerTime > 0 && !target {
		h = workFor(o.HandlerTime, h)
	}
	before := s.probe(ctx)
	start := time.Now()
	w, err := s.startWorker(ctx, topic, h, o.topicConfig(o.Concurrency))
	if err != nil {
		return err
	}
	done := o.Progress.show(progressName("drain", topic), t.want, t.handled)
	all, waitErr := t.wait(ctx, time.Time{}, o.Stall)
	elapsed := time.Since(start)
	r.Usage = usageBetween(before, s.probe(ctx))
	done()
	if err := w.stop(); err != nil {
		return err
	}
	r.Ledger = w.ledger.stats()
	// The counts run to the worker's stop: its last completions are the
	// drained jobs' too.
	end := s.probe(ctx)
	if waitErr != nil {
		return waitErr
	}
	if !all {
		r.Notes = append(r.Notes, "stalled: no job ran for "+o.Stall.String()+"; the rest count as missing")
	}
	t.tally(r)
	failed.into(r)
	r.Costs = costsBetween(before, end, r.Handled)
	r.Seconds = seconds(elapsed)
	r.Rate, r.Unit = perSecond(r.Handled, elapsed), "jobs/s"
	left, err := s.leftover(ctx, topic)
	r.Leftover = left
	return err
}

// workFor is h after d of work (a sleep, cut short by the run's end).
func workFor(d time.Duration, h queue.Handler) queue.Handler {
	return queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
		return h.Handle(ctx, j)
	})
}

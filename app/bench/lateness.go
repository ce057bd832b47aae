package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq/queue"
)

// Lateness measures how close to their due time jobs run. A worker with
// Concurrency handlers is started first, idle, as in production. Then:
//
//   - by default, Jobs jobs are enqueued with due times spread uniformly
//     over Window, which starts Lead from now (the enqueue must fit in the
//     lead; the run says so when it did not);
//   - with a Delay, one goroutine enqueues Jobs jobs as fast as it can,
//     Batch per call, each due Delay after its own enqueue (the classic
//     "50,000 jobs with a 1 s delay").
//
// Latency is each job's handler start minus its due time; Early counts the
// handlers that started before it. Rate is how many jobs fell due per
// second.
//
// With HTTPTarget the handler is an HTTP target (jobs/httptarget, signed)
// on a loopback receiver that answers 200 at once, and Latency is the
// receiver's arrival time minus the Delayq-Due-At header; the same run
// with a no-op handler runs right before and after it
// (Result.NoopBaseline).
func Lateness(ctx context.Context, o Options) (Result, error) {
	return run(ctx, "lateness", o, latenessBody)
}

func latenessBody(ctx context.Context, s *sandbox, o Options, r *Result) error {
	const topic = "bench.lateness"
	if o.HTTPTarget {
		return withNoopBaseline(ctx, s, o, r, topic, latenessPhase)
	}
	return latenessPhase(ctx, s, o, topic, false, r)
}

func latenessPhase(ctx context.Context, s *sandbox, o Options, topic string, target bool, r *Result) error {
	t := newTracker(o.Jobs, true, true, s.offset)
	var failed failures
	h, stopTarget, err := s.handlerFor(ctx, o, t, target, &failed)
	if err != nil {
		return err
	}
	defer stopTarget()
	w, err := s.startWorker(ctx, topic, h, o.topicConfig(o.Concurrency))
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = w.stop()
		}
	}()

	before := s.probe(ctx)
	var firstDue, lastDue int64 // Unix ms, Redis clock
	if o.Delay == 0 {
		now, err := s.redisNowMs(ctx)
		if err != nil {
			return err
		}
		firstDue = now + o.Lead.Milliseconds()
		span := o.Window.Milliseconds()
		lastDue = firstDue + int64(o.Jobs-1)*span/int64(o.Jobs)
		loadStart := time.Now()
		err = s.preload(ctx, topic, o.Jobs, t, func(k int, j *queue.NewJob) {
			j.RunAt = firstDue + int64(k)*span/int64(o.Jobs)
		}, o.Progress)
		if err != nil {
			return err
		}
		if took := time.Since(loadStart); took > o.Lead {
			r.Notes = append(r.Notes, fmt.Sprintf("enqueueing took %s, longer than the lead %s: the first jobs were due before they were enqueued", took.Round(time.Millisecond), o.Lead))
		}
	} else {
		first, last, took, err := s.enqueueDelayed(ctx, topic, o)
		if err != nil {
			return err
		}
		firstDue, lastDue = first, last
		r.Notes = append(r.Notes, fmt.Sprintf("one goroutine enqueued the %d jobs in %s (%.0f jobs/s), so they fell due at that rate",
			o.Jobs, took.Round(time.Millisecond), perSecond(o.Jobs, took)))
	}

	// Wait until the last due time has passed before stalls count.
	quietUntil := time.UnixMilli(lastDue - s.offset/1000)
	done := o.Progress.show(progressName("lateness", topic), t.want, t.handled)
	all, waitErr := t.wait(ctx, quietUntil, o.Stall)
	r.Usage = usageBetween(before, s.probe(ctx))
	done()
	stopped = true
	if err := w.stop(); err != nil {
		return err
	}
	r.Ledger = w.ledger.stats()
	// The counts run to the worker's stop: its last completions are the
	// jobs' too.
	end := s.probe(ctx)
	if waitErr != nil {
		return waitErr
	}
	if !all {
		r.Notes = append(r.Notes, "stalled: no job ran for "+o.Stall.String()+" after the last due time; the rest count as missing")
	}
	t.tally(r)
	failed.into(r)
	r.Costs = costsBetween(before, end, r.Handled)
	window := time.Duration(lastDue-firstDue) * time.Millisecond
	r.Seconds = seconds(window)
	r.Rate, r.Unit = perSecond(o.Jobs, max(window, time.Millisecond)), "due/s"
	r.Latency, r.LatencyOf = latencyOf(t.lateness()), "handler start - due time"
	if target {
		r.LatencyOf = "receiver arrival - due time"
	}
	left, err := s.leftover(ctx, topic)
	r.Leftover = left
	return err
}

// enqueueDelayed enqueues the jobs from one goroutine, Batch per call, each
// due o.Delay after its enqueue. It returns the first and last due times
// (Redis clock, Unix ms) and how long the enqueueing took.
func (s *sandbox) enqueueDelayed(ctx context.Context, topic string, o Options) (first, last int64, took time.Duration, err error) {
	var sent atomic.Int64
	done := o.Progress.show("enqueue", int64(o.Jobs), sent.Load)
	defer done()
	payload := []byte(payloadJSON)
	batch := make([]queue.NewJob, 0, o.Batch)
	start := time.Now()
	note := func(runAt int64) {
		if first == 0 || runAt < first {
			first = runAt
		}
		last = max(last, runAt)
	}
	for lo := 0; lo < o.Jobs; lo += o.Batch {
		hi := min(lo+o.Batch, o.Jobs)
		if o.Batch == 1 {
			res, err := s.q.Enqueue(ctx, topic, queue.NewJob{ID: jobID(lo), Payload: payload, Delay: o.Delay})
			if err != nil {
				return 0, 0, 0, fmt.Errorf("bench: enqueue %s: %w", jobID(lo), err)
			}
			if res.Duplicate {
				return 0, 0, 0, fmt.Errorf("bench: enqueue %s: a duplicate in a fresh namespace", jobID(lo))
			}
			note(res.RunAt)
		} else {
			batch = batch[:0]
			for k := lo; k < hi; k++ {
				batch = append(batch, queue.NewJob{ID: jobID(k), Payload: payload, Delay: o.Delay})
			}
			res, err := s.q.EnqueueBatch(ctx, topic, batch)
			if err != nil {
				return 0, 0, 0, fmt.Errorf("bench: enqueue %s-%s: %w", jobID(lo), jobID(hi-1), err)
			}
			for _, br := range res {
				if br.Status != queue.BatchCreated {
					return 0, 0, 0, fmt.Errorf("bench: enqueue %s: %s %v", br.ID, br.Status, br.Err)
				}
				note(br.RunAt)
			}
		}
		sent.Add(int64(hi - lo))
	}
	return first, last, time.Since(start), nil
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/delayq/delayq/queue"
	"go.opentelemetry.io/otel/trace"
)

// payloadJSON is every bench job's payload: a small JSON document, the
// size of an order-close job's.
const payloadJSON = `{"order_no":"202611300001","user":42}`

// preloadBatch and preloadWorkers: how the jobs a measured phase needs in
// place beforehand are enqueued (not measured).
const (
	preloadBatch   = 1000
	preloadWorkers = 4
)

// preload enqueues jobs 0..n-1 of topic in batches, setting each one's
// fields with set (nil: due now), and marks them accepted in t unless t
// counts every job anyway. Any failure or duplicate fails it: a measured
// phase must start from exactly the jobs it thinks it has.
func (s *sandbox) preload(ctx context.Context, topic string, n int, t *tracker, set func(k int, j *queue.NewJob), p Progress) error {
	var accept func(k int)
	if t.accepted != nil {
		accept = t.accept
	}
	return s.load(ctx, topic, loadSpec{n: n, workers: preloadWorkers, batch: preloadBatch, set: set, accept: accept}, p)
}

// loadSpec says what load enqueues: jobs 0..n-1, from workers goroutines,
// batch per EnqueueBatch call, each one's fields set by set (nil: due now),
// each accepted one passed to accept (nil: none).
type loadSpec struct {
	n, workers, batch int
	set               func(k int, j *queue.NewJob)
	accept            func(k int)
	label             string // the progress bar's; default "loading jobs"
}

// load enqueues the jobs of l to topic. Any failure or duplicate fails it.
func (s *sandbox) load(ctx context.Context, topic string, l loadSpec, p Progress) error {
	if s.tracer != nil {
		// Every job enqueued in a span, as a traced service's would be.
		var span trace.Span
		ctx, span = s.tracer.Tracer("delayq-bench").Start(ctx, "bench load")
		defer span.End()
	}
	n, set, size := l.n, l.set, l.batch
	var next, loaded atomic.Int64
	label := l.label
	if label == "" {
		label = "loading jobs"
	}
	done := p.show(label, int64(n), loaded.Load)
	defer done()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for range l.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := make([]queue.NewJob, 0, size)
			payload := []byte(payloadJSON)
			for ctx.Err() == nil {
				lo := int(next.Add(int64(size))) - size
				if lo >= n {
					return
				}
				hi := min(lo+size, n)
				batch = batch[:0]
				for k := lo; k < hi; k++ {
					j := queue.NewJob{ID: jobID(k), Payload: payload}
					if s.priorities {
						j.Priority = k % (queue.MaxPriority + 1)
					}
					if s.orderingKeys > 0 {
						j.OrderingKey = orderingKeyOf(k % s.orderingKeys)
					}
					if set != nil {
						set(k, &j)
					}
					batch = append(batch, j)
				}
				res, err := s.q.EnqueueBatch(ctx, topic, batch)
				if err != nil {
					cancel(fmt.Errorf("bench: load jobs %d-%d: %w", lo, hi-1, err))
					return
				}
				for i, r := range res {
					if r.Status != queue.BatchCreated {
						cancel(fmt.Errorf("bench: load job %s: %s %v", r.ID, r.Status, r.Err))
						return
					}
					if l.accept != nil {
						l.accept(lo + i)
					}
				}
				loaded.Add(int64(hi - lo))
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// orderingKeyOf names the k-th ordering key of a run (Env.OrderingKeys).
func orderingKeyOf(k int) string { return "key:" + strconv.Itoa(k) }

package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq/queue"
)

// Enqueue measures the enqueue path: Jobs jobs, due at once, from
// Concurrency goroutines, one per Enqueue call (Batch 1) or Batch per
// EnqueueBatch call, as fast as they go or paced to Rate jobs/s in all. Rate is accepted jobs per second of the enqueue phase;
// Latency is per call. A worker then handles every accepted job, to count
// missing ones and duplicates.
func Enqueue(ctx context.Context, o Options) (Result, error) {
	return run(ctx, "enqueue", o, enqueueBody)
}

func enqueueBody(ctx context.Context, s *sandbox, o Options, r *Result) error {
	const topic = "bench.enqueue"
	n := o.Jobs
	t := newTracker(n, false, false, s.offset)
	var next, sent, calls atomic.Int64
	var fails failures
	lats := make([][]int64, o.Concurrency)

	s.measureBaseline(ctx, o, r)
	done := o.Progress.show("enqueue", int64(n), sent.Load)
	before := s.probe(ctx)
	start := time.Now()
	var wg sync.WaitGroup
	for g := range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]int64, 0, n/o.Concurrency/o.Batch+1)
			payload := []byte(payloadJSON)
			batch := make([]queue.NewJob, 0, o.Batch)
			for ctx.Err() == nil {
				lo := int(next.Add(int64(o.Batch))) - o.Batch
				if lo >= n {
					break
				}
				hi := min(lo+o.Batch, n)
				if o.Rate > 0 {
					// Paced: job lo leaves at lo/Rate after the start.
					time.Sleep(time.Until(start.Add(time.Duration(float64(lo) / o.Rate * float64(time.Second)))))
				}
				t0 := time.Now()
				if o.Batch == 1 {
					res, err := s.q.Enqueue(ctx, topic, queue.NewJob{ID: jobID(lo), Payload: payload})
					lat = append(lat, time.Since(t0).Microseconds())
					switch {
					case err != nil:
						fails.add(err.Error())
					case res.Duplicate:
						fails.add("duplicate")
					default:
						t.accept(lo)
						calls.Add(1)
					}
				} else {
					batch = batch[:0]
					for k := lo; k < hi; k++ {
						batch = append(batch, queue.NewJob{ID: jobID(k), Payload: payload})
					}
					res, err := s.q.EnqueueBatch(ctx, topic, batch)
					lat = append(lat, time.Since(t0).Microseconds())
					if err != nil {
						fails.add(err.Error())
					} else {
						calls.Add(1)
					}
					for i, br := range res {
						if br.Status == queue.BatchCreated {
							t.accept(lo + i)
						} else {
							fails.add(string(br.Status))
						}
					}
				}
				sent.Add(int64(hi - lo))
			}
			lats[g] = lat
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	after := s.probe(ctx)
	r.Usage = usageBetween(before, after)
	done()
	if err := ctx.Err(); err != nil {
		return err
	}
	s.finishBaseline(ctx, o, r)
	t.seal()
	fails.into(r)

	var all []int64
	for _, l := range lats {
		all = append(all, l...)
	}
	r.Seconds = seconds(elapsed)
	r.Rate, r.Unit = perSecond(int(t.want), elapsed), "jobs/s"
	r.Usage.setPerJob(int(t.want), r.Seconds)
	r.Costs = costsBetween(before, after, int(t.want))
	setRatio(r, int(calls.Load()))
	noteOtherClients(r, int(calls.Load()))
	r.Latency, r.LatencyOf = latencyOf(all), "enqueue call"
	if err := s.countDurableRows(ctx, r); err != nil {
		return err
	}
	return s.handleAll(ctx, topic, t, o, r)
}

package bench

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq/app/httpapi"
)

// HTTP measures the API's enqueue endpoint (POST /v1/topics/{topic}/jobs):
// the API is served in this process on a loopback port, with its default
// limits, and Concurrency client connections (lean HTTP/1.1 keep-alive
// clients, see rawClient) send one job per request for Duration (at most
// Jobs requests). Rate is accepted requests (202) per
// second; Latency is per request. A worker then handles every accepted job,
// which proves each one exists.
func HTTP(ctx context.Context, o Options) (Result, error) {
	return run(ctx, "http", o, httpBody)
}

func httpBody(ctx context.Context, s *sandbox, o Options, r *Result) error {
	const topic = "bench.http"
	h, err := httpapi.New(httpapi.Deps{Queue: s.q, Ledger: s.led, Logger: s.log})
	if err != nil {
		return err
	}
	addr, stop, err := serveLoopback(ctx, h)
	if err != nil {
		return err
	}
	defer stop()
	path := "/v1/topics/" + topic + "/jobs"

	limit := int64(o.Jobs)
	var seq, answered atomic.Int64
	var fails failures
	accepted := make([][]int, o.Concurrency)
	lats := make([][]int64, o.Concurrency)
	// The baselines first: the load's Duration starts after them.
	s.measureBaseline(ctx, o, r)
	httpBefore := s.httpBaseline(ctx, o, r)
	load, stopLoad := context.WithTimeout(ctx, o.Duration)
	defer stopLoad()

	done := o.Progress.show("http", -1, answered.Load)
	before := s.probe(ctx)
	start := time.Now()
	var wg sync.WaitGroup
	for g := range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newRawClient(addr, path)
			defer c.close()
			var body []byte
			for load.Err() == nil {
				k := seq.Add(1) - 1
				if k >= limit {
					return
				}
				body = append(body[:0], `{"id":"`...)
				body = append(body, 'j')
				body = strconv.AppendInt(body, k, 10)
				body = append(body, `","payload":`...)
				body = append(body, payloadJSON...)
				body = append(body, '}')
				// The request outlives the load's deadline: one in flight
				// then is answered and counted, not cut off.
				t0 := time.Now()
				code, err := c.post(ctx, body)
				if err != nil {
					fails.add("transport: " + innermost(err).Error())
					continue
				}
				lats[g] = append(lats[g], time.Since(t0).Microseconds())
				answered.Add(1)
				if code == http.StatusAccepted {
					accepted[g] = append(accepted[g], int(k))
				} else {
					fails.add("HTTP " + strconv.Itoa(code))
				}
			}
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
	httpAfter := s.httpBaseline(ctx, o, r)
	s.finishBaseline(ctx, o, r)
	if b := r.Baseline; b != nil {
		b.Before.EmptyHTTP, b.After.EmptyHTTP = httpBefore, httpAfter
		b.EmptyHTTP = (httpBefore + httpAfter) / 2
		if httpBefore == 0 || httpAfter == 0 {
			b.EmptyHTTP = max(httpBefore, httpAfter)
		}
	}

	t := newTracker(int(min(seq.Load(), limit)), false, false, s.offset)
	var all []int64
	for g := range o.Concurrency {
		for _, k := range accepted[g] {
			t.accept(k)
		}
		all = append(all, lats[g]...)
	}
	t.seal()
	fails.into(r)
	r.Seconds = seconds(elapsed)
	r.Rate, r.Unit = perSecond(int(t.want), elapsed), "req/s"
	r.Usage.setPerJob(int(t.want), r.Seconds)
	r.Costs = costsBetween(before, after, int(t.want))
	setRatio(r, int(t.want))
	noteOtherClients(r, int(t.want))
	r.Latency, r.LatencyOf = latencyOf(all), "request"
	if err := s.countDurableRows(ctx, r); err != nil {
		return err
	}
	return s.handleAll(ctx, topic, t, o, r)
}

// innermost unwraps err to its root cause, whose text names the failure
// without the addresses and ports that would make every error distinct.
func innermost(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

// httpBaseline measures emptyHTTPRate for the run's connections; a failure
// becomes a note and a 0 rate.
func (s *sandbox) httpBaseline(ctx context.Context, o Options, r *Result) float64 {
	v, err := emptyHTTPRate(ctx, o.Concurrency, o.BaselineFor)
	if err != nil {
		r.Notes = append(r.Notes, err.Error())
		return 0
	}
	return v
}

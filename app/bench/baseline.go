package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/queue"
)

// Rates are the machine's own Redis round-trip rates, each measured back to
// back for a while: what the measured figure is judged against on a
// machine whose speed changes from one minute to the next.
type Rates struct {
	// Ping is PINGs per second on one connection of its own.
	Ping float64 `json:"ping_per_s"`
	// EvalSha is an empty script (`return 1`, loaded once) run with
	// EVALSHA per second on one connection of its own: the most one
	// goroutine doing one script call at a time can reach.
	EvalSha float64 `json:"evalsha_per_s"`
	// EvalShaC is the same empty EVALSHA from C goroutines over the
	// client's pool, per second: what Redis and this client do for C
	// callers. Only for runs with C > 1.
	EvalShaC float64 `json:"evalsha_c_per_s,omitempty"`
	// EmptyHTTP is, for the http scenario, requests per second to an
	// empty route (emptyHTTPRate) with the run's connections: the speed
	// limit of an HTTP request on this machine, and the http run's RATIO
	// is taken against it.
	EmptyHTTP float64 `json:"empty_http_per_s,omitempty"`
	// RedisTopic is, for a durable run, jobs per second of the same
	// enqueue (C goroutines, the run's batch) to a redis topic of the
	// sandbox: what the durable figure costs against the enqueue it
	// replaces, in the same minute.
	RedisTopic float64 `json:"redis_topic_jobs_per_s,omitempty"`
}

// Baseline is the round-trip rates measured right before and right after
// a run's measured phase, and their mean.
type Baseline struct {
	Rates // the mean of Before and After
	// Concurrency is C, the goroutines of EvalShaC: the run's own
	// concurrency (enqueue goroutines, HTTP connections).
	Concurrency int   `json:"concurrency"`
	Before      Rates `json:"before"`
	After       Rates `json:"after"`
	// Embedded says Redis is an in-process miniredis: the rates are then
	// function calls over loopback to this process, not a Redis server's.
	Embedded bool `json:"embedded,omitempty"`
}

// limit is the empty script's rate a run's calls are compared with: one
// connection for one goroutine, C goroutines over the pool for more.
func (b *Baseline) limit() float64 {
	if b.EmptyHTTP > 0 {
		return b.EmptyHTTP
	}
	if b.Concurrency > 1 {
		return b.EvalShaC
	}
	return b.EvalSha
}

// emptyScript is the script whose EVALSHA rate is the speed limit of a
// script call: no keys, no work.
const emptyScript = "return 1"

// baseline measures the round-trip rates for concurrency goroutines, each
// rate for d.
func baseline(ctx context.Context, rdb redis.UniversalClient, concurrency int, d time.Duration) (Rates, error) {
	script := redis.NewScript(emptyScript)
	if err := script.Load(ctx, rdb).Err(); err != nil {
		return Rates{}, fmt.Errorf("bench: baseline: load the empty script: %w", err)
	}
	var r Rates
	var err error
	if r.Ping, err = oneConnRate(ctx, rdb, d, func(c conn) error { return c.Ping(ctx).Err() }); err != nil {
		return r, fmt.Errorf("bench: baseline: PING: %w", err)
	}
	if r.EvalSha, err = oneConnRate(ctx, rdb, d, func(c conn) error { return script.EvalSha(ctx, c, nil).Err() }); err != nil {
		return r, fmt.Errorf("bench: baseline: EVALSHA: %w", err)
	}
	if concurrency > 1 {
		if r.EvalShaC, err = poolRate(ctx, concurrency, d, func() error { return script.EvalSha(ctx, rdb, nil).Err() }); err != nil {
			return r, fmt.Errorf("bench: baseline: EVALSHA from %d goroutines: %w", concurrency, err)
		}
	}
	return r, nil
}

// conn is one connection to Redis (or, on a Cluster, the client itself).
type conn interface {
	redis.Scripter
	Ping(ctx context.Context) *redis.StatusCmd
	Close() error
}

// oneConnRate runs call back to back on a connection of its own for d and
// returns the calls per second. A connection of its own, so the pool's
// other connections are not counted and nothing else shares this one.
func oneConnRate(ctx context.Context, rdb redis.UniversalClient, d time.Duration, call func(conn) error) (float64, error) {
	var c conn = nopCloser{rdb}
	if cl, ok := rdb.(*redis.Client); ok {
		c = cl.Conn()
	}
	defer c.Close()
	n, start := 0, time.Now()
	for end := start.Add(d); time.Now().Before(end); n++ {
		if err := call(c); err != nil {
			return 0, err
		}
	}
	return perSecond(n, time.Since(start)), nil
}

// poolRate runs call back to back from concurrency goroutines for d and
// returns the calls per second, all goroutines together.
func poolRate(ctx context.Context, concurrency int, d time.Duration, call func() error) (float64, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	counts := make([]int, concurrency)
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for g := range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(end) {
				if err := call(); err != nil {
					cancel(err)
					return
				}
				counts[g]++
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return 0, err
	}
	n := 0
	for _, c := range counts {
		n += c
	}
	return perSecond(n, elapsed), nil
}

// measureBaseline measures the rates before a run's measured phase, into
// r.Baseline; finishBaseline measures them after and takes the mean. A
// baseline that fails becomes a note: the run's own figures still stand.
func (s *sandbox) measureBaseline(ctx context.Context, o Options, r *Result) {
	before, err := baseline(ctx, s.env.Redis, o.Concurrency, o.BaselineFor)
	if err != nil {
		r.Notes = append(r.Notes, err.Error())
		return
	}
	before.RedisTopic = s.redisTopicBaseline(ctx, o, r, "before")
	r.Baseline = &Baseline{Rates: before, Concurrency: o.Concurrency, Before: before, Embedded: embeddedRedis(ctx, s.env.Redis)}
	if r.Baseline.Embedded {
		r.Notes = append(r.Notes, "baseline rates measured on the embedded miniredis (in process), not on a Redis server")
	}
}

func (s *sandbox) finishBaseline(ctx context.Context, o Options, r *Result) {
	b := r.Baseline
	if b == nil {
		return
	}
	after, err := baseline(ctx, s.env.Redis, o.Concurrency, o.BaselineFor)
	if err != nil {
		r.Notes = append(r.Notes, err.Error()+" (after the run; the rates are the ones before)")
		return
	}
	after.RedisTopic = s.redisTopicBaseline(ctx, o, r, "after")
	b.After = after
	b.RedisTopic = (b.Before.RedisTopic + after.RedisTopic) / 2
	b.Ping = (b.Before.Ping + after.Ping) / 2
	b.EvalSha = (b.Before.EvalSha + after.EvalSha) / 2
	b.EvalShaC = (b.Before.EvalShaC + after.EvalShaC) / 2
	b.EmptyHTTP = (b.Before.EmptyHTTP + after.EmptyHTTP) / 2
}

// baselineTopic is the redis topic of a durable run's RedisTopic baseline.
const baselineTopic = "bench.baseline.redis"

// redisTopicBaseline measures, for a durable run, the enqueue rate of the
// same shape (Concurrency goroutines, Batch jobs per call, payload) to a
// redis topic for BaselineFor, and deletes those jobs again; 0 for a run
// that is not durable, or after a failure (then a note says so).
func (s *sandbox) redisTopicBaseline(ctx context.Context, o Options, r *Result, phase string) float64 {
	if !o.Durable {
		return 0
	}
	rate, err := s.enqueueFor(ctx, baselineTopic, phase+"-", o.Concurrency, o.Batch, o.BaselineFor)
	if err == nil {
		err = deleteKeys(ctx, s.env.Redis, s.ns+":{"+baselineTopic+"}:*")
	}
	if err != nil {
		r.Notes = append(r.Notes, fmt.Sprintf("bench: baseline: redis-topic enqueue %s the run: %v", phase, err))
		return 0
	}
	return rate
}

// enqueueFor enqueues jobs due now to topic from concurrency goroutines,
// batch per call (1: Enqueue), ids prefix<k>, for d, and returns the
// accepted jobs per second.
func (s *sandbox) enqueueFor(ctx context.Context, topic, prefix string, concurrency, batch int, d time.Duration) (float64, error) {
	var next atomic.Int64
	n, err := 0, error(nil)
	var mu sync.Mutex
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			payload := []byte(payloadJSON)
			jobs := make([]queue.NewJob, batch)
			done := 0
			var ferr error
			for ctx.Err() == nil && time.Now().Before(end) {
				lo := int(next.Add(int64(batch))) - batch
				for i := range jobs {
					jobs[i] = queue.NewJob{ID: prefix + strconv.Itoa(lo+i), Payload: payload}
				}
				if batch == 1 {
					if _, ferr = s.q.Enqueue(ctx, topic, jobs[0]); ferr != nil {
						break
					}
					done++
					continue
				}
				res, err := s.q.EnqueueBatch(ctx, topic, jobs)
				if ferr = err; ferr != nil {
					break
				}
				for _, br := range res {
					if br.Status == queue.BatchCreated {
						done++
					}
				}
			}
			mu.Lock()
			n += done
			err = errors.Join(err, ferr)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if err != nil {
		return 0, err
	}
	return perSecond(n, time.Since(start)), nil
}

// setRatio sets r's calls per second from calls, and its ratio to the
// baseline's empty-script rate at the same concurrency.
func setRatio(r *Result, calls int) {
	if r.Seconds <= 0 {
		return
	}
	r.CallsPerSec = float64(calls) / r.Seconds
	if b := r.Baseline; b != nil && b.limit() > 0 {
		r.Ratio = r.CallsPerSec / b.limit()
	}
}

// embeddedRedis reports whether rdb is a miniredis, which has no INFO
// server section.
func embeddedRedis(ctx context.Context, rdb redis.UniversalClient) bool {
	err := rdb.Info(ctx, "server").Err()
	return err != nil && strings.Contains(err.Error(), "not supported")
}

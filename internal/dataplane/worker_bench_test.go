package dataplane_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
)

// benchWEnv is newWEnv for benchmarks.
func benchWEnv(b *testing.B) wenv {
	rdb, ns := testenv.Redis(b)
	c, err := dataplane.New(rdb, dataplane.Config{Namespace: ns})
	if err != nil {
		b.Fatal(err)
	}
	db := testenv.MySQL(b)
	led, err := ledger.New(db, ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := led.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	return wenv{env: env{c: c, rdb: rdb, ns: ns}, db: db, led: led}
}

// BenchmarkDrain: 50,000 jobs already due, a no-op handler, concurrency 50,
// every job recorded in the MariaDB ledger before it runs. Reports jobs/s
// from the worker's start to the last handler.
func BenchmarkDrain(b *testing.B) { benchDrain(b, nil) }

// BenchmarkDrainPooled is BenchmarkDrain with the topic alone in a pool of
// 50 (worker.pools): what a pool costs a topic of quick handlers, which
// claims within the pool's free slots, without a prefetch.
func BenchmarkDrainPooled(b *testing.B) {
	benchDrain(b, []dataplane.Pool{{Name: "p", Concurrency: 50, Weights: map[string]int{"drain": 1}}})
}

func benchDrain(b *testing.B, pools []dataplane.Pool) {
	const total = 50_000
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := benchWEnv(b)
		enqueueManyB(b, e.c, "drain", total, nil)
		var handled atomic.Int64
		done := make(chan struct{})
		w := benchWorker(b, e, dataplane.WorkerConfig{Pools: pools})
		if err := w.Handle("drain", dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
			if handled.Add(1) == total {
				close(done)
			}
			return nil
		}), dataplane.TopicConfig{Concurrency: 50}); err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan error, 1)
		start := time.Now()
		b.StartTimer()
		go func() { stopped <- w.Run(ctx) }()
		<-done
		elapsed := time.Since(start)
		b.StopTimer()
		cancel()
		if err := <-stopped; err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(total/elapsed.Seconds(), "jobs/s")
	}
}

// BenchmarkLateness: 20,000 jobs due uniformly over 10 s, concurrency 50.
// Reports handler start minus due time, p50/p99/max in ms, and fails if any
// job started before its due time.
func BenchmarkLateness(b *testing.B) {
	const total, window = 20_000, 10 * time.Second
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := benchWEnv(b)
		start := time.Now().Add(2 * time.Second).UnixMilli()
		enqueueManyB(b, e.c, "late", total, func(k int, j *dataplane.NewJob) {
			j.RunAt = start + int64(k)*window.Milliseconds()/total
		})
		var mu sync.Mutex
		late := make([]int64, 0, total) // µs
		early := 0
		done := make(chan struct{})
		w := benchWorker(b, e, dataplane.WorkerConfig{})
		if err := w.Handle("late", dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
			d := time.Now().UnixMicro() - j.RunAt*1000
			mu.Lock()
			late = append(late, d)
			if d < 0 {
				early++
			}
			if len(late) == total {
				close(done)
			}
			mu.Unlock()
			return nil
		}), dataplane.TopicConfig{Concurrency: 50}); err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan error, 1)
		b.StartTimer()
		go func() { stopped <- w.Run(ctx) }()
		<-done
		b.StopTimer()
		cancel()
		if err := <-stopped; err != nil {
			b.Fatal(err)
		}
		slices.Sort(late)
		pct := func(p float64) float64 { return float64(late[int(p*float64(len(late)-1))]) / 1000 }
		b.ReportMetric(pct(0.50), "p50-ms")
		b.ReportMetric(pct(0.99), "p99-ms")
		b.ReportMetric(pct(1), "max-ms")
		b.ReportMetric(float64(early), "early")
		if early > 0 {
			b.Fatalf("%d jobs started before their due time", early)
		}
	}
}

// BenchmarkIdle: a worker on an empty topic for 5 s; reports the process's
// CPU use as a percentage of one core.
func BenchmarkIdle(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := benchWEnv(b)
		w := benchWorker(b, e, dataplane.WorkerConfig{})
		if err := w.Handle("idle", dataplane.HandlerFunc(func(context.Context, *dataplane.Job) error { return nil }), dataplane.TopicConfig{}); err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan error, 1)
		go func() { stopped <- w.Run(ctx) }()
		time.Sleep(500 * time.Millisecond) // let start-up work pass before measuring
		b.StartTimer()
		before, t0 := cpuTime(b), time.Now()
		time.Sleep(5 * time.Second)
		used, wall := cpuTime(b)-before, time.Since(t0)
		b.StopTimer()
		cancel()
		if err := <-stopped; err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(100*used.Seconds()/wall.Seconds(), "%core")
	}
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchWorker(b *testing.B, e wenv, cfg dataplane.WorkerConfig) *dataplane.Worker {
	cfg.Logger = testenv.QuietLogger()
	w, err := dataplane.NewWorker(e.c, ledgerops.Of(e.led), cfg)
	if err != nil {
		b.Fatal(err)
	}
	return w
}

func enqueueManyB(b *testing.B, c *dataplane.Client, topic string, n int, mod func(int, *dataplane.NewJob)) {
	ctx := context.Background()
	for start := 0; start < n; start += 1000 {
		batch := make([]dataplane.NewJob, 0, 1000)
		for k := start; k < min(n, start+1000); k++ {
			j := dataplane.NewJob{ID: fmt.Sprintf("j%d", k), Payload: benchPayload}
			if mod != nil {
				mod(k, &j)
			}
			batch = append(batch, j)
		}
		if _, err := c.EnqueueBatch(ctx, topic, batch); err != nil {
			b.Fatal(err)
		}
	}
}

// backlogRun is one run of the urgent-behind-a-backlog benchmarks: a
// worker drains a backlog with 10 ms handlers; once it flows (its 2,000th
// start), one urgent job is enqueued and timed to its handler's start;
// then more urgent jobs compete with the backlog, and the backlog's part
// of the next 2,000 starts is reported.
type backlogRun struct {
	starts, counted, lowCounted atomic.Int64
	counting                    atomic.Bool
	firstUrgent                 chan time.Time
	flowing, measured           chan struct{} // closed at the 2,000th start, and the 2,000th counted
	flowOnce, urgentOnce, once  sync.Once
}

func newBacklogRun() *backlogRun {
	return &backlogRun{firstUrgent: make(chan time.Time, 1), flowing: make(chan struct{}), measured: make(chan struct{})}
}

// handle is every handler of the run: it notes the start (of an urgent
// job, or one of the backlog) and takes 10 ms.
func (r *backlogRun) handle(urgent bool) error {
	if r.starts.Add(1) == 2000 {
		r.flowOnce.Do(func() { close(r.flowing) })
	}
	if urgent {
		r.urgentOnce.Do(func() { r.firstUrgent <- time.Now() })
	}
	if r.counting.Load() {
		if !urgent {
			r.lowCounted.Add(1)
		}
		if r.counted.Add(1) == 2000 {
			r.once.Do(func() { close(r.measured) })
		}
	}
	time.Sleep(10 * time.Millisecond)
	return nil
}

// measure runs w, enqueues the urgent job with one once the backlog flows,
// the competing urgent jobs with many, and reports urgent-start-ms and
// the backlog's share under share.
func (r *backlogRun) measure(b *testing.B, w *dataplane.Worker, one func(context.Context) error, many func(), share string) {
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(ctx) }()
	<-r.flowing // the backlog flows, every handler busy with it
	b.StartTimer()
	at := time.Now()
	if err := one(ctx); err != nil {
		b.Fatal(err)
	}
	started := <-r.firstUrgent
	b.StopTimer()
	b.ReportMetric(float64(started.Sub(at).Microseconds())/1000, "urgent-start-ms")
	many()
	r.counting.Store(true)
	<-r.measured
	b.ReportMetric(float64(r.lowCounted.Load())/float64(r.counted.Load()), share)
	cancel()
	if err := <-stopped; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPoolUrgentBehindABacklog: a pool of 50 handlers over "bulk"
// (weight 1) with 50,000 jobs due and "urgent" (weight 19), handlers of
// 10 ms, every job recorded in the MariaDB ledger. With the bulk backlog
// flowing, one urgent job is enqueued: urgent-start-ms is from its enqueue
// to its handler's start. Then 5,000 urgent jobs compete with the bulk
// backlog: bulk-share is bulk's part of the next 2,000 starts (its weight's
// share is 0.05).
func BenchmarkPoolUrgentBehindABacklog(b *testing.B) {
	const bulk = 50_000
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := benchWEnv(b)
		enqueueManyB(b, e.c, "bulk", bulk, nil)
		r := newBacklogRun()
		w := benchWorker(b, e, dataplane.WorkerConfig{Pools: []dataplane.Pool{{Name: "p", Concurrency: 50, Weights: map[string]int{"bulk": 1, "urgent": 19}}}})
		for topic, urgent := range map[string]bool{"bulk": false, "urgent": true} {
			if err := w.Handle(topic, dataplane.HandlerFunc(func(context.Context, *dataplane.Job) error {
				return r.handle(urgent)
			}), dataplane.TopicConfig{}); err != nil {
				b.Fatal(err)
			}
		}
		r.measure(b, w, func(ctx context.Context) error {
			_, err := e.c.Enqueue(ctx, "urgent", dataplane.NewJob{ID: "u0"})
			return err
		}, func() { enqueueManyB(b, e.c, "urgent", 5000, nil) }, "bulk-share")
	}
}

// BenchmarkPriorityUrgentBehindABacklog: one topic, concurrency 50,
// handlers of 10 ms, every job recorded in the MariaDB ledger, 50,000 jobs
// of priority 0 due. With the backlog flowing, one job of priority 3 due
// now is enqueued: urgent-start-ms is from its enqueue to its handler's
// start (docs/design.md §4.23; the target is 50 ms). Then 5,000
// jobs of priority 3 compete with the backlog: low-share is priority 0's
// part of the next 2,000 starts (the oldest's turn, one claim in
// DefaultOldestEvery, gives it 0.10; the target is at least 0.05).
func BenchmarkPriorityUrgentBehindABacklog(b *testing.B) {
	const backlog = 50_000
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := benchWEnv(b)
		enqueueManyB(b, e.c, "t", backlog, nil)
		r := newBacklogRun()
		w := benchWorker(b, e, dataplane.WorkerConfig{})
		if err := w.Handle("t", dataplane.HandlerFunc(func(_ context.Context, j *dataplane.Job) error {
			return r.handle(j.Priority > 0)
		}), dataplane.TopicConfig{Concurrency: 50}); err != nil {
			b.Fatal(err)
		}
		r.measure(b, w, func(ctx context.Context) error {
			_, err := e.c.Enqueue(ctx, "t", dataplane.NewJob{ID: "u0", Priority: 3})
			return err
		}, func() {
			enqueueManyB(b, e.c, "t", 5000, func(k int, j *dataplane.NewJob) {
				j.ID, j.Priority = fmt.Sprintf("u%d", k+1), 3
			})
		}, "low-share")
	}
}

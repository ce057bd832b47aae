package dataplane_test

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
)

// The data-plane benchmarks run against the shared real Redis. Each reports
// jobs/s; the targets (on the 2-core reference machine) are in the README.

var benchPayload = []byte(`{"order_no":"202611300001","user":42}`)

func benchClient(b *testing.B) *dataplane.Client {
	rdb, ns := testenv.Redis(b)
	c, err := dataplane.New(rdb, dataplane.Config{Namespace: ns})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

func reportJobs(b *testing.B, jobs int) {
	b.ReportMetric(float64(jobs)/b.Elapsed().Seconds(), "jobs/s")
}

// One goroutine, one job per round trip.
func BenchmarkEnqueue(b *testing.B) {
	c := benchClient(b)
	ctx := testenv.Context(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Enqueue(ctx, "bench", dataplane.NewJob{ID: "o:" + strconv.Itoa(i), Payload: benchPayload, Delay: time.Minute}); err != nil {
			b.Fatal(err)
		}
	}
	reportJobs(b, b.N)
}

// One goroutine, one tick of a periodic schedule per round trip: the claim
// of the tick and the enqueue of its job in one script (compare with
// BenchmarkEnqueue, a plain enqueue).
func BenchmarkEnqueueTick(b *testing.B) {
	c := benchClient(b)
	ctx := testenv.Context(b)
	t0 := time.Now().Add(time.Minute).UnixMilli()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tick := t0 + int64(i)
		r, err := c.EnqueueTick(ctx, nil, "bench", "s", tick, dataplane.NewJob{ID: "s:" + strconv.FormatInt(tick, 10), Payload: benchPayload, RunAt: tick})
		if err != nil || r.Duplicate {
			b.Fatal(r, err)
		}
	}
	reportJobs(b, b.N)
}

// One goroutine, batches of 100 jobs.
func BenchmarkEnqueueBatch100(b *testing.B) {
	c := benchClient(b)
	ctx := testenv.Context(b)
	batch := make([]dataplane.NewJob, 100)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range batch {
			batch[k] = dataplane.NewJob{ID: fmt.Sprintf("o:%d:%d", i, k), Payload: benchPayload, Delay: time.Minute}
		}
		if _, err := c.EnqueueBatch(ctx, "bench", batch); err != nil {
			b.Fatal(err)
		}
	}
	reportJobs(b, 100*b.N)
}

// One goroutine: claim 100 due jobs, ack them, repeat.
func BenchmarkClaimAck100(b *testing.B) { benchClaimAck100(b, dataplane.RateLimit{}) }

// BenchmarkClaimAck100 under a rate limit that never binds: the token
// bucket's cost in the claim script.
func BenchmarkClaimAck100RateLimited(b *testing.B) {
	benchClaimAck100(b, dataplane.RateLimit{PerSecond: dataplane.MaxRatePerSecond, Burst: dataplane.MaxRateBurst})
}

func benchClaimAck100(b *testing.B, limit dataplane.RateLimit) {
	c := benchClient(b)
	ctx := testenv.Context(b)
	total := 100 * b.N
	batch := make([]dataplane.NewJob, 0, 1000)
	for i := 0; i < total; i++ {
		batch = append(batch, dataplane.NewJob{ID: "o:" + strconv.Itoa(i), Payload: benchPayload})
		if len(batch) == cap(batch) || i == total-1 {
			if _, err := c.EnqueueBatch(ctx, "bench", batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	refs := make([]dataplane.Ref, 0, 100)
	b.ResetTimer()
	done := 0
	for done < total {
		cl, err := c.ClaimLimited(ctx, "bench", 100, time.Minute, limit)
		if err != nil {
			b.Fatal(err)
		}
		if len(cl.Jobs) == 0 {
			b.Fatalf("ran dry after %d of %d jobs", done, total)
		}
		refs = refs[:0]
		for _, j := range cl.Jobs {
			refs = append(refs, j.Ref())
		}
		n, err := c.Ack(ctx, refs)
		if err != nil || n != len(refs) {
			b.Fatalf("ack %d of %d: %v", n, len(refs), err)
		}
		done += n
	}
	reportJobs(b, total)
}

// Batches of 100 from 4 x GOMAXPROCS goroutines: client
// encoding overlaps Redis's work, as in a producer service.
func BenchmarkEnqueueBatch100Parallel(b *testing.B) {
	c := benchClient(b)
	ctx := testenv.Context(b)
	var seq atomic.Int64
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		batch := make([]dataplane.NewJob, 100)
		for pb.Next() {
			n := seq.Add(1)
			for k := range batch {
				batch[k] = dataplane.NewJob{ID: fmt.Sprintf("o:%d:%d", n, k), Payload: benchPayload, Delay: time.Minute}
			}
			if _, err := c.EnqueueBatch(ctx, "bench", batch); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportJobs(b, 100*b.N)
}

// Single jobs from 50 goroutines: one round trip each, many in flight.
func BenchmarkEnqueueParallel50(b *testing.B) {
	c := benchClient(b)
	ctx := testenv.Context(b)
	var seq atomic.Int64
	b.SetParallelism(25) // x GOMAXPROCS 2 = 50 goroutines
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := "o:" + strconv.FormatInt(seq.Add(1), 10)
			if _, err := c.Enqueue(ctx, "bench", dataplane.NewJob{ID: id, Payload: benchPayload, Delay: time.Minute}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportJobs(b, b.N)
}

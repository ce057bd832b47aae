package ledger

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq/queue"
)

// BenchmarkRecordComplete measures the ledger's ceiling: each op records a
// batch of 100 fresh jobs (one multi-row INSERT) and completes them (one
// DELETE), as a worker does for every claimed batch. jobs/s counts jobs
// through both steps. "parallel" runs 4×GOMAXPROCS goroutines at once on
// one pool, each with its own batches, like several workers sharing the
// database.
//
//	go test -run '^$' -bench RecordComplete -benchtime 3s ./ledger/
func BenchmarkRecordComplete(b *testing.B) {
	const batch = 100
	for _, be := range backends {
		for _, parallel := range []bool{false, true} {
			name := be.name + "/serial"
			if parallel {
				name = be.name + "/parallel"
			}
			b.Run(name, func(b *testing.B) {
				db := be.open(b)
				l, err := New(db, Options{})
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Migrate(context.Background()); err != nil {
					b.Fatal(err)
				}
				var seq atomic.Int64
				step := func(ctx context.Context) {
					n := seq.Add(1)
					js := make([]*queue.Job, batch)
					for i := range js {
						js[i] = job("bench", fmt.Sprintf("order_close:%d-%d", n, i), 1)
						js[i].Payload = []byte(fmt.Sprintf(`{"order_no":"%d-%d","reason":"unpaid"}`, n, i))
					}
					if err := opsOf(l).Record(ctx, js, "bench:1"); err != nil {
						b.Error(err)
						return
					}
					if err := opsOf(l).Complete(ctx, refsOf(js)); err != nil {
						b.Error(err)
					}
				}
				runSteps(b, parallel, 4, step)
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// BenchmarkSchedule measures the durable enqueue's SQL side: each op is one
// Schedule of 1 or 100 fresh jobs (one SELECT with the clock, one multi-row
// INSERT, each committed on its own). "serial" is one caller; "parallel"
// runs 25×GOMAXPROCS goroutines on one pool (50 on 2 CPUs), each its own
// calls, as uncoalesced enqueues from many goroutines would. rows/s counts
// jobs written. MariaDB only: SQLite serializes writers anyway.
//
//	go test -run '^$' -bench Schedule -benchtime 3s ./ledger/
func BenchmarkSchedule(b *testing.B) {
	for _, batch := range []int{1, 100} {
		for _, parallel := range []bool{false, true} {
			name := fmt.Sprintf("mariadb/%d/serial", batch)
			if parallel {
				name = fmt.Sprintf("mariadb/%d/parallel", batch)
			}
			b.Run(name, func(b *testing.B) {
				db := backends[0].open(b)
				if sqlDB, err := db.DB(); err == nil {
					sqlDB.SetMaxIdleConns(64) // no reconnect per call with 50 goroutines
				}
				l, err := New(db, Options{})
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Migrate(context.Background()); err != nil {
					b.Fatal(err)
				}
				var seq atomic.Int64
				step := func(ctx context.Context) {
					n := seq.Add(1)
					js := make([]queue.NewJob, batch)
					for i := range js {
						js[i] = queue.NewJob{
							ID:          fmt.Sprintf("order_close:%d-%d", n, i),
							Payload:     []byte(fmt.Sprintf(`{"order_no":"%d-%d","reason":"unpaid"}`, n, i)),
							Delay:       30 * time.Minute,
							MaxAttempts: 5,
						}
					}
					if _, _, err := l.Schedule(ctx, "bench", js); err != nil {
						b.Error(err)
					}
				}
				runSteps(b, parallel, 25, step)
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}

// runSteps runs step b.N times, from one goroutine or, when parallel, from
// parallelism×GOMAXPROCS goroutines sharing the iterations.
func runSteps(b *testing.B, parallel bool, parallelism int, step func(ctx context.Context)) {
	ctx := context.Background()
	b.ResetTimer()
	if !parallel {
		for i := 0; i < b.N; i++ {
			step(ctx)
		}
		return
	}
	b.SetParallelism(parallelism)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			step(ctx)
		}
	})
}

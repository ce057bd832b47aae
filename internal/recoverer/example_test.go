package recoverer_test

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/glebarez/sqlite"
	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// A worker claimed a job and recorded it in the ledger, then died; Redis
// then restarted without persistence and lost everything. One recovery run
// notices the loss (the topic's epoch marker is gone while the ledger holds
// a row Redis has no trace of) and puts the job back, due at once, for the
// next claim to run it.
//
// The example runs on an in-process Redis (miniredis, with a clock it
// moves by hand) and an in-memory SQLite ledger.
func ExampleRecoverer_RunOnce() {
	ctx := context.Background()
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	noon := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	mr.SetTime(noon)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	db, err := gorm.Open(sqlite.Open(":memory:"), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		panic(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		panic(err)
	}
	sqlDB.SetMaxOpenConns(1) // every connection to ":memory:" is a database of its own

	q, err := dataplane.New(rdb, queue.Config{})
	if err != nil {
		panic(err)
	}
	led, err := ledger.New(db, ledger.Options{})
	if err != nil {
		panic(err)
	}
	if err := led.Migrate(ctx); err != nil {
		panic(err)
	}

	// What a worker does before it runs a handler: claim, then record.
	if _, err := q.Enqueue(ctx, "order_close", queue.NewJob{ID: "order_close:1", Payload: []byte("1")}); err != nil {
		panic(err)
	}
	cl, err := q.Claim(ctx, "order_close", 10, 30*time.Second)
	if err != nil {
		panic(err)
	}
	if err := ledgerops.Of(led).Record(ctx, cl.Jobs, "worker-a:1"); err != nil {
		panic(err)
	}
	// The worker dies, and Redis restarts empty. An hour later the row is
	// long past its lease.
	mr.FlushAll()
	mr.SetTime(noon.Add(time.Hour))

	log := logrus.New()
	log.SetOutput(io.Discard)
	rec, err := recoverer.New(q, ledgerops.Of(led), recoverer.Config{Logger: log})
	if err != nil {
		panic(err)
	}
	rep, err := rec.RunOnce(ctx)
	if err != nil {
		panic(err)
	}
	for _, l := range rep.DataLoss {
		fmt.Println("data loss in", l.Topic)
	}
	fmt.Println("re-enqueued:", rep.Reenqueued, rep.Sample)

	info, err := q.Get(ctx, "order_close", "order_close:1")
	if err != nil {
		panic(err)
	}
	fmt.Println("in Redis again:", info.State, "after attempt", info.Job.Attempt)

	// The next run finds nothing to do: the job is Redis's again.
	rep, err = rec.RunOnce(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("next run re-enqueued:", rep.Reenqueued, "data loss:", len(rep.DataLoss))
	// Output:
	// data loss in order_close
	// re-enqueued: 1 [order_close/order_close:1]
	// in Redis again: retrying after attempt 1
	// next run re-enqueued: 0 data loss: 0
}

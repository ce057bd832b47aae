package dataplane_test

import (
	"context"
	"errors"
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
	"github.com/delayq/delayq/ledger"
)

// The examples run on an in-process Redis (miniredis) and an in-memory
// SQLite ledger; in production, point the go-redis client at your Redis
// (single node, Sentinel or Cluster) and gorm at MySQL.

// exampleRedis starts an in-process Redis whose clock reads 12:00 UTC, so
// the due times the examples print are always the same.
func exampleRedis() (*miniredis.Miniredis, *redis.Client) {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	mr.SetTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	return mr, redis.NewClient(&redis.Options{Addr: mr.Addr()})
}

// exampleLedger opens an in-memory SQLite ledger and creates its tables.
func exampleLedger(ctx context.Context) *ledger.Ledger {
	db, err := gorm.Open(sqlite.Open(":memory:"), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		panic(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		panic(err)
	}
	sqlDB.SetMaxOpenConns(1) // every connection to ":memory:" is a database of its own
	led, err := ledger.New(db, ledger.Options{})
	if err != nil {
		panic(err)
	}
	if err := led.Migrate(ctx); err != nil {
		panic(err)
	}
	return led
}

// quiet is a logger that drops everything, so the examples' output is only
// what they print.
func quiet() logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// Schedule the close of an unpaid order 30 minutes from now. The job id is
// the idempotency key: enqueueing it again reports a duplicate and writes
// nothing. Bad input is refused with a *ValidationError naming the field.
func ExampleClient_Enqueue() {
	ctx := context.Background()
	mr, rdb := exampleRedis()
	defer mr.Close()
	defer rdb.Close()

	c, err := dataplane.New(rdb, dataplane.Config{})
	if err != nil {
		panic(err)
	}
	job := dataplane.NewJob{
		ID:      "order_close:202611300001",
		Payload: []byte(`{"order_no":"202611300001"}`),
		Delay:   30 * time.Minute, // from Redis's clock, not this process's
	}
	r, err := c.Enqueue(ctx, "order_close", job)
	if err != nil {
		panic(err)
	}
	fmt.Println("due at", time.UnixMilli(r.RunAt).UTC().Format(time.TimeOnly), "duplicate:", r.Duplicate)

	r, err = c.Enqueue(ctx, "order_close", job)
	if err != nil {
		panic(err)
	}
	fmt.Println("again: duplicate:", r.Duplicate)

	_, err = c.Enqueue(ctx, "order_close", dataplane.NewJob{ID: "order close 1"})
	var invalid *dataplane.ValidationError
	if errors.As(err, &invalid) {
		fmt.Println("refused: field", invalid.Field)
	}

	st, err := c.Stats(ctx, "order_close")
	if err != nil {
		panic(err)
	}
	fmt.Println("waiting:", st.Due)
	// Output:
	// due at 12:30:00 duplicate: false
	// again: duplicate: true
	// refused: field id
	// waiting: 1
}

// A worker claims due jobs, writes each one's ledger row before its handler
// runs, and settles the outcome: the ledger row first, then Redis. Run
// returns after a graceful shutdown, with every outcome settled.
func ExampleWorker() {
	ctx := context.Background()
	mr, rdb := exampleRedis()
	defer mr.Close()
	defer rdb.Close()
	led := exampleLedger(ctx)

	c, err := dataplane.New(rdb, dataplane.Config{})
	if err != nil {
		panic(err)
	}
	w, err := dataplane.NewWorker(c, ledgerops.Of(led), dataplane.WorkerConfig{Logger: quiet()})
	if err != nil {
		panic(err)
	}
	handled := make(chan struct{})
	err = w.Handle("order_close", dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		defer close(handled)
		// The job's ledger row is already written: if this process dies
		// now, the job runs again.
		row, err := led.Row(ctx, j.Topic, j.ID)
		if err != nil {
			return err // retried after a backoff
		}
		fmt.Printf("closing %s, attempt %d, ledger row %s\n", j.Payload, j.Attempt, row.State)
		return nil // done
	}), dataplane.TopicConfig{Concurrency: 4})
	if err != nil {
		panic(err)
	}
	if _, err := c.Enqueue(ctx, "order_close", dataplane.NewJob{ID: "order_close:1", Payload: []byte("order 1")}); err != nil {
		panic(err)
	}

	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error)
	go func() { ran <- w.Run(runCtx) }()
	<-handled
	stop() // SIGTERM in a real program
	if err := <-ran; err != nil {
		panic(err)
	}

	rows, err := led.Count(ctx)
	if err != nil {
		panic(err)
	}
	info, err := c.Get(ctx, "order_close", "order_close:1")
	if err != nil {
		panic(err)
	}
	fmt.Println("ledger rows:", rows, "state in Redis:", info.State)
	// Output:
	// closing order 1, attempt 1, ledger row in_flight
	// ledger rows: 0 state in Redis: unknown
}

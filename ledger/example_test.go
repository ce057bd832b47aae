package ledger_test

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
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"

	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/queue/engine"
)

// exampleBackends starts an in-process Redis (miniredis) and opens an
// in-memory SQLite database; in production they are your Redis and MySQL.
func exampleBackends() (*miniredis.Miniredis, *redis.Client, *gorm.DB) {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	db, err := gorm.Open(sqlite.Open(":memory:"), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		panic(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		panic(err)
	}
	sqlDB.SetMaxOpenConns(1) // every connection to ":memory:" is a database of its own
	return mr, redis.NewClient(&redis.Options{Addr: mr.Addr()}), db
}

// ClosedOrder is a business table: its unique key makes a second close of
// the same order impossible.
type ClosedOrder struct {
	OrderNo string `gorm:"primaryKey;type:varchar(64)"`
}

// A handler wrapped with Transactional commits its business write and the
// deletion of its job's ledger row in one transaction: the job is finished
// exactly when the order is closed. A claim that was lost meanwhile (the
// job taken over by another worker after a lease expiry, or cancelled)
// commits nothing.
func ExampleTransactional() {
	ctx := context.Background()
	mr, rdb, db := exampleBackends()
	defer mr.Close()
	defer rdb.Close()

	led, err := ledger.New(db, ledger.Options{})
	if err != nil {
		panic(err)
	}
	if err := led.Migrate(ctx); err != nil {
		panic(err)
	}
	if err := db.AutoMigrate(&ClosedOrder{}); err != nil {
		panic(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	eng, err := engine.New(rdb, led, engine.Config{NoRecovery: true, Logger: log})
	if err != nil {
		panic(err)
	}

	// The business write is idempotent (a second close of the order
	// inserts nothing); the ledger row's deletion, fenced by the job's
	// attempt, decides whether this claim may commit at all.
	closeOrder := ledger.Transactional(led, func(ctx context.Context, tx *gorm.DB, j *queue.Job) error {
		return tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&ClosedOrder{OrderNo: string(j.Payload)}).Error
	})
	var seen *queue.Job
	committed := make(chan struct{})
	err = eng.Handle("order_close", queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		defer close(committed)
		seen = j
		return closeOrder(ctx, j)
	}), queue.TopicConfig{})
	if err != nil {
		panic(err)
	}
	if _, err := eng.Enqueue(ctx, "order_close", queue.NewJob{ID: "order_close:1", Payload: []byte("1")}); err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error)
	go func() { ran <- eng.Run(runCtx) }()
	<-committed
	stop()
	if err := <-ran; err != nil {
		panic(err)
	}

	var closed int64
	db.Model(&ClosedOrder{}).Count(&closed)
	rows, err := led.Count(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("orders closed:", closed, "ledger rows:", rows)

	// The same claim run again (a worker that stalled past its lease, say):
	// its ledger row is gone, so its transaction rolls back.
	err = closeOrder(ctx, seen)
	fmt.Println("second run, claim lost:", errors.Is(err, ledger.ErrClaimLost))
	db.Model(&ClosedOrder{}).Count(&closed)
	fmt.Println("orders closed:", closed)
	// Output:
	// orders closed: 1 ledger rows: 0
	// second run, claim lost: true
	// orders closed: 1
}

// The audit side of the ledger: what is in flight now, and who holds it
// until when. Here a worker claimed a job and recorded it, as it does
// before running its handler; the handler is still running.
func ExampleLedger_InFlight() {
	ctx := context.Background()
	mr, rdb, db := exampleBackends()
	defer mr.Close()
	defer rdb.Close()
	mr.SetTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))

	led, err := ledger.New(db, ledger.Options{})
	if err != nil {
		panic(err)
	}
	if err := led.Migrate(ctx); err != nil {
		panic(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	eng, err := engine.New(rdb, led, engine.Config{NoRecovery: true, Logger: log,
		Worker: queue.WorkerConfig{ID: "host-a:4242"}})
	if err != nil {
		panic(err)
	}
	running, finish := make(chan struct{}), make(chan struct{})
	err = eng.Handle("emails", queue.HandlerFunc(func(context.Context, *queue.Job) error {
		close(running)
		<-finish
		return nil
	}), queue.TopicConfig{Lease: 30 * time.Second})
	if err != nil {
		panic(err)
	}
	if _, err := eng.Enqueue(ctx, "emails", queue.NewJob{ID: "welcome:42"}); err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error)
	go func() { ran <- eng.Run(runCtx) }()
	<-running
	defer func() {
		close(finish)
		stop()
		if err := <-ran; err != nil {
			panic(err)
		}
	}()

	rows, err := led.InFlight(ctx, "emails", 10)
	if err != nil {
		panic(err)
	}
	for _, e := range rows {
		fmt.Println(e.Topic, e.JobID, "attempt", e.Attempt, e.State, "held by", e.Worker,
			"until", time.UnixMilli(e.LeaseUntil).UTC().Format(time.TimeOnly))
	}
	// Output:
	// emails welcome:42 attempt 1 in_flight held by host-a:4242 until 12:00:30
}

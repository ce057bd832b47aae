package queue_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/queue"
)

// Schedule the close of an unpaid order 30 minutes from now. The job id is
// the idempotency key: enqueueing it again reports a duplicate.
func ExampleClient_Enqueue() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	c, err := queue.New(rdb, queue.Config{})
	if err != nil {
		panic(err)
	}
	r, err := c.Enqueue(context.TODO(), "order_close", queue.NewJob{
		ID:      "order_close:202611300001",
		Payload: []byte(`{"order_no":"202611300001"}`),
		Delay:   30 * time.Minute,
	})
	var invalid *queue.ValidationError
	switch {
	case errors.As(err, &invalid):
		fmt.Println("bad input in field", invalid.Field)
	case err != nil:
		fmt.Println("redis unavailable:", err)
	case r.Duplicate:
		fmt.Println("already scheduled")
	default:
		fmt.Println("due at", time.UnixMilli(r.RunAt))
	}
}

// Run a worker for one topic until ctx ends. The ledger (package ledger)
// records every claimed job before its handler runs.
func ExampleWorker() {
	run := func(ctx context.Context, c *queue.Client, led queue.Ledger) error {
		w, err := queue.NewWorker(c, queue.WorkerConfig{Ledger: led})
		if err != nil {
			return err
		}
		err = w.Handle("order_close", queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
			if string(j.Payload) == "" {
				return queue.SkipRetry(errors.New("empty payload")) // dead at once
			}
			return nil // done: ledger row deleted, then the Redis entries
		}), queue.TopicConfig{Concurrency: 50, Lease: time.Minute})
		if err != nil {
			return err
		}
		return w.Run(ctx) // graceful shutdown when ctx ends
	}
	_ = run
}

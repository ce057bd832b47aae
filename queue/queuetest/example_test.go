package queuetest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/queue/queuetest"
)

// signupHandler is the handler under test: for each signup it schedules a
// reminder a day later. It enqueues through a queue.Enqueuer, which is a
// *dataplane.Client in production.
func signupHandler(q queue.Enqueuer) queue.Handler {
	return queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		var s struct {
			User string `json:"user"`
		}
		if err := json.Unmarshal(j.Payload, &s); err != nil || s.User == "" {
			return queue.SkipRetry(fmt.Errorf("bad payload %q", j.Payload)) // dead at once: retrying cannot help
		}
		_, err := q.Enqueue(ctx, "reminders", queue.NewJob{
			ID:      "reminder:" + s.User, // a redelivery of this job enqueues no second reminder
			Payload: j.Payload,
			Delay:   24 * time.Hour,
		})
		return err // an error: the worker retries the job
	})
}

// Test a handler without a worker, a ledger or Redis: build the job the
// worker would hand it, run it, and look at what it enqueued.
func Example() {
	ctx := context.Background()
	rec, err := queuetest.NewRecorder(queue.Config{})
	if err != nil {
		panic(err)
	}
	defer rec.Close()
	rec.SetTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	h := signupHandler(rec)

	job := queuetest.NewJob("signups", "signup:42", []byte(`{"user":"42"}`))
	fmt.Println("first run:", queuetest.Run(ctx, h, job))
	job.Attempt++ // delivered again: at least once
	fmt.Println("second run:", queuetest.Run(ctx, h, job))
	for _, e := range rec.Jobs("reminders") {
		fmt.Println("enqueued", e.ID, "due", time.UnixMilli(e.RunAt).UTC().Format(time.DateTime))
	}

	err = queuetest.Run(ctx, h, queuetest.NewJob("signups", "signup:43", []byte("{}")))
	fmt.Println("bad payload buried at once:", errors.Is(err, queue.ErrSkipRetry))

	rec.FailWith(errors.New("redis down"))
	fmt.Println("Redis down:", queuetest.Run(ctx, h, queuetest.NewJob("signups", "signup:44", []byte(`{"user":"44"}`))))
	// Output:
	// first run: <nil>
	// second run: <nil>
	// enqueued reminder:42 due 2026-12-01 12:00:00
	// bad payload buried at once: true
	// Redis down: redis down
}

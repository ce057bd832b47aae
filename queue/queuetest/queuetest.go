// Package queuetest helps test delayq handlers without a worker, a ledger or
// a Redis server.
//
// A handler is a function of a context and a *queue.Job. NewJob builds the
// job a worker would hand it; Run calls the handler the way the worker does
// (a context that ends at the job's lease deadline, a panic turned into a
// *queue.PanicError); Recorder stands in for the *dataplane.Client through
// which a handler enqueues follow-up jobs, and records them. What the worker
// then does with the handler's error is the queue package's rule: nil
// completes the job, an error wrapped with queue.SkipRetry buries it, any
// other error retries it while attempts are left (queue.Handler).
//
//	func TestSendReminder(t *testing.T) {
//		rec, err := queuetest.NewRecorder(queue.Config{})
//		if err != nil {
//			t.Fatal(err)
//		}
//		defer rec.Close()
//		h := reminders.Handler(rec) // takes a queue.Enqueuer
//		if err := queuetest.Run(context.Background(), h, queuetest.NewJob("signup", "signup:42", nil)); err != nil {
//			t.Fatal(err)
//		}
//		if got := rec.Jobs("reminder"); len(got) != 1 || got[0].ID != "reminder:42" {
//			t.Fatalf("enqueued %+v", got)
//		}
//	}
package queuetest

import (
	"context"
	"runtime/debug"
	"time"

	"github.com/delayq/delayq/queue"
)

// defaultMaxAttempts is queue.Config's DefaultMaxAttempts default (a test
// keeps the two equal).
const defaultMaxAttempts = 25

// defaultLease is queue.TopicConfig's Lease default.
const defaultLease = 30 * time.Second

// NewJob returns job id of topic as a worker hands it to a handler on its
// first attempt: attempt 1 of 25 (the queue's default), enqueued and due
// now, leased for 30 s. Change its fields for other cases (a later attempt,
// a LastError, a lease about to end).
func NewJob(topic, id string, payload []byte) *queue.Job {
	now := time.Now().UnixMilli()
	return &queue.Job{
		Topic:       topic,
		ID:          id,
		Payload:     payload,
		Attempt:     1,
		MaxAttempts: defaultMaxAttempts,
		EnqueuedAt:  now,
		RunAt:       now,
		LeaseUntil:  now + defaultLease.Milliseconds(),
	}
}

// Run calls h with job as a worker does: with a context that ends at
// job.LeaseUntil (if set) with cause queue.ErrLeaseExpired, and with a panic
// recovered into a *queue.PanicError. It returns the handler's error.
func Run(ctx context.Context, h queue.Handler, job *queue.Job) (err error) {
	if job.LeaseUntil > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, time.UnixMilli(job.LeaseUntil), queue.ErrLeaseExpired)
		defer cancel()
	}
	defer func() {
		if v := recover(); v != nil {
			err = &queue.PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return h.Handle(ctx, job)
}

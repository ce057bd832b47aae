package queue

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Handler runs one job. A nil error completes the job; any other error
// retries it after a backoff while attempts are left. Wrap the error with
// SkipRetry to bury the job at once, or with RetryAfter / RetryAt to choose
// when it runs again. A panic is recovered and counts as an error.
//
// The context ends when the job's lease ends (the heartbeat keeps it alive
// while the handler runs) or when the worker's shutdown timeout runs out.
type Handler interface {
	Handle(ctx context.Context, job *Job) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, job *Job) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, job *Job) error { return f(ctx, job) }

// ErrSkipRetry is matched (errors.Is) by errors wrapped with SkipRetry.
var ErrSkipRetry = errors.New("permanent failure")

// SkipRetry marks err as permanent: the job goes dead at once, whatever
// attempts it has left.
func SkipRetry(err error) error {
	if err == nil {
		err = errors.New("skip retry")
	}
	return skipRetry{err}
}

// RetryAfter retries the job after d instead of the backoff, if attempts are
// left (a rate limit's Retry-After, say).
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		err = errors.New("retry requested")
	}
	return &retryAt{err: err, delay: max(d, 0)}
}

// RetryAt retries the job at t instead of after the backoff, if attempts are
// left.
func RetryAt(err error, t time.Time) error {
	if err == nil {
		err = errors.New("retry requested")
	}
	return &retryAt{err: err, at: t}
}

// PanicError is the error a recovered handler panic becomes.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("handler panic: %v", e.Value) }

type skipRetry struct{ err error }

func (e skipRetry) Error() string { return "permanent: " + e.err.Error() }

func (e skipRetry) Unwrap() []error { return []error{e.err, ErrSkipRetry} }

// RetryRequested reports when the next attempt runs (Unix ms) if err
// came from RetryAfter or RetryAt, counting a delay from now (Unix ms); ok
// is false for any other error, which retries after the topic's backoff.
func RetryRequested(err error, now int64) (runAt int64, ok bool) {
	var ra *retryAt
	if !errors.As(err, &ra) {
		return 0, false
	}
	if ra.at.IsZero() {
		return now + ra.delay.Milliseconds(), true
	}
	return ra.at.UnixMilli(), true
}

// retryAt asks for the next attempt at a given time, or after a delay.
type retryAt struct {
	err   error
	delay time.Duration
	at    time.Time
}

func (e *retryAt) Error() string { return e.err.Error() }

func (e *retryAt) Unwrap() error { return e.err }

package queue

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
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

type skipRetry struct{ err error }

func (e skipRetry) Error() string   { return "permanent: " + e.err.Error() }
func (e skipRetry) Unwrap() []error { return []error{e.err, ErrSkipRetry} }

// SkipRetry marks err as permanent: the job goes dead at once, whatever
// attempts it has left.
func SkipRetry(err error) error {
	if err == nil {
		err = errors.New("skip retry")
	}
	return skipRetry{err}
}

// retryAt asks for the next attempt at a given time, or after a delay.
type retryAt struct {
	err   error
	delay time.Duration
	at    time.Time
}

func (e *retryAt) Error() string { return e.err.Error() }
func (e *retryAt) Unwrap() error { return e.err }

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

// runHandler calls h, turning a panic into a *PanicError.
func runHandler(ctx context.Context, h Handler, j *Job) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return h.Handle(ctx, j)
}

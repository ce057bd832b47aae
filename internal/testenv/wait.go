package testenv

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"
)

// DefaultTimeout bounds a test's calls made through Context.
const DefaultTimeout = 2 * time.Minute

// Context returns a context for a test's calls: it ends DefaultTimeout from
// now (sooner if the test binary's -timeout comes first) and is cancelled
// when the test's cleanup runs. Unlike t.Context, it is still live in the
// cleanup functions registered after it, so they can use it to stop what
// the test started.
func Context(t testing.TB) context.Context {
	return ContextTimeout(t, DefaultTimeout)
}

// ContextTimeout is Context with a bound of d instead of DefaultTimeout.
func ContextTimeout(t testing.TB, d time.Duration) context.Context {
	deadline := time.Now().Add(d)
	// Leave a moment before the binary's own deadline, so the test fails
	// with its own message instead of the -timeout panic.
	if td, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if end, ok := td.Deadline(); ok && end.Add(-5*time.Second).Before(deadline) {
			deadline = end.Add(-5 * time.Second)
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	t.Cleanup(cancel)
	return ctx
}

// Poll intervals of WaitFor: the first check is immediate, later ones
// back off from pollFirst to pollMax.
const (
	pollFirst = 5 * time.Millisecond
	pollMax   = 100 * time.Millisecond
)

// WaitFor checks cond until it holds, failing the test when ctx ends first
// with what was awaited and each detail's word on the state then.
//
// It is for state that nothing in the test can be told about: another
// process, a Redis or SQL state, a wall clock. When a component of the test
// can say that the thing happened (an Observer, a hook, a handler), wait on
// an Event or a Counter instead.
func WaitFor(ctx context.Context, t testing.TB, what string, cond func() bool, detail ...func() string) {
	t.Helper()
	interval := pollFirst
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for !cond() {
		timer.Reset(interval)
		select {
		case <-timer.C:
		case <-ctx.Done():
			if cond() {
				return
			}
			t.Fatalf("gave up waiting for %s: %v%s", what, context.Cause(ctx), details(detail))
		}
		interval = min(2*interval, pollMax)
	}
}

func details(detail []func() string) string {
	msg := ""
	for _, d := range detail {
		msg += ": " + d()
	}
	return msg
}

// Event lets a test wait for a condition that a component's hook (an
// Observer, a handler, a report callback) makes true: the hook calls
// Notify after each change, and Wait re-checks the condition then, never
// on a timer. The zero Event is ready to use; it is safe for concurrent use.
type Event struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced by Notify
}

// Notify wakes every Wait to check its condition again.
func (e *Event) Notify() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.changed != nil {
		close(e.changed)
		e.changed = nil
	}
}

// next returns the channel the next Notify closes.
func (e *Event) next() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.changed == nil {
		e.changed = make(chan struct{})
	}
	return e.changed
}

// Wait returns once cond holds, checking it now and after every Notify;
// it fails the test when ctx ends first.
func (e *Event) Wait(ctx context.Context, t testing.TB, what string, cond func() bool, detail ...func() string) {
	t.Helper()
	for {
		// Take the channel before checking, so a change made between the
		// check and the select still wakes this Wait.
		changed := e.next()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			if cond() {
				return
			}
			t.Fatalf("gave up waiting for %s: %v%s", what, context.Cause(ctx), details(detail))
		}
	}
}

// Counter counts events (jobs handled, hook calls) and lets a test wait
// until the count reaches a value. The zero Counter is ready to use; it is
// safe for concurrent use.
type Counter struct {
	ev Event
	mu sync.Mutex
	n  int64
}

// Add adds d to the count and returns the new count.
func (c *Counter) Add(d int64) int64 {
	c.mu.Lock()
	c.n += d
	n := c.n
	c.mu.Unlock()
	c.ev.Notify()
	return n
}

// Load returns the count.
func (c *Counter) Load() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// WaitAtLeast returns once the count is n or more; it fails the test when
// ctx ends first.
func (c *Counter) WaitAtLeast(ctx context.Context, t testing.TB, n int64, what string) {
	t.Helper()
	c.ev.Wait(ctx, t, what, func() bool { return c.Load() >= n }, func() string {
		return "count " + strconv.FormatInt(c.Load(), 10)
	})
}

// Receive returns the next value from ch; it fails the test when ctx ends
// first or ch is closed.
func Receive[T any](ctx context.Context, t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("waiting for %s: the channel was closed", what)
		}
		return v
	case <-ctx.Done():
		t.Fatalf("gave up waiting for %s: %v", what, context.Cause(ctx))
	}
	var zero T
	return zero
}

// runStopTimeout bounds how long Running.Wait waits for a stopped function.
const runStopTimeout = time.Minute

// Running is a function a test started with Start: a worker's, a
// sweeper's or a server's Run.
type Running struct {
	t      testing.TB
	cancel context.CancelFunc
	done   chan struct{}
	err    error // f's result, set before done is closed
}

// Start runs f in a goroutine with a context that Cancel (or Stop, or the
// end of the test) cancels.
func Start(t testing.TB, f func(ctx context.Context) error) *Running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{t: t, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = f(ctx)
	}()
	t.Cleanup(func() { _ = r.Stop() })
	return r
}

// Cancel cancels f's context and returns at once.
func (r *Running) Cancel() { r.cancel() }

// Wait returns f's error once f has returned; it fails the test if f has
// not returned within a minute.
func (r *Running) Wait() error {
	select {
	case <-r.done:
		return r.err
	case <-time.After(runStopTimeout):
		r.t.Errorf("testenv: a started function did not return within %s", runStopTimeout)
		return nil
	}
}

// Stop cancels f's context and waits for it (Cancel, then Wait).
func (r *Running) Stop() error {
	r.cancel()
	return r.Wait()
}

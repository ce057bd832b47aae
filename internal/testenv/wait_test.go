package testenv

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// fatalTB records a Fatalf and ends the goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// failure runs f with a fatalTB and returns its Fatalf message ("" if none).
func failure(t *testing.T, f func(tb testing.TB)) string {
	t.Helper()
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(tb)
	}()
	<-done
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.msg
}

// A Counter's waiter wakes on the Add that reaches its count, with no
// timer involved, and a Wait on an Event re-checks its condition on Notify.
func TestCounterAndEventWake(t *testing.T) {
	var c Counter
	go func() {
		for i := 0; i < 3; i++ {
			c.Add(1)
		}
	}()
	c.WaitAtLeast(Context(t), t, 3, "three adds")
	if n := c.Load(); n != 3 {
		t.Fatalf("count %d after three adds", n)
	}

	var ev Event
	var mu sync.Mutex
	ready := false
	go func() {
		mu.Lock()
		ready = true
		mu.Unlock()
		ev.Notify()
	}()
	ev.Wait(Context(t), t, "ready", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return ready
	})
}

// Waits that cannot succeed fail the test when their context ends, saying
// what they waited for and the details given.
func TestWaitsFailAtTheirDeadline(t *testing.T) {
	short := func() context.Context { return ContextTimeout(t, 50*time.Millisecond) }
	cases := map[string]func(tb testing.TB){
		"poll": func(tb testing.TB) {
			WaitFor(short(), tb, "never", func() bool { return false }, func() string { return "detail" })
		},
		"event":   func(tb testing.TB) { new(Event).Wait(short(), tb, "never", func() bool { return false }) },
		"counter": func(tb testing.TB) { new(Counter).WaitAtLeast(short(), tb, 1, "never") },
		"receive": func(tb testing.TB) { Receive(short(), tb, make(chan int), "never") },
	}
	for name, f := range cases {
		msg := failure(t, f)
		if !strings.Contains(msg, "never") || !strings.Contains(msg, "deadline exceeded") {
			t.Errorf("%s: failure %q, want what was awaited and the deadline", name, msg)
		}
		if name == "poll" && !strings.Contains(msg, "detail") {
			t.Errorf("poll: failure %q lacks the detail", msg)
		}
	}
	if msg := failure(t, func(tb testing.TB) { WaitFor(short(), tb, "true", func() bool { return true }) }); msg != "" {
		t.Errorf("a condition true at once failed: %q", msg)
	}
}

package ledger

import (
	"sync"
	"time"
)

// sqlClock estimates the SQL server's clock between reads of it, so that a
// durable enqueue of new ids costs one statement (the INSERT) instead of two.
// The estimate is never behind the server's clock: a read that returned S
// (whole ms) between local instants t0 and t1 saw the server at S + frac
// (frac < 1 ms) at some instant in [t0, t1], so at any later instant the
// server is at most at S + 1 + (time since t0), and that is the estimate.
// It runs on Go's monotonic clock, so a step of the local wall clock cannot
// move it. It goes stale after clockFresh, and Schedule then reads the
// server's clock again.
type sqlClock struct {
	mu    sync.Mutex
	read  int64         // S, Unix ms
	at    time.Time     // t0: just before the read was sent (monotonic)
	fresh time.Duration // 0 means clockFresh (tests set it)
}

// clockFresh is how long an estimate is used before the clock is read
// again: clocks drift by microseconds per second, far under the estimate's
// millisecond of margin.
const clockFresh = time.Second

// now returns the estimate, or ok false when there is none or it is stale.
func (c *sqlClock) now() (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() {
		return 0, false
	}
	since := time.Since(c.at)
	fresh := c.fresh
	if fresh == 0 {
		fresh = clockFresh
	}
	if since >= fresh {
		return 0, false
	}
	return c.read + 1 + (since + time.Millisecond - 1).Milliseconds(), true
}

// observe records a read of the server's clock, sent at sentAt.
func (c *sqlClock) observe(read int64, sentAt time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || sentAt.After(c.at) {
		c.read, c.at = read, sentAt
	}
}

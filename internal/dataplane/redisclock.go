package dataplane

import (
	"sync/atomic"
	"time"
)

// redisClock is a partition's estimate of Redis's clock (a topic of one
// partition is its own): due times and leases are Redis times, read from
// the master that holds the partition's keys (each hash tag may live on
// another Cluster master, with its own clock, so each keeps its own).
type redisClock struct {
	offset atomic.Int64 // Redis's clock minus the local clock, µs
	known  bool         // seen has run; only the partition's fetcher reads or writes it
}

// seen narrows the offset with a claim's clock: Redis read its clock
// (nowMicros) after the claim was sent and before its reply was read, so
// the offset lies between nowMicros - replyAt and nowMicros - sentAt. An
// estimate inside that range is kept (a tight one from an earlier claim
// stays tight); one outside it, or none yet, becomes the upper end, which
// errs ahead of Redis, never behind. Taking the lower end, as the worker
// once did, ran behind Redis by however long the process stalled before it
// read a reply (a pause, a GC, a slow reply): a lease that ran out during
// the stall still looked valid, and the handler ran beside the worker that
// had claimed the job again. Only the partition's fetcher calls it.
func (c *redisClock) seen(nowMicros int64, sentAt, replyAt time.Time) {
	lo, hi := nowMicros-replyAt.UnixMicro(), nowMicros-sentAt.UnixMicro()
	if o := c.offset.Load(); !c.known || o < lo || o > hi {
		c.offset.Store(hi)
	}
	c.known = true
}

// now estimates Redis's clock in Unix ms (seen).
func (c *redisClock) now() int64 { return (time.Now().UnixMicro() + c.offset.Load()) / 1000 }

// until is how long from now until Redis time ms, on the local clock.
func (c *redisClock) until(ms int64) time.Duration {
	return time.Duration(ms-c.now()) * time.Millisecond
}

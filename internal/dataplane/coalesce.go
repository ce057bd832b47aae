package dataplane

import (
	"context"

	"github.com/delayq/delayq/internal/coalesce"
)

// enqueueBatcher coalesces the concurrent enqueues of one topic into one
// enqueue.lua call.
type enqueueBatcher = coalesce.Batcher[NewJob, EnqueueResult]

// enqueuePart runs validated jobs of one topic or partition: coalesced with
// other callers' when a call to it is in flight, alone otherwise.
// A durable topic's enqueue (durableTopic.enqueue: SQL, then Redis) is coalesced the
// same way, so concurrent callers share one multi-row INSERT and commit.
func (c *Client) enqueuePart(ctx context.Context, topic string, jobs []NewJob) ([]EnqueueResult, error) {
	if b := c.batcherFor(topic); b != nil {
		return b.Do(ctx, jobs)
	}
	return c.runTopic(ctx, topic, jobs)
}

// runTopic runs one enqueue call of topic, as its lifecycle does.
func (c *Client) runTopic(ctx context.Context, topic string, jobs []NewJob) ([]EnqueueResult, error) {
	return c.lifecycle(topic).enqueue(ctx, topic, jobs)
}

// batcherFor returns topic's batcher, or nil when coalescing is off or
// too many topics have one already (the topics beyond maxCachedTopics, which
// only a misuse creates, enqueue uncoalesced rather than grow the map).
func (c *Client) batcherFor(topic string) *enqueueBatcher {
	if c.cfg.Coalesce < 0 {
		return nil
	}
	if b, ok := c.batchers.Load(topic); ok {
		return b.(*enqueueBatcher)
	}
	if c.batchersN.Load() >= maxCachedTopics {
		return nil
	}
	lim := coalesce.Limits[NewJob]{
		Items: c.cfg.Coalesce, Depth: c.cfg.CoalesceInFlight,
		Cost: c.cfg.CoalesceBytes, CostOf: func(j NewJob) int { return len(j.ID) + len(j.Payload) },
	}
	b, loaded := c.batchers.LoadOrStore(topic, coalesce.New(lim,
		func(ctx context.Context, jobs []NewJob) ([]EnqueueResult, error) {
			return c.runTopic(ctx, topic, jobs)
		}))
	if !loaded {
		c.batchersN.Add(1)
	}
	return b.(*enqueueBatcher)
}

// EnqueueWaiting says how many Enqueue and EnqueueBatch calls on topic wait
// behind its script call in flight: a gauge of coalescing.
//
// Plumbing: read by the program's metrics, exported for delayq's own
// packages.
func (c *Client) EnqueueWaiting(topic string) int {
	if b, ok := c.batchers.Load(topic); ok {
		return b.(*enqueueBatcher).Waiting()
	}
	return 0
}

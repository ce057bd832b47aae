package dataplane

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// EnqueueTick enqueues the job of one tick (Unix ms) of the periodic
// schedule name, unless the schedule's last tick is at or after it: the
// check, the new last tick and the enqueue are one step (a script on a
// redis topic, whose ticks hash keeps the last ticks; a transaction of
// store on a durable one). So a tick is enqueued once however many
// processes run the schedule, and a process that comes late to a tick
// whose job ran and was acked already does not enqueue it again. j is
// validated as by Enqueue (j.ID is the tick's job id, see package
// queue/periodic). store may be nil for a redis topic.
func (c *Client) EnqueueTick(ctx context.Context, store TickStore, topic, name string, tick int64, j NewJob) (TickResult, error) {
	if err := ValidateTopic(topic); err != nil {
		return TickResult{}, err
	}
	if err := ValidateID(name); err != nil {
		return TickResult{}, fmt.Errorf("queue: schedule name: %w", err)
	}
	return c.lifecycle(topic).enqueueTick(ctx, store, topic, name, tick, j)
}

// enqueueTick is EnqueueTick on a redis topic: periodic.lua, store unused.
func (t redisTopic) enqueueTick(ctx context.Context, _ TickStore, topic, name string, tick int64, j NewJob) (TickResult, error) {
	c := t.c
	if err := c.validate(&j, time.Now()); err != nil {
		return TickResult{}, err
	}
	k, err := c.keysFor(topic)
	if err != nil {
		return TickResult{}, err
	}
	if err := c.noteTopic(ctx, topic); err != nil {
		return TickResult{}, err
	}
	reply, err := c.scripts.periodic.Run(ctx, c.rdb, append([]string{k.due, k.job, k.wake, k.ticks}, k.levels()...),
		name, tick, j.ID, j.RunAt, j.MaxAttempts, (*bytesArg)(&j.Payload), j.Priority).Int64Slice()
	if err != nil {
		return TickResult{}, fmt.Errorf("queue: tick of %s on %s: %w", name, topic, err)
	}
	if len(reply) != 2 {
		return TickResult{}, fmt.Errorf("queue: tick of %s on %s: reply of %d values", name, topic, len(reply))
	}
	out := TickResult{Job: EnqueueResult{ID: j.ID}}
	switch reply[0] {
	case 0:
		out.Duplicate, out.LastTick, out.Job = true, reply[1], EnqueueResult{}
	case 1:
		out.Job.RunAt = reply[1]
		c.cfg.Observer.Enqueued(topic, 1)
	default:
		out.Job.Duplicate = true
	}
	return out, nil
}

// LastTicks returns the last tick enqueued (Unix ms) of each named periodic
// schedule of topic that has one, from where EnqueueTick keeps them: a
// schedule missing from the result never had a tick enqueued (or, on a
// redis topic, Redis lost it). store may be nil for a redis topic.
func (c *Client) LastTicks(ctx context.Context, store TickStore, topic string, names ...string) (map[string]int64, error) {
	if err := ValidateTopic(topic); err != nil {
		return nil, err
	}
	return c.lifecycle(topic).lastTicks(ctx, store, topic, names)
}

// lastTicks is LastTicks on a redis topic: its ticks hash, store unused.
func (t redisTopic) lastTicks(ctx context.Context, _ TickStore, topic string, names []string) (map[string]int64, error) {
	c := t.c
	k, err := c.keysFor(topic)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(names))
	if len(names) == 0 {
		return out, nil
	}
	vals, err := c.rdb.HMGet(ctx, k.ticks, names...).Result()
	if err != nil {
		return nil, fmt.Errorf("queue: last ticks of %s: %w", topic, err)
	}
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("queue: last tick of %s on %s: %q: %w", names[i], topic, s, err)
		}
		out[names[i]] = n
	}
	return out, nil
}

// TickStore is the SQL side of a durable topic's periodic ticks: the claim
// of a tick with its job's row in one transaction, then the push through q
// (docs/design.md §4.15). *ledger.Ledger is one.
type TickStore interface {
	EnqueueTick(ctx context.Context, q *Client, topic, name string, tick int64, j NewJob) (TickResult, error)
	LastTicks(ctx context.Context, names ...string) (map[string]int64, error)
}

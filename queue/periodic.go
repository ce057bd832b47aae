package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// TickResult says what became of one tick of a periodic schedule
// (EnqueueTick).
type TickResult struct {
	// Duplicate: the tick was enqueued already, by this or another process
	// (the schedule's last tick is at or after it); nothing was written.
	Duplicate bool
	// LastTick is the schedule's last tick enqueued (Unix ms) before this
	// call, for a duplicate.
	LastTick int64
	// Job is the job's outcome when the tick was claimed: its Duplicate is
	// set if the job id was known already (waiting, in flight or dead).
	Job EnqueueResult
}

// ErrTickDurable is what EnqueueTick returns for a durable topic: its ticks
// are claimed in SQL (ledger.Ledger.EnqueueTick), with the job, in one
// transaction.
var ErrTickDurable = errors.New("the ticks of a durable topic are claimed in SQL")

// EnqueueTick enqueues the job of one tick (Unix ms) of the periodic
// schedule name on a Redis topic, unless the schedule's last tick recorded
// in Redis (the topic's ticks hash) is at or after it: the check, the new
// last tick and the enqueue are one script (periodic.lua). So a tick is
// enqueued once however many processes run the schedule, and a process
// that comes late to a tick whose job ran and was acked already does not
// enqueue it again. j is validated as by Enqueue (j.ID is the tick's job
// id, see package queue/periodic).
func (c *Client) EnqueueTick(ctx context.Context, topic, name string, tick int64, j NewJob) (TickResult, error) {
	if err := ValidateTopic(topic); err != nil {
		return TickResult{}, err
	}
	if c.IsDurable(topic) {
		return TickResult{}, fmt.Errorf("queue: tick of %s on %s: %w", name, topic, ErrTickDurable)
	}
	if err := ValidateID(name); err != nil {
		return TickResult{}, fmt.Errorf("queue: schedule name: %w", err)
	}
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
	reply, err := c.scripts.periodic.Run(ctx, c.rdb, []string{k.due, k.job, k.wake, k.ticks},
		name, tick, j.ID, j.RunAt, j.MaxAttempts, (*bytesArg)(&j.Payload)).Int64Slice()
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
// schedule of a Redis topic that has one: a schedule missing from the
// result never had a tick enqueued (or Redis lost it).
func (c *Client) LastTicks(ctx context.Context, topic string, names ...string) (map[string]int64, error) {
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

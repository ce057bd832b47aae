package dataplane

import (
	"context"
	"fmt"
)

// deadChunk is how many dead jobs one script call moves or deletes, so a
// huge dead set never blocks Redis in one long call.
const deadChunk = 500

// RequeueDead moves one dead job back to due, now, with its attempts reset.
// It returns ErrNotFound when the id is not dead.
func (c *Client) RequeueDead(ctx context.Context, topic, id string) error {
	if err := ValidateTopic(topic); err != nil {
		return err
	}
	if err := ValidateID(id); err != nil {
		return err
	}
	name, err := c.nameOf(ctx, nil, topic, id)
	if err != nil {
		return err
	}
	return c.lifecycle(topic).requeueDead(ctx, name, id)
}

// requeueKeys are requeue.lua's keys.
func requeueKeys(k keys) []string {
	return append(append([]string{k.dead, k.due, k.job, k.wake, k.cancel}, k.ordered()...), k.lease)
}

// requeueDead requeues a dead job of a redis topic: one script.
func (t redisTopic) requeueDead(ctx context.Context, topic, id string) error {
	c := t.c
	k, err := c.keysFor(topic)
	if err != nil {
		return err
	}
	n, err := c.scripts.requeue.Run(ctx, c.rdb, requeueKeys(k), "one", id).Int()
	if err != nil {
		return fmt.Errorf("queue: requeue dead %s/%s: %w", topic, id, err)
	}
	if n == 0 {
		return fmt.Errorf("queue: requeue dead %s/%s: %w", topic, id, ErrNotFound)
	}
	return nil
}

// RequeueAllDead moves every dead job of topic back to due, in chunks, and
// returns how many moved.
func (c *Client) RequeueAllDead(ctx context.Context, topic string) (int, error) {
	if err := ValidateTopic(topic); err != nil {
		return 0, err
	}
	return c.eachPartition(ctx, topic, func(name string) (int, error) {
		return c.lifecycle(name).requeueAllDead(ctx, name)
	})
}

// requeueAllDead requeues every dead job of a redis topic, deadChunk per
// script call.
func (t redisTopic) requeueAllDead(ctx context.Context, topic string) (int, error) {
	c := t.c
	k, err := c.keysFor(topic)
	if err != nil {
		return 0, err
	}
	total := 0
	for {
		n, err := c.scripts.requeue.Run(ctx, c.rdb, requeueKeys(k), "all", deadChunk).Int()
		if err != nil {
			return total, fmt.Errorf("queue: requeue dead of %s: %w", topic, err)
		}
		total += n
		if n < deadChunk {
			return total, nil
		}
	}
}

// PurgeDead deletes the dead jobs of topic that died at or before before
// (Unix ms), in chunks, and returns how many it deleted.
func (c *Client) PurgeDead(ctx context.Context, topic string, before int64) (int, error) {
	if err := ValidateTopic(topic); err != nil {
		return 0, err
	}
	return c.eachPartition(ctx, topic, func(name string) (int, error) { return c.purgeDead(ctx, name, before) })
}

// purgeDead is PurgeDead on one partition (or a topic of one).
func (c *Client) purgeDead(ctx context.Context, topic string, before int64) (int, error) {
	k, err := c.keysFor(topic)
	if err != nil {
		return 0, err
	}
	total := 0
	window := c.lifecycle(topic).takenFor(topic).Milliseconds()
	for {
		n, err := c.scripts.purge.Run(ctx, c.rdb, []string{k.dead, k.job, k.taken, k.prio, k.okey}, before, deadChunk, window).Int()
		if err != nil {
			return total, fmt.Errorf("queue: purge dead of %s: %w", topic, err)
		}
		total += n
		if n < deadChunk {
			return total, nil
		}
	}
}

// requeueDead requeues a dead job of a durable topic as a new job: a
// waiting row first (SQL is the truth), due now, then the push, which
// replaces the dead envelope (restore.lua, mode scheduled). A row of the id
// already there is a newer job of the same id: nothing is done.
func (t durableTopic) requeueDead(ctx context.Context, topic, id string) error {
	c := t.c
	info, err := c.getPart(ctx, topic, id)
	if err != nil {
		return err
	}
	if info.State != StateDead {
		return fmt.Errorf("queue: requeue dead %s/%s: %w", topic, id, ErrNotFound)
	}
	out, err := t.enqueue(ctx, topic, []NewJob{{ID: id, Payload: info.Job.Payload, MaxAttempts: info.Job.MaxAttempts, Priority: info.Job.Priority, OrderingKey: info.Job.OrderingKey}})
	if err != nil {
		return fmt.Errorf("queue: requeue dead %s/%s: %w", topic, id, err)
	}
	if out[0].Duplicate {
		return fmt.Errorf("queue: requeue dead %s/%s: a newer job with this id exists: %w", topic, id, ErrNotFound)
	}
	return nil
}

// requeueAllDead requeues every dead job of a durable topic, a page at a
// time, as requeueDead does one.
func (t durableTopic) requeueAllDead(ctx context.Context, topic string) (int, error) {
	c := t.c
	total := 0
	for {
		// topic may be a partition's name: its own set, not the merge.
		page, err := c.listPart(ctx, topic, StateDead, 0, deadChunk)
		if err != nil {
			return total, err
		}
		if len(page.Jobs) == 0 {
			return total, nil
		}
		jobs := make([]NewJob, len(page.Jobs))
		for i, j := range page.Jobs {
			jobs[i] = NewJob{ID: j.Job.ID, Payload: j.Job.Payload, MaxAttempts: j.Job.MaxAttempts, Priority: j.Job.Priority, OrderingKey: j.Job.OrderingKey}
		}
		out, err := t.enqueue(ctx, topic, jobs)
		if err != nil {
			return total, fmt.Errorf("queue: requeue dead of %s: %w", topic, err)
		}
		moved := 0
		for _, r := range out {
			if !r.Duplicate {
				moved++
			}
		}
		total += moved
		if moved == 0 {
			// What is left cannot move: newer jobs hold its ids, or its
			// rows are written and only the pushes failed (the page comes
			// back as duplicates; the relay pushes those rows).
			return total, nil
		}
	}
}

// DeleteDead deletes one dead job for good (its envelope and its place in
// the dead set). It returns ErrNotFound when the id is not dead: a waiting
// or running job is never touched. The same on both durabilities: a dead
// job has no ledger row (its history row is the caller's to mark).
func (c *Client) DeleteDead(ctx context.Context, topic, id string) error {
	if err := ValidateTopic(topic); err != nil {
		return err
	}
	if err := ValidateID(id); err != nil {
		return err
	}
	name, err := c.nameOf(ctx, nil, topic, id)
	if err != nil {
		return err
	}
	topic = name
	k, err := c.keysFor(topic)
	if err != nil {
		return err
	}
	n, err := c.scripts.deleteDead.Run(ctx, c.rdb, []string{k.dead, k.job, k.taken, k.prio, k.okey}, id,
		c.lifecycle(topic).takenFor(topic).Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("queue: delete dead %s/%s: %w", topic, id, err)
	}
	if n == 0 {
		return fmt.Errorf("queue: delete dead %s/%s: %w", topic, id, ErrNotFound)
	}
	c.forgetTraces(ctx, Ref{Topic: topic, ID: id})
	return nil
}

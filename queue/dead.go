package queue

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
	k, err := c.keysFor(topic)
	if err != nil {
		return err
	}
	n, err := c.scripts.requeue.Run(ctx, c.rdb, []string{k.dead, k.due, k.job, k.wake}, "one", id).Int()
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
	k, err := c.keysFor(topic)
	if err != nil {
		return 0, err
	}
	total := 0
	for {
		n, err := c.scripts.requeue.Run(ctx, c.rdb, []string{k.dead, k.due, k.job, k.wake}, "all", deadChunk).Int()
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
	k, err := c.keysFor(topic)
	if err != nil {
		return 0, err
	}
	total := 0
	for {
		n, err := c.scripts.purge.Run(ctx, c.rdb, []string{k.dead, k.job}, before, deadChunk).Int()
		if err != nil {
			return total, fmt.Errorf("queue: purge dead of %s: %w", topic, err)
		}
		total += n
		if n < deadChunk {
			return total, nil
		}
	}
}

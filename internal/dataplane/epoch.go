package dataplane

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Each topic has an epoch marker (dq:{T}:epoch), a plain string that only
// the recoverer writes and nothing ever deletes. Redis losing data (a
// restart without persistence, a FLUSHALL, a failover to a replica that was
// behind) loses the marker with the jobs, so a missing marker while the
// ledger still holds rows of the topic means Redis lost jobs.

// EpochMissing returns the topics among topics whose epoch marker is
// missing, in the order given: one pipelined EXISTS per topic, one round
// trip.
func (c *Client) EpochMissing(ctx context.Context, topics []string) ([]string, error) {
	if len(topics) == 0 {
		return nil, nil
	}
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(topics))
	for i, t := range topics {
		k, err := c.keysFor(t)
		if err != nil {
			return nil, err
		}
		cmds[i] = pipe.Exists(ctx, k.epoch)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("queue: check epoch markers of %d topics: %w", len(topics), err)
	}
	var missing []string
	for i, cmd := range cmds {
		if cmd.Val() == 0 {
			missing = append(missing, topics[i])
		}
	}
	return missing, nil
}

// EnsureEpoch writes the epoch marker of each topic that has none (SET NX,
// pipelined, one round trip), with value as its content (who wrote it and
// when, for a human reading it in redis-cli). It returns the topics whose
// marker it wrote, in the order given; a marker already there is kept.
//
// Plumbing: a step of the recoverer's, exported for delayq's own packages; a
// service runs jobs through engine.Engine (or a Worker), never by
// calling it.
func (c *Client) EnsureEpoch(ctx context.Context, topics []string, value string) ([]string, error) {
	if len(topics) == 0 {
		return nil, nil
	}
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.BoolCmd, len(topics))
	for i, t := range topics {
		k, err := c.keysFor(t)
		if err != nil {
			return nil, err
		}
		cmds[i] = pipe.SetNX(ctx, k.epoch, value, 0)
	}
	_, err := pipe.Exec(ctx)
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("queue: write epoch markers of %d topics: %w", len(topics), err)
	}
	var written []string
	for i, cmd := range cmds {
		if cmd.Val() {
			written = append(written, topics[i])
		}
	}
	return written, nil
}

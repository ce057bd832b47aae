package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// claimSuperseded reports whether Redis shows that a claim no longer owns
// its job for good: another claim took it (the envelope's attempt is not
// the claim's), or it was settled (no envelope, and a tombstone, or the
// epoch marker still there, so Redis did not lose it). It reports false
// when the job may still be the claim's: its envelope at the claim's
// attempt (an expired lease nobody took yet), or no trace with the marker
// gone (Redis lost data; the recoverer restores the job from its row).
//
// The worker asks only for a job whose lease ran out before its handler
// started (a process stalled between claim and handler): its ledger row,
// written late, would otherwise outlive a run and settlement on another
// worker, and recovery would run the job again or find it dead in Redis
// and keep the row forever. One round trip: three reads in the topic's
// slot.
func (c *Client) claimSuperseded(ctx context.Context, r Ref) (bool, error) {
	k, err := c.keysFor(r.Topic)
	if err != nil {
		return false, err
	}
	pipe := c.rdb.Pipeline()
	env := pipe.HGet(ctx, k.job, r.ID)
	gone := pipe.ZScore(ctx, k.gone, r.ID)
	epoch := pipe.Exists(ctx, k.epoch)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("queue: check the claim of %s/%s: %w", r.Topic, r.ID, err)
	}
	if raw, err := env.Bytes(); err == nil {
		var j Job
		if err := decodeEnvelope(raw, &j); err != nil {
			return false, fmt.Errorf("queue: check the claim of %s/%s: %w", r.Topic, r.ID, err)
		}
		return j.Attempt != r.Attempt, nil
	}
	return gone.Err() == nil || epoch.Val() == 1, nil
}

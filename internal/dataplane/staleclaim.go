package dataplane

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// claimSuperseded reports whether Redis shows that a claim's job is dead
// or settled, so that a row written for the claim is stale for good: the
// job is in the dead set, or it has no envelope and either a tombstone or
// the topic's epoch marker is there (Redis did not lose it). It reports
// false while the job lives (its envelope in due or in a lease): whichever
// claim takes it next records a row at a higher attempt, which Record
// writes over this claim's. It also reports false for no trace and no
// marker: Redis may have lost the job, and the recoverer restores it from
// its row.
//
// The worker asks only for a job whose lease ran out before its handler
// started (a process stalled between claim and handler): its ledger row,
// written late, would otherwise outlive the job's run and settlement on
// another worker, and the recoverer would run the job again (settled) or
// keep the row forever (dead: Redis still tracks it). One round trip:
// four reads in the topic's slot.
func (c *Client) claimSuperseded(ctx context.Context, r Ref) (bool, error) {
	k, err := c.keysFor(r.Topic)
	if err != nil {
		return false, err
	}
	pipe := c.rdb.Pipeline()
	env := pipe.HExists(ctx, k.job, r.ID)
	dead := pipe.ZScore(ctx, k.dead, r.ID)
	gone := pipe.ZScore(ctx, k.gone, r.ID)
	epoch := pipe.Exists(ctx, k.epoch)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("queue: check the claim of %s/%s: %w", r.Topic, r.ID, err)
	}
	switch {
	case dead.Err() == nil:
		return true, nil
	case env.Val():
		return false, nil
	default:
		return gone.Err() == nil || epoch.Val() == 1, nil
	}
}

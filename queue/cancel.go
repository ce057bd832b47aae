package queue

import (
	"context"
	"fmt"
)

// Cancel removes a job that is still waiting (first run or retry backoff)
// and returns it. It returns ErrNotFound for an unknown id, ErrInFlight when
// a worker holds the job (its handler may be running), ErrDead for a dead
// job. A cancelled job with Attempt > 0 was waiting for a retry and still has
// a ledger row, which the caller deletes.
func (c *Client) Cancel(ctx context.Context, topic, id string) (*Job, error) {
	if err := ValidateTopic(topic); err != nil {
		return nil, err
	}
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	k, err := c.keysFor(topic)
	if err != nil {
		return nil, err
	}
	reply, err := c.scripts.cancel.Run(ctx, c.rdb, []string{k.due, k.lease, k.job, k.dead}, id).Slice()
	if err != nil {
		return nil, fmt.Errorf("queue: cancel %s/%s: %w", topic, id, err)
	}
	switch asInt64(reply[0]) {
	case 1:
		j := &Job{Topic: topic, ID: id}
		if env, ok := reply[1].(string); ok {
			if err := decodeEnvelope([]byte(env), j); err != nil {
				return nil, fmt.Errorf("queue: cancel %s/%s: %w", topic, id, err)
			}
		}
		return j, nil
	case -1:
		return nil, fmt.Errorf("queue: cancel %s/%s: %w", topic, id, ErrInFlight)
	case -2:
		return nil, fmt.Errorf("queue: cancel %s/%s: %w", topic, id, ErrDead)
	}
	return nil, fmt.Errorf("queue: cancel %s/%s: %w", topic, id, ErrNotFound)
}

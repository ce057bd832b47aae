package queue

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Claimed is what one Claim call took from a topic.
type Claimed struct {
	Jobs   []*Job // leased to the caller, attempt bumped, LeaseUntil set
	Buried []*Job // came round more than max-attempts times (their workers died): now dead
	// Now is Redis's clock when the claim ran, Unix ms.
	Now int64
	// NextDue is the earliest due time still waiting, Unix ms (0 if none);
	// NextLease the earliest lease deadline (0 if none). A fetcher can sleep
	// until the earlier of the two.
	NextDue, NextLease int64
	// Paused says the topic is paused (Client.Pause): nothing was claimed,
	// and nothing will be until it is resumed, which publishes on the
	// topic's wake channel.
	Paused bool
}

// Claim leases up to n due jobs of topic for lease. Jobs whose lease expired
// go back first, bounded per call by Config.ExpiredPerClaim.
func (c *Client) Claim(ctx context.Context, topic string, n int, lease time.Duration) (*Claimed, error) {
	if n < 1 {
		return nil, fmt.Errorf("queue: claim from %s: n = %d, must be positive", topic, n)
	}
	if lease < time.Millisecond {
		return nil, fmt.Errorf("queue: claim from %s: lease %s too short", topic, lease)
	}
	k, err := c.keysFor(topic)
	if err != nil {
		return nil, err
	}
	// KEYS[6] and ARGV[4..5] are the rate limit's (docs/design.md §2);
	// this build passes its key name and "no limit".
	rate := strings.TrimSuffix(k.due, "due") + "rate"
	reply, err := c.scripts.claim.Run(ctx, c.rdb, []string{k.due, k.lease, k.job, k.dead, k.paused, rate},
		n, lease.Milliseconds(), c.cfg.ExpiredPerClaim, 0, 0).Slice()
	if err != nil {
		return nil, fmt.Errorf("queue: claim from %s: %w", topic, err)
	}
	if len(reply) != 7 {
		return nil, fmt.Errorf("queue: claim from %s: reply of %d values", topic, len(reply))
	}
	res := &Claimed{Now: asInt64(reply[0]), NextDue: max(asInt64(reply[1]), 0), NextLease: max(asInt64(reply[2]), 0),
		Paused: asInt64(reply[5]) == 1}
	leaseUntil := res.Now + lease.Milliseconds()
	if res.Jobs, err = decodeJobs(topic, reply[3]); err != nil {
		return nil, fmt.Errorf("queue: claim from %s: %w", topic, err)
	}
	for _, j := range res.Jobs {
		j.LeaseUntil = leaseUntil
	}
	if res.Buried, err = decodeJobs(topic, reply[4]); err != nil {
		return nil, fmt.Errorf("queue: claim from %s: %w", topic, err)
	}
	return res, nil
}

// decodeJobs decodes a script's flat {id, envelope, ...} array.
func decodeJobs(topic string, v any) ([]*Job, error) {
	flat, _ := v.([]any)
	if len(flat)%2 != 0 {
		return nil, fmt.Errorf("%w: odd id/envelope list", ErrBadEnvelope)
	}
	jobs := make([]*Job, 0, len(flat)/2)
	for i := 0; i < len(flat); i += 2 {
		id, _ := flat[i].(string)
		env, _ := flat[i+1].(string)
		j := &Job{Topic: topic, ID: id}
		if err := decodeEnvelope([]byte(env), j); err != nil {
			return nil, fmt.Errorf("job %s: %w", id, err)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// asInt64 reads an integer from a script reply.
func asInt64(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case int:
		return int64(n)
	}
	return 0
}

package dataplane

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Claimed is what one Claim call took from a topic.
type Claimed struct {
	Jobs   []*Job // leased to the caller, attempt bumped, LeaseUntil set
	Buried []*Job // came round more than max-attempts times (their workers died): now dead
	// Now is Redis's clock when the claim ran, Unix ms.
	Now int64
	// nowMicros is Now in µs, for the worker's clock offset.
	nowMicros int64
	// NextDue is the earliest due time still waiting, Unix ms (0 if none);
	// NextLease the earliest lease deadline (0 if none). A fetcher can sleep
	// until the earlier of the two.
	NextDue, NextLease int64
	// NextToken, when the topic's rate limit held due jobs back (fewer or
	// none claimed for lack of tokens), is when the next token is there,
	// Redis ms; 0 otherwise. The fetcher sleeps until then.
	NextToken int64
	// Asked are the ids among Jobs whose cancel was asked during an
	// earlier claim (its worker died before the job ended): the worker
	// settles them cancelled without running them (CancelRunning).
	Asked map[string]bool
	// Paused says the topic is paused (Client.Pause): nothing was claimed,
	// and nothing will be until it is resumed, which publishes on the
	// topic's wake channel.
	Paused bool
}

// Claim leases up to n due jobs of topic for lease. Jobs whose lease expired
// go back first, bounded per call by Config.ExpiredPerClaim.
//
// Plumbing: a step of the Worker, exported for delayq's own packages. A
// claim alone writes no ledger row: until Ledger.Record does, nothing
// brings the job back if Redis loses it, which is why the Worker records
// every claim before its handler runs. A service runs jobs through
// engine.Engine (or a Worker), never by calling Claim.
func (c *Client) Claim(ctx context.Context, topic string, n int, lease time.Duration) (*Claimed, error) {
	return c.ClaimLimited(ctx, topic, n, lease, RateLimit{})
}

// ClaimLimited is Claim under the topic's rate limit: it takes no more jobs
// than the topic's token bucket holds tokens, and reports in NextToken when
// it held due jobs back. Every claimer of a topic should pass the same
// limit: the bucket is shared, each claim refills it at its own rate.
func (c *Client) ClaimLimited(ctx context.Context, topic string, n int, lease time.Duration, limit RateLimit) (*Claimed, error) {
	return c.claim(ctx, topic, claimOpts{n: n, nDue: n, lease: lease, limit: limit, oldestEvery: DefaultOldestEvery})
}

// claimOpts are a claim's arguments.
type claimOpts struct {
	n, nDue int // the most jobs to take, and of them already due
	lease   time.Duration
	limit   RateLimit
	ahead   time.Duration // also take jobs due within this long (ClaimAhead)
	// oldestEvery: one due job in this many taken is the one due longest
	// (TopicConfig.OldestEvery).
	oldestEvery int
}

// claim is ClaimLimited that also takes jobs due within ahead of Redis's
// clock (TopicConfig.ClaimAhead): the caller must not start one before its
// due time.
//
// Of the n, at most nDue may be due already: the rest are jobs due within
// ahead (a fetcher whose handlers are busy leaves due jobs to others but
// may still hold the coming ones).
func (c *Client) claim(ctx context.Context, topic string, o claimOpts) (*Claimed, error) {
	n, lease, limit := o.n, o.lease, o.limit
	if err := limit.Validate(); err != nil {
		return nil, fmt.Errorf("queue: claim from %s: %w", topic, err)
	}
	if n < 1 {
		return nil, fmt.Errorf("queue: claim from %s: n = %d, must be positive", topic, n)
	}
	if lease < time.Millisecond {
		return nil, fmt.Errorf("queue: claim from %s: lease %s too short", topic, lease)
	}
	if limit.PerSecond > 0 && IsPartition(topic) {
		return c.claimShared(ctx, topic, o)
	}
	return c.runClaim(ctx, topic, o)
}

// runClaim runs claim.lua for claim, its arguments checked; n = 0 hands out
// nothing but still puts expired leases back (and buries the poison ones)
// and reads the next due time and lease deadline.
func (c *Client) runClaim(ctx context.Context, topic string, o claimOpts) (*Claimed, error) {
	k, err := c.keysFor(topic)
	if err != nil {
		return nil, err
	}
	lease, limit := o.lease, o.limit
	reply, err := c.scripts.claim.Run(ctx, c.rdb,
		append(append(append([]string{k.due, k.lease, k.job, k.dead, k.paused, k.rate, k.runs, k.cancel}, k.levels()...), k.turn), k.order()...),
		o.n, lease.Milliseconds(), c.cfg.ExpiredPerClaim,
		strconv.FormatFloat(limit.PerSecond, 'g', -1, 64), limit.Burst, max(o.ahead.Milliseconds(), 0), o.nDue,
		min(max(o.oldestEvery, 1), MaxOldestEvery)).Slice()
	if err != nil {
		return nil, fmt.Errorf("queue: claim from %s: %w", topic, err)
	}
	if len(reply) != 12 {
		return nil, fmt.Errorf("queue: claim from %s: reply of %d values", topic, len(reply))
	}
	res := &Claimed{Now: asInt64(reply[0]), NextDue: max(asInt64(reply[1]), 0), NextLease: max(asInt64(reply[2]), 0),
		Paused: asInt64(reply[5]) == 1, NextToken: max(asInt64(reply[6]), 0), nowMicros: asInt64(reply[7])}
	leaseUntil := res.Now + lease.Milliseconds()
	if res.Jobs, err = decodeJobs(topic, reply[3]); err != nil {
		return nil, fmt.Errorf("queue: claim from %s: %w", topic, err)
	}
	durable := c.lifecycle(topic).waitsInSQL()
	runs := runsOf(reply[8])
	levels := runsOf(reply[10]) // the same {id, number, ...} shape
	okeys := textsOf(reply[11])
	for _, j := range res.Jobs {
		j.LeaseUntil, j.ClaimedAt, j.Durable = leaseUntil, res.Now, durable
		j.Delivery = 1 + runs[j.ID]
		j.Priority = levels[j.ID]
		j.OrderingKey = okeys[j.ID]
	}
	if ids, _ := reply[9].([]any); len(ids) > 0 {
		res.Asked = make(map[string]bool, len(ids))
		for _, id := range ids {
			if s, ok := id.(string); ok {
				res.Asked[s] = true
			}
		}
	}
	if res.Buried, err = decodeJobs(topic, reply[4]); err != nil {
		return nil, fmt.Errorf("queue: claim from %s: %w", topic, err)
	}
	return res, nil
}

// claimShared is claim for a partition of a rate-limited topic of several
// partitions. The limit is the topic's, whatever its partition count, so
// the tokens come from one bucket in the slot of the topic's own name
// (ratetake.lua), which the partition's claim cannot reach: take up to n
// tokens, claim at most that many jobs with no limit of the partition's
// own, give back the tokens no job took. Two or three round trips instead
// of one, for limited partitioned topics only.
func (c *Client) claimShared(ctx context.Context, partition string, o claimOpts) (*Claimed, error) {
	n, limit := o.n, o.limit
	tk, err := c.keysFor(TopicOf(partition))
	if err != nil {
		return nil, err
	}
	take := func(want, back int, takenAt int64, level string) ([]any, error) {
		return c.scripts.rateTake.Run(ctx, c.rdb, []string{tk.rate, tk.paused},
			want, strconv.FormatFloat(limit.PerSecond, 'g', -1, 64), limit.Burst, back, takenAt, level).Slice()
	}
	reply, err := take(n, 0, 0, "0")
	if err != nil {
		return nil, fmt.Errorf("queue: claim from %s: take tokens: %w", partition, err)
	}
	if len(reply) != 5 {
		return nil, fmt.Errorf("queue: claim from %s: take tokens: reply of %d values", partition, len(reply))
	}
	granted, nextToken, paused := int(asInt64(reply[0])), max(asInt64(reply[1]), 0), asInt64(reply[2]) == 1
	takenAt := asInt64(reply[3])
	level, _ := reply[4].(string)
	// A claim of what the tokens allow (none: only the expired leases go
	// back, and the next due time is read, so that a partition with nothing
	// due does not report itself held back by the limit).
	o.n, o.nDue, o.limit = granted, min(o.nDue, granted), RateLimit{}
	res, err := c.runClaim(ctx, partition, o)
	spent := 0
	if err == nil {
		spent = len(res.Jobs)
	}
	if spent < granted {
		// Best effort: a give-back that fails only leaves the topic
		// slower for a moment, never faster than its limit.
		_, _ = take(0, granted-spent, takenAt, level)
	}
	if err != nil {
		return nil, err
	}
	res.Paused = res.Paused || paused
	if !res.Paused && spent == granted && granted < n && res.NextDue > 0 && res.NextDue <= res.Now {
		// Due jobs were held back for lack of tokens.
		res.NextToken = nextToken
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

// runsOf reads claim.lua's flat {id, runs, ...} list: how many runs of
// each listed job ended before this claim (jobs not listed: none).
func runsOf(v any) map[string]int {
	flat, _ := v.([]any)
	if len(flat) == 0 {
		return nil
	}
	m := make(map[string]int, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		id, _ := flat[i].(string)
		m[id] = int(asInt64(flat[i+1]))
	}
	return m
}

// textsOf reads a flat {id, text, ...} script reply.
func textsOf(v any) map[string]string {
	flat, _ := v.([]any)
	if len(flat) == 0 {
		return nil
	}
	m := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		id, _ := flat[i].(string)
		m[id], _ = flat[i+1].(string)
	}
	return m
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

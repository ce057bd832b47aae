package dataplane

import (
	"context"
	"fmt"
	"strconv"
)

// Find is Get, and for a durable topic whose job Redis does not have, the
// job as its ledger row l describes it: a waiting job beyond the horizon
// (or not pushed yet, or lost by Redis) is in its row's state (waiting or
// retrying) with SQLOnly set; one a worker holds is StateInFlight. The API
// and the CLI show jobs this way.
func (c *Client) Find(ctx context.Context, l Ledger, topic, id string) (*JobInfo, error) {
	info, err := c.Get(ctx, topic, id)
	if err != nil || info.State != StateUnknown || l == nil || !c.lifecycle(topic).waitsInSQL() {
		return info, err
	}
	row, err := l.Lookup(ctx, topic, id)
	if err != nil {
		return nil, fmt.Errorf("queue: find %s/%s: %w: %w", topic, id, ErrLedger, err)
	}
	if row == nil {
		return info, nil
	}
	return &JobInfo{State: row.State, Score: row.RunAt, SQLOnly: true, Job: &Job{
		Topic: topic, ID: id, Payload: row.Payload, Attempt: row.Attempt, MaxAttempts: row.MaxAttempts,
		EnqueuedAt: row.EnqueuedAt, RunAt: row.RunAt, LastError: row.LastError,
	}}, nil
}

// Get returns a job's state and envelope. An unknown id is not an error: its
// state is StateUnknown.
func (c *Client) Get(ctx context.Context, topic, id string) (*JobInfo, error) {
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
	reply, err := c.scripts.get.Run(ctx, c.rdb, []string{k.due, k.lease, k.job, k.dead}, id).Slice()
	if err != nil {
		return nil, fmt.Errorf("queue: get %s/%s: %w", topic, id, err)
	}
	set, _ := reply[0].(string)
	if len(reply) != 3 {
		return &JobInfo{State: StateUnknown}, nil
	}
	score, _ := reply[1].(string)
	f, err := strconv.ParseFloat(score, 64)
	if err != nil {
		return nil, fmt.Errorf("queue: get %s/%s: score %q: %w", topic, id, score, err)
	}
	env, _ := reply[2].(string)
	info := &JobInfo{Score: int64(f), Job: &Job{Topic: topic, ID: id}}
	if err := decodeEnvelope([]byte(env), info.Job); err != nil {
		return nil, fmt.Errorf("queue: get %s/%s: %w", topic, id, err)
	}
	info.State = stateInRedis(set, info.Job.Attempt)
	if info.State == StateInFlight {
		info.Job.LeaseUntil = info.Score
	}
	return info, nil
}

// Stats returns topic's counts without scanning any set.
func (c *Client) Stats(ctx context.Context, topic string) (Stats, error) {
	if err := ValidateTopic(topic); err != nil {
		return Stats{}, err
	}
	k, err := c.keysFor(topic)
	if err != nil {
		return Stats{}, err
	}
	r, err := c.scripts.stats.Run(ctx, c.rdb, []string{k.due, k.lease, k.dead}).Int64Slice()
	if err != nil {
		return Stats{}, fmt.Errorf("queue: stats of %s: %w", topic, err)
	}
	if len(r) != 6 {
		return Stats{}, fmt.Errorf("queue: stats of %s: reply of %d values", topic, len(r))
	}
	s := Stats{Topic: topic, Now: r[0], Due: r[1], DueNow: r[2], InFlight: r[3], Dead: r[4], NextDue: max(r[5], 0)}
	if s.NextDue > 0 && s.NextDue <= s.Now {
		s.OldestOverdueMs = s.Now - s.NextDue
	}
	return s, nil
}

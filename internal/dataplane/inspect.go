package dataplane

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Find is Get, and for a durable topic whose job Redis does not have, the
// job as its ledger row l describes it: a waiting job beyond the horizon
// (or not pushed yet, or lost by Redis) is in its row's state (waiting or
// retrying) with SQLOnly set; one a worker holds is StateInFlight. The API
// and the CLI show jobs this way.
func (c *Client) Find(ctx context.Context, l Ledger, topic, id string) (*JobInfo, error) {
	if err := ValidateTopic(topic); err != nil {
		return nil, err
	}
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	name, info, err := c.locateRow(ctx, l, topic, id)
	if err != nil || info.State != StateUnknown || l == nil || !c.lifecycle(topic).waitsInSQL() {
		c.traceInfo(ctx, info)
		return info, err
	}
	topic = name
	row, err := l.Lookup(ctx, topic, id)
	if err != nil {
		return nil, fmt.Errorf("queue: find %s/%s: %w: %w", topic, id, ErrLedger, err)
	}
	if row == nil {
		return info, nil
	}
	info = &JobInfo{State: row.State, Score: row.RunAt, SQLOnly: true, Job: &Job{
		Topic: TopicOf(topic), ID: id, Payload: row.Payload, Attempt: row.Attempt, MaxAttempts: row.MaxAttempts,
		EnqueuedAt: row.EnqueuedAt, RunAt: row.RunAt, LastError: row.LastError, Priority: row.Priority, OrderingKey: row.OrderingKey,
	}}
	if IsPartition(topic) {
		info.Job.Partition = topic
	}
	if c.cfg.Trace {
		info.Job.TraceParent = row.TraceParent // its trace key is written with its push
	}
	return info, nil
}

// Get returns a job's state and envelope. An unknown id is not an error: its
// state is StateUnknown. On a topic of several partitions it looks through
// them all (locate); the job's Partition names the one it is in.
func (c *Client) Get(ctx context.Context, topic, id string) (*JobInfo, error) {
	if err := ValidateTopic(topic); err != nil {
		return nil, err
	}
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	_, info, err := c.locate(ctx, topic, id)
	c.traceInfo(ctx, info)
	return info, err
}

// getPart is Get on one partition (or a topic of one), by its name. The
// job's Topic is the topic's and its Partition the partition's.
func (c *Client) getPart(ctx context.Context, topic, id string) (*JobInfo, error) {
	k, err := c.keysFor(topic)
	if err != nil {
		return nil, err
	}
	reply, err := c.scripts.get.Run(ctx, c.rdb, []string{k.due, k.lease, k.job, k.dead, k.cancel, k.prio, k.okey}, id).Slice()
	if err != nil {
		return nil, fmt.Errorf("queue: get %s/%s: %w", topic, id, err)
	}
	set, _ := reply[0].(string)
	if len(reply) != 6 {
		return &JobInfo{State: StateUnknown}, nil
	}
	score, _ := reply[1].(string)
	f, err := strconv.ParseFloat(score, 64)
	if err != nil {
		return nil, fmt.Errorf("queue: get %s/%s: score %q: %w", topic, id, score, err)
	}
	env, _ := reply[2].(string)
	info, err := listedJob(topic, id, f, env, true, set)
	if err != nil {
		return nil, fmt.Errorf("queue: get %s: %w", topic, err)
	}
	info.CancelRequestedAt = asInt64(reply[3])
	info.Job.Priority = int(asInt64(reply[4]))
	info.Job.OrderingKey, _ = reply[5].(string)
	return info, nil
}

// Stats returns topic's counts without scanning any set: on a topic of
// several partitions, their sums (the earliest next due time, the oldest
// overdue job, Redis's clock as the last partition read saw it).
func (c *Client) Stats(ctx context.Context, topic string) (Stats, error) {
	if err := ValidateTopic(topic); err != nil {
		return Stats{}, err
	}
	names, err := c.Partitions(ctx, topic)
	if err != nil {
		return Stats{}, err
	}
	if len(names) == 1 {
		s, err := c.statsPart(ctx, names[0])
		s.Topic = topic
		return s, err
	}
	// One round trip for every partition, not one each.
	calls := make([]scriptCall, len(names))
	for i, name := range names {
		k, err := c.keysFor(name)
		if err != nil {
			return Stats{}, err
		}
		calls[i] = scriptCall{keys: statsKeys(k)}
	}
	cmds := c.runEach(ctx, c.scripts.stats, calls, nil)
	var sum Stats
	for i, name := range names {
		s, err := statsOf(name, cmds[i])
		if err != nil {
			return Stats{}, err
		}
		if i == 0 {
			sum = s
			continue
		}
		sum.Now = max(sum.Now, s.Now)
		sum.Due += s.Due
		sum.DueNow += s.DueNow
		sum.InFlight += s.InFlight
		sum.Dead += s.Dead
		sum.Parked += s.Parked
		for l := range sum.ByPriority {
			sum.ByPriority[l] += s.ByPriority[l]
		}
		if s.NextDue > 0 && (sum.NextDue == 0 || s.NextDue < sum.NextDue) {
			sum.NextDue = s.NextDue
		}
		sum.OldestOverdueMs = max(sum.OldestOverdueMs, s.OldestOverdueMs)
	}
	sum.Topic = topic
	return sum, nil
}

// statsPart is Stats of one partition (or a topic of one), by its name.
func (c *Client) statsPart(ctx context.Context, topic string) (Stats, error) {
	k, err := c.keysFor(topic)
	if err != nil {
		return Stats{}, err
	}
	return statsOf(topic, c.scripts.stats.Run(ctx, c.rdb, statsKeys(k)))
}

// statsKeys are stats.lua's keys.
func statsKeys(k keys) []string {
	return append(append([]string{k.due, k.lease, k.dead}, k.pri[:]...), k.oq)
}

// statsOf reads stats.lua's reply for topic (a partition's name).
func statsOf(topic string, cmd *redis.Cmd) (Stats, error) {
	r, err := cmd.Int64Slice()
	if err != nil {
		return Stats{}, fmt.Errorf("queue: stats of %s: %w", topic, err)
	}
	if len(r) != 7+MaxPriority {
		return Stats{}, fmt.Errorf("queue: stats of %s: reply of %d values", topic, len(r))
	}
	s := Stats{Topic: topic, Now: r[0], Due: r[1], DueNow: r[2], InFlight: r[3], Dead: r[4], NextDue: max(r[5], 0)}
	s.ByPriority[0] = s.Due
	for l := 1; l <= MaxPriority; l++ {
		s.ByPriority[l] = r[5+l]
		s.ByPriority[0] -= r[5+l]
	}
	s.Parked = r[6+MaxPriority]
	if s.NextDue > 0 && s.NextDue <= s.Now {
		s.OldestOverdueMs = s.Now - s.NextDue
	}
	return s, nil
}

package dataplane

import (
	"cmp"
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strconv"
)

//go:embed lua/list.lua
var listLua string

// List returns limit jobs of topic from offset in one of Redis's sets,
// named by a state: waiting lists the due set, which holds the jobs
// waiting for a retry too (each JobInfo has its own state), in_flight the
// leases and dead the dead letters; dead jobs newest first, the others
// earliest first.
func (c *Client) List(ctx context.Context, topic string, state State, offset, limit int) (*Page, error) {
	if err := ValidateTopic(topic); err != nil {
		return nil, err
	}
	if offset < 0 || limit < 1 || limit > MaxPage {
		return nil, fmt.Errorf("queue: list %s: offset %d, limit %d: want offset >= 0 and limit 1-%d", topic, offset, limit, MaxPage)
	}
	names, err := c.Partitions(ctx, topic)
	if err != nil {
		return nil, err
	}
	if len(names) == 1 {
		return c.listPart(ctx, names[0], state, offset, limit)
	}
	return c.listMerged(ctx, names, state, offset, limit)
}

// maxMergedOffset bounds how deep List pages through a topic of several
// partitions: each page reads offset+limit jobs of every partition.
const maxMergedOffset = 10 * MaxPage

// listMerged is List over several partitions: the first offset+limit of
// each, merged in the state's order, then the page.
func (c *Client) listMerged(ctx context.Context, names []string, state State, offset, limit int) (*Page, error) {
	if offset > maxMergedOffset {
		return nil, fmt.Errorf("queue: list %s: offset %d: a topic of several partitions pages up to offset %d", TopicOf(names[0]), offset, maxMergedOffset)
	}
	out := &Page{}
	for _, name := range names {
		p, err := c.listPart(ctx, name, state, 0, offset+limit)
		if err != nil {
			return nil, err
		}
		out.Total += p.Total
		out.Jobs = append(out.Jobs, p.Jobs...)
	}
	desc := state == StateDead
	slices.SortStableFunc(out.Jobs, func(a, b *JobInfo) int {
		if desc {
			return cmp.Compare(b.Score, a.Score)
		}
		return cmp.Compare(a.Score, b.Score)
	})
	out.Jobs = out.Jobs[min(offset, len(out.Jobs)):min(offset+limit, len(out.Jobs))]
	return out, nil
}

// listPart is List on one partition (or a topic of one), by its name;
// limit is not bounded by MaxPage (listMerged reads deeper).
func (c *Client) listPart(ctx context.Context, topic string, state State, offset, limit int) (*Page, error) {
	k, err := c.keysFor(topic)
	if err != nil {
		return nil, err
	}
	set, in, order := "", "", "asc"
	switch state {
	case StateWaiting:
		set, in = k.due, inDue
	case StateInFlight:
		set, in = k.lease, inLease
	case StateDead:
		set, in, order = k.dead, inDead, "desc"
	default:
		return nil, fmt.Errorf("queue: list %s: cannot list state %q", topic, state)
	}
	reply, err := c.listScript.Run(ctx, c.rdb, []string{set, k.job}, order, offset, limit).Slice()
	if err != nil {
		return nil, fmt.Errorf("queue: list %s %s: %w", topic, state, err)
	}
	p := &Page{Total: asInt64(reply[0])}
	for i := 1; i+2 < len(reply); i += 3 {
		id, _ := reply[i].(string)
		score, _ := reply[i+1].(string)
		f, _ := strconv.ParseFloat(score, 64)
		info := &JobInfo{Score: int64(f), Job: &Job{Topic: TopicOf(topic), ID: id}}
		if IsPartition(topic) {
			info.Job.Partition = topic
		}
		if env, ok := reply[i+2].(string); ok {
			if err := decodeEnvelope([]byte(env), info.Job); err != nil {
				return nil, fmt.Errorf("queue: list %s: job %s: %w", topic, id, err)
			}
		}
		info.State = stateInRedis(in, info.Job.Attempt)
		if info.State == StateInFlight {
			info.Job.LeaseUntil = info.Score
		}
		p.Jobs = append(p.Jobs, info)
	}
	return p, nil
}

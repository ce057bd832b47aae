package dataplane

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"
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

// maxMergedOffset and maxMergedEntries bound what one page of a topic of
// several partitions reads: offset+limit ids of every partition (K ×
// (offset+limit) ids and scores in all), so that a deep page on many
// partitions is refused rather than read (about 5 MB at the most).
const (
	maxMergedOffset  = 10 * MaxPage
	maxMergedEntries = 100 * MaxPage
)

// listMerged is List over several partitions, in two round trips (one per
// node of a cluster each) whatever their number: the first offset+limit
// ids and scores of each partition's set and its size, merged in the
// state's order; then the envelopes of the page's jobs alone.
func (c *Client) listMerged(ctx context.Context, names []string, state State, offset, limit int) (*Page, error) {
	topic := TopicOf(names[0])
	// The first page is always served (K × limit ids at the most).
	if deepest := max(0, min(maxMergedOffset, maxMergedEntries/len(names)-limit)); offset > deepest {
		return nil, &ValidationError{Field: "offset", Kind: ErrInvalid,
			Reason: fmt.Sprintf("%d: a topic of %d partitions pages up to offset %d at this limit", offset, len(names), deepest)}
	}
	type part struct {
		keys  keys
		total *redis.IntCmd
		ids   *redis.ZSliceCmd
	}
	parts := make([]part, len(names))
	pipe := c.rdb.Pipeline()
	for i, name := range names {
		k, err := c.keysFor(name)
		if err != nil {
			return nil, err
		}
		set, _, desc, err := listSet(k, state)
		if err != nil {
			return nil, fmt.Errorf("queue: list %s: %w", topic, err)
		}
		parts[i].keys = k
		parts[i].total = pipe.ZCard(ctx, set)
		rng := redis.ZRangeArgs{Key: set, Start: 0, Stop: offset + limit - 1, Rev: desc}
		parts[i].ids = pipe.ZRangeArgsWithScores(ctx, rng)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("queue: list %s %s: %w", topic, state, err)
	}
	type entry struct {
		part  int
		id    string
		score float64
	}
	out := &Page{}
	var all []entry
	for i, p := range parts {
		out.Total += p.total.Val()
		for _, z := range p.ids.Val() {
			id, _ := z.Member.(string)
			all = append(all, entry{part: i, id: id, score: z.Score})
		}
	}
	_, in, desc, _ := listSet(parts[0].keys, state)
	slices.SortStableFunc(all, func(a, b entry) int {
		if desc {
			return cmp.Compare(b.score, a.score)
		}
		return cmp.Compare(a.score, b.score)
	})
	page := all[min(offset, len(all)):min(offset+limit, len(all))]
	pipe = c.rdb.Pipeline()
	envs := make([]*redis.StringCmd, len(page))
	prios := make([]*redis.StringCmd, len(page))
	okeys := make([]*redis.StringCmd, len(page))
	for i, e := range page {
		envs[i] = pipe.HGet(ctx, parts[e.part].keys.job, e.id)
		prios[i] = pipe.HGet(ctx, parts[e.part].keys.prio, e.id)
		okeys[i] = pipe.HGet(ctx, parts[e.part].keys.okey, e.id)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("queue: list %s %s: %w", topic, state, err)
	}
	for i, e := range page {
		env, err := envs[i].Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("queue: list %s %s: %w", topic, state, err)
		}
		info, err := listedJob(names[e.part], e.id, e.score, env, err == nil, in)
		if err != nil {
			return nil, fmt.Errorf("queue: list %s: %w", names[e.part], err)
		}
		info.Job.Priority, _ = prios[i].Int() // redis.Nil: the default, 0
		info.Job.OrderingKey = orderingKeyOf(okeys[i].Val())
		out.Jobs = append(out.Jobs, info)
	}
	return out, nil
}

// listSet is the set of k that lists state, the set's name as
// stateInRedis knows it, and whether it lists newest first.
func listSet(k keys, state State) (set, in string, desc bool, err error) {
	switch state {
	case StateWaiting:
		return k.due, inDue, false, nil
	case StateInFlight:
		return k.lease, inLease, false, nil
	case StateDead:
		return k.dead, inDead, true, nil
	}
	return "", "", false, fmt.Errorf("cannot list state %q", state)
}

// listedJob is one job of topic (a partition's name) as Redis holds it: its
// id, its score in the set in, and its envelope when hasEnv (a listing may
// meet an id whose envelope is gone).
func listedJob(topic, id string, score float64, env string, hasEnv bool, in string) (*JobInfo, error) {
	info := &JobInfo{Score: int64(score), Job: &Job{Topic: TopicOf(topic), ID: id}}
	if in == inDue && info.Score >= parkScore {
		info.Score -= parkScore
		info.Parked = true
	}
	if IsPartition(topic) {
		info.Job.Partition = topic
	}
	if hasEnv {
		if err := decodeEnvelope([]byte(env), info.Job); err != nil {
			return nil, fmt.Errorf("job %s: %w", id, err)
		}
	}
	info.State = stateInRedis(in, info.Job.Attempt)
	if info.State == StateInFlight {
		info.Job.LeaseUntil = info.Score
	}
	return info, nil
}

// listPart is List on one partition (or a topic of one), by its name;
// limit is not bounded by MaxPage (listMerged reads deeper).
func (c *Client) listPart(ctx context.Context, topic string, state State, offset, limit int) (*Page, error) {
	k, err := c.keysFor(topic)
	if err != nil {
		return nil, err
	}
	set, in, desc, err := listSet(k, state)
	if err != nil {
		return nil, fmt.Errorf("queue: list %s: %w", topic, err)
	}
	order := "asc"
	if desc {
		order = "desc"
	}
	reply, err := c.listScript.Run(ctx, c.rdb, []string{set, k.job, k.prio, k.okey}, order, offset, limit).Slice()
	if err != nil {
		return nil, fmt.Errorf("queue: list %s %s: %w", topic, state, err)
	}
	p := &Page{Total: asInt64(reply[0])}
	for i := 1; i+4 < len(reply); i += 5 {
		id, _ := reply[i].(string)
		score, _ := reply[i+1].(string)
		f, _ := strconv.ParseFloat(score, 64)
		env, ok := reply[i+2].(string)
		info, err := listedJob(topic, id, f, env, ok, in)
		if err != nil {
			return nil, fmt.Errorf("queue: list %s: %w", topic, err)
		}
		info.Job.Priority = int(asInt64(reply[i+3]))
		info.Job.OrderingKey, _ = reply[i+4].(string)
		p.Jobs = append(p.Jobs, info)
	}
	return p, nil
}

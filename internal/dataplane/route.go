package dataplane

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// enqueue runs validated jobs of topic, each on its partition of the
// topic's current layout (layout.go): one call per partition the jobs
// fall in, side by side. If one of them fails the call fails, though the
// others may have written their jobs: an enqueue is idempotent by id (and
// partition key), so the caller's retry writes the rest.
func (c *Client) enqueue(ctx context.Context, topic string, jobs []NewJob) ([]EnqueueResult, error) {
	if c.lifecycle(topic).waitsInSQL() {
		// A durable topic's partitions share one commit per call
		// (durableTopic.enqueue), so its calls are coalesced by topic.
		return c.enqueuePart(ctx, topic, jobs)
	}
	l, err := c.enqueueLayout(ctx, topic)
	if err != nil {
		return nil, err
	}
	if l.Current() == 1 || c.oneNode() {
		// Off a cluster every partition's keys are on one node: the
		// topic's calls are coalesced by topic and go in one script call
		// over their partitions (redisTopic.enqueueSpread).
		return c.enqueuePart(ctx, topic, jobs)
	}
	names, groups := c.split(ctx, l, topic, jobs)
	if len(names) == 1 {
		return c.enqueuePart(ctx, names[0], jobs)
	}
	out := make([]EnqueueResult, len(jobs))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			idx := groups[name]
			sub := make([]NewJob, len(idx))
			for n, at := range idx {
				sub[n] = jobs[at]
			}
			res, err := c.enqueuePart(ctx, name, sub)
			if err != nil {
				errs[i] = err
				return
			}
			for n, at := range idx {
				out[at] = res[n]
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// enqueueLayout is the layout an enqueue routes by. Without a copy of the
// layout and with Redis not answering its read, the jobs go to the
// topic's own partition, count 1, which workers always claim from: a
// redis topic's enqueue then fails with the script call's own error, or
// succeeds if Redis is back (the job runs; only its key's grouping is
// lost). A durable topic enqueues with Redis down (its rows are the
// truth), so its read is bound by PushTimeout and skipped while pushes
// are (pushesPaused).
func (c *Client) enqueueLayout(ctx context.Context, topic string) (Layout, error) {
	if !c.lifecycle(topic).waitsInSQL() {
		l, err := c.Layout(ctx, topic)
		var ve *ValidationError
		if errors.As(err, &ve) {
			return Layout{}, err
		}
		return l, nil
	}
	if c.pushesPaused() {
		l, _ := c.cachedLayout(topic)
		return l, nil
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.PushTimeout)
	defer cancel()
	l, err := c.Layout(rctx, topic)
	if err != nil {
		c.pausePushes()
		return Layout{}, nil
	}
	return l, nil
}

// splitJobs is split, with each partition's jobs copied out.
func (c *Client) splitJobs(ctx context.Context, l Layout, topic string, jobs []NewJob) (names []string, subs [][]NewJob, at [][]int) {
	names, groups := c.split(ctx, l, topic, jobs)
	subs, at = make([][]NewJob, len(names)), make([][]int, len(names))
	for n, name := range names {
		at[n] = groups[name]
		subs[n] = make([]NewJob, len(at[n]))
		for k, i := range at[n] {
			subs[n][k] = jobs[i]
		}
	}
	return names, subs, at
}

// split sorts jobs by the partition of l's current layout each goes to
// (or of an older one, for a job whose ordering key is busy there:
// keyHomes): the partitions' names in order of first use, and the indexes
// in jobs of each one's jobs.
func (c *Client) split(ctx context.Context, l Layout, topic string, jobs []NewJob) (names []string, groups map[string][]int) {
	groups = make(map[string][]int)
	homes := c.keyHomes(ctx, l, topic, jobs)
	for i := range jobs {
		name, ok := homes[i]
		if !ok {
			name = c.route(l, topic, jobs[i].PartitionKey, jobs[i].ID)
		}
		if _, ok := groups[name]; !ok {
			names = append(names, name)
		}
		groups[name] = append(groups[name], i)
	}
	return names, groups
}

// locate finds job id of topic: on a topic of one partition, Get there;
// otherwise in every partition of every layout, the partition its id
// routes to in the current one first (the usual place). It returns the
// partition's name and the job; for an id no partition has, the current
// layout's partition for the id, where an id-routed job would be, and a
// StateUnknown job. A durable job that Redis does not have (beyond the
// horizon) is looked for in the ledger by locateRow.
func (c *Client) locate(ctx context.Context, topic, id string) (string, *JobInfo, error) {
	l, err := c.Layout(ctx, topic)
	if err != nil {
		return "", nil, err
	}
	home := c.route(l, topic, "", id)
	info, err := c.getPart(ctx, home, id)
	if err != nil || info.State != StateUnknown || l.single() {
		return home, info, err
	}
	// Not where the id routes (its partition key chose, or an older
	// layout has it): which other partition's job hash has it, in one
	// round trip (one per node of a cluster) however many there are, so
	// that a miss (a 404) costs no more on 256 partitions than on 2.
	var others []string
	for _, name := range l.Names(topic) {
		if name != home {
			others = append(others, name)
		}
	}
	pipe := c.rdb.Pipeline()
	has := make([]*redis.BoolCmd, len(others))
	for i, name := range others {
		k, err := c.keysFor(name)
		if err != nil {
			return "", nil, err
		}
		has[i] = pipe.HExists(ctx, k.job, id)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return "", nil, fmt.Errorf("queue: get %s/%s: %w", topic, id, err)
	}
	for i, name := range others {
		if !has[i].Val() {
			continue
		}
		other, err := c.getPart(ctx, name, id)
		if err != nil {
			return "", nil, err
		}
		if other.State != StateUnknown {
			return name, other, nil
		}
	}
	return home, info, nil
}

// eachPartition runs f on every partition of every layout of topic and
// sums what it returns; it stops at the first error, with the sum so far.
func (c *Client) eachPartition(ctx context.Context, topic string, f func(name string) (int, error)) (int, error) {
	names, err := c.Partitions(ctx, topic)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, name := range names {
		n, err := f(name)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// rowLookup is the ledger's lookup of one job's row.
type rowLookup interface {
	Lookup(ctx context.Context, topic, id string) (*RestoreRow, error)
}

// locateRow is locate, and for a durable topic's job that no partition has
// in Redis, the partition whose ledger row it is (one indexed lookup per
// partition, only then).
func (c *Client) locateRow(ctx context.Context, l rowLookup, topic, id string) (string, *JobInfo, error) {
	name, info, err := c.locate(ctx, topic, id)
	if err != nil || info.State != StateUnknown || l == nil || !IsPartition(name) || !c.lifecycle(topic).waitsInSQL() {
		return name, info, err
	}
	names, err := c.Partitions(ctx, topic)
	if err != nil {
		return "", nil, err
	}
	for _, other := range append([]string{name}, names...) {
		row, err := l.Lookup(ctx, other, id)
		if err != nil {
			return "", nil, fmt.Errorf("queue: find %s/%s: %w: %w", topic, id, ErrLedger, err)
		}
		if row != nil {
			return other, info, nil
		}
	}
	return name, info, nil
}

// nameOf is the name of the partition of topic that holds job id, for an
// operation that reads the job itself next (cancel, reschedule, the dead
// letters): a topic never partitioned is its own, without a Redis call.
func (c *Client) nameOf(ctx context.Context, l rowLookup, topic, id string) (string, error) {
	if lay, err := c.Layout(ctx, topic); err == nil && lay.single() {
		return topic, nil
	}
	name, _, err := c.locateRow(ctx, l, topic, id)
	return name, err
}

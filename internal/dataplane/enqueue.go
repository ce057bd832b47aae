package dataplane

import (
	"context"
	"fmt"
	"time"
)

// Enqueue adds one job to topic. An id already known is not written again:
// the result says Duplicate. Bad input returns a *ValidationError and writes
// nothing.
//
// Concurrent calls on one topic are coalesced (Config.Coalesce): those that
// arrive while a call is in flight go together in one script call, each
// with its own result and error, as if made one after the other. A call
// that finds room in flight (Config.CoalesceInFlight) goes out at once.
func (c *Client) Enqueue(ctx context.Context, topic string, j NewJob) (EnqueueResult, error) {
	if err := ValidateTopic(topic); err != nil {
		return EnqueueResult{}, err
	}
	if err := c.validate(&j, time.Now()); err != nil {
		return EnqueueResult{}, err
	}
	jobs := []NewJob{j}
	c.noteTraces(ctx, topic, jobs)
	out, err := c.enqueue(ctx, topic, jobs)
	if err != nil {
		return EnqueueResult{}, err
	}
	return out[0], nil
}

// EnqueueBatch adds up to Config.MaxBatch jobs to one topic in one round
// trip. Invalid jobs are reported as such and skipped; the others are
// created or reported as duplicates (a second job with the same id in the
// same batch is a duplicate too). A bad topic or an oversized batch fails
// the whole call before anything is written.
func (c *Client) EnqueueBatch(ctx context.Context, topic string, jobs []NewJob) ([]BatchResult, error) {
	if err := ValidateTopic(topic); err != nil {
		return nil, err
	}
	if len(jobs) > c.cfg.MaxBatch {
		return nil, &ValidationError{Field: "jobs", Kind: ErrBatchTooLarge,
			Reason: fmt.Sprintf("%d jobs: limit is %d", len(jobs), c.cfg.MaxBatch)}
	}
	results, valid, at := c.validateBatch(jobs)
	if len(valid) == 0 {
		return results, nil
	}
	c.noteTraces(ctx, topic, valid)
	out, err := c.enqueue(ctx, topic, valid)
	if err != nil {
		return nil, err
	}
	mergeResults(results, at, out)
	return results, nil
}

// enqueue is a redis topic's enqueue: enqueue.lua over validated jobs. A
// topic of several partitions (its calls coalesced by topic on a Redis
// that is not a cluster, route.go) goes to enqueueSpread.
func (t redisTopic) enqueue(ctx context.Context, topic string, jobs []NewJob) ([]EnqueueResult, error) {
	c := t.c
	if !IsPartition(topic) && c.oneNode() {
		if l, err := c.enqueueLayout(ctx, topic); err == nil && l.Current() > 1 {
			return t.enqueueSpread(ctx, l, topic, jobs)
		}
	}
	for i := range jobs {
		if jobs[i].Priority > 0 || jobs[i].OrderingKey != "" {
			// Grouped by priority, in one call.
			return t.enqueueGroups(ctx, topic, []enqueuePart{{name: topic, at: seq(len(jobs))}}, jobs)
		}
	}
	k, err := c.keysFor(topic)
	if err != nil {
		return nil, err
	}
	if err := c.noteTopic(ctx, topic); err != nil {
		return nil, err
	}
	n := len(jobs)
	args := make([]any, 4*n)
	whens := make([]int64, n)
	enqueueArgs(args, whens, jobs)
	// The taken ZSET always: a topic's window is kept by whoever acks its
	// jobs, so a producer configured without it still honours it.
	ks := []string{k.due, k.job, k.wake, k.taken}
	cmd := c.scripts.enqueue.Run(ctx, c.rdb, ks, args...)
	var reply []int64
	if n == 1 {
		var v int64
		v, err = cmd.Int64()
		reply = []int64{v}
	} else {
		reply, err = cmd.Int64Slice()
	}
	if err != nil {
		return nil, fmt.Errorf("queue: enqueue to %s: %w", topic, err)
	}
	return c.enqueued(topic, jobs, reply)
}

// enqueueArgs writes enqueue.lua's ARGV for jobs into args (4 per job):
// the ids, then when, max attempts and payload per job. Pointers into
// jobs and whens (one per job) go into the []any without an allocation
// each, as a string, an int64 or a []byte would.
func enqueueArgs(args []any, whens []int64, jobs []NewJob) {
	n := len(jobs)
	for i := range jobs {
		j := &jobs[i]
		whens[i] = -j.Delay.Milliseconds()
		if j.RunAt != 0 {
			whens[i] = j.RunAt
		}
		args[i] = &j.ID
		args[n+3*i] = &whens[i]
		args[n+3*i+1] = &j.MaxAttempts
		args[n+3*i+2] = (*bytesArg)(&j.Payload)
	}
}

// enqueued turns enqueue.lua's reply for jobs into their results, and
// tells the observer.
func (c *Client) enqueued(topic string, jobs []NewJob, reply []int64) ([]EnqueueResult, error) {
	if len(reply) != len(jobs) {
		return nil, fmt.Errorf("queue: enqueue to %s: reply of %d values for %d jobs", topic, len(reply), len(jobs))
	}
	out := make([]EnqueueResult, len(jobs))
	for i, v := range reply {
		out[i].ID = jobs[i].ID
		switch {
		case v > 0:
			out[i].RunAt = v
		case v <= -finishedReply:
			out[i].Duplicate, out[i].Finished = true, takenFinished(-v-finishedReply)
		case v < 0:
			out[i].Duplicate, out[i].RunAt = true, -v
		default:
			out[i].Duplicate = true
		}
	}
	c.observeEnqueued(TopicOf(topic), out)
	if o, ok := c.cfg.Observer.(EnqueueCallObserver); ok {
		o.EnqueueCall(TopicOf(topic), len(jobs))
	}
	return out, nil
}

// enqueueSpread enqueues jobs of a topic of several partitions (layout l)
// in one enqueue.lua call over the partitions they go to, their keys on
// one node (a Redis that is not a cluster): a batch spread over the
// partitions costs one call, as on one partition.
func (t redisTopic) enqueueSpread(ctx context.Context, l Layout, topic string, jobs []NewJob) ([]EnqueueResult, error) {
	names, groups := t.c.split(ctx, l, topic, jobs)
	if len(names) == 1 {
		return t.enqueue(ctx, names[0], jobs) // a partition's own call
	}
	parts := make([]enqueuePart, len(names))
	for i, name := range names {
		parts[i] = enqueuePart{name: name, at: groups[name]}
	}
	return t.enqueueGroups(ctx, topic, parts, jobs)
}

// enqueuePart is the jobs of one name (a topic or a partition) in a
// grouped enqueue.lua call: their indexes in the caller's jobs.
type enqueuePart struct {
	name string
	at   []int
}

// enqueueGroups enqueues jobs in one enqueue.lua call of groups: one per
// part, or, when some job has a raised priority or an ordering key, one
// per part and priority (docs/design.md §4.23, §4.24). The parts' keys
// must be on one node.
func (t redisTopic) enqueueGroups(ctx context.Context, topic string, parts []enqueuePart, jobs []NewJob) ([]EnqueueResult, error) {
	c := t.c
	levels, ordered := false, false
	for i := range jobs {
		levels = levels || jobs[i].Priority > 0
		ordered = ordered || jobs[i].OrderingKey != ""
	}
	// "+": groups of four keys, the taken ZSET's included (as in enqueue:
	// the window whoever configured it); "~": with the priorities' keys;
	// "%": with those and the ordering's, and an ordering key per job.
	mode := "+"
	switch {
	case ordered:
		mode, levels = "%", true
	case levels:
		mode = "~"
	}
	keys := make([]string, 0, 13*len(parts))
	args := make([]any, 1, 1+2*len(parts)+4*len(jobs))
	args[0] = mode
	whens := make([]int64, len(jobs))
	order := make([]int, 0, len(jobs)) // the jobs in the script's order
	sub := make([]NewJob, 0, len(jobs))
	for _, p := range parts {
		k, err := c.keysFor(p.name)
		if err != nil {
			return nil, err
		}
		if err := c.noteTopic(ctx, p.name); err != nil {
			return nil, err
		}
		byLevel := [MaxPriority + 1][]int{p.at}
		if levels {
			// An id given twice goes to its first's group, where the
			// second is its duplicate: the first wins, as without
			// priorities.
			byLevel[0] = nil
			first := make(map[string]int, len(p.at))
			for _, i := range p.at {
				l, ok := first[jobs[i].ID]
				if !ok {
					l = jobs[i].Priority
					first[jobs[i].ID] = l
				}
				byLevel[l] = append(byLevel[l], i)
			}
		}
		for level, at := range byLevel {
			if len(at) == 0 {
				continue
			}
			keys = append(keys, k.due, k.job, k.wake, k.taken)
			args = append(args, len(at))
			if levels {
				keys = append(keys, k.levels()...)
				args = append(args, level)
			}
			if ordered {
				keys = append(keys, k.lease)
				keys = append(keys, k.order()...)
			}
			from := len(sub)
			for _, i := range at {
				sub = append(sub, jobs[i])
			}
			order = append(order, at...)
			part := make([]any, 4*len(at))
			enqueueArgs(part, whens[from:from+len(at)], sub[from:])
			args = append(args, part...)
			if ordered {
				for _, i := range at {
					args = append(args, jobs[i].OrderingKey, i)
				}
			}
		}
	}
	reply, err := c.scripts.enqueue.Run(ctx, c.rdb, keys, args...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("queue: enqueue to %s: %w", topic, err)
	}
	res, err := c.enqueued(topic, sub, reply)
	if err != nil {
		return nil, err
	}
	out := make([]EnqueueResult, len(jobs))
	for k, i := range order {
		out[i] = res[k]
	}
	return out, nil
}

// observeEnqueued tells the observer of the jobs out created on topic, and
// of the duplicates of finished jobs (TakenObserver).
func (c *Client) observeEnqueued(topic string, out []EnqueueResult) {
	created, taken := 0, 0
	for i := range out {
		switch {
		case !out[i].Duplicate:
			created++
		case out[i].Finished != nil:
			taken++
		}
	}
	if created > 0 {
		c.cfg.Observer.Enqueued(topic, created)
	}
	if o, ok := c.cfg.Observer.(TakenObserver); ok && taken > 0 {
		o.Taken(topic, taken)
	}
}

// finishedReply offsets enqueue.lua's reply for a duplicate of a finished
// job whose id is still taken: -(2^50 + its taken score).
const finishedReply = 1 << 50

// takenFinished reads a taken ZSET score, (until × 4) + how the job ended.
func takenFinished(score int64) *Finished {
	outcome := FinishedSucceeded
	switch score % 4 {
	case 1:
		outcome = FinishedCancelled
	case 2:
		outcome = FinishedPurged
	}
	return &Finished{Outcome: outcome, TakenUntil: score / 4}
}

// bytesArg sends a []byte through go-redis as is; a *bytesArg fits in an
// interface without the allocation a []byte takes.
type bytesArg []byte

// MarshalBinary returns the bytes themselves.
func (b *bytesArg) MarshalBinary() ([]byte, error) { return *b, nil }

// seq is 0, 1, ..., n-1.
func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

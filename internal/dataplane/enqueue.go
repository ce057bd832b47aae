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
	out, err := c.enqueue(ctx, topic, []NewJob{j})
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
	out, err := c.enqueue(ctx, topic, valid)
	if err != nil {
		return nil, err
	}
	mergeResults(results, at, out)
	return results, nil
}

// enqueue is a redis topic's enqueue: enqueue.lua over validated jobs.
func (t redisTopic) enqueue(ctx context.Context, topic string, jobs []NewJob) ([]EnqueueResult, error) {
	c := t.c
	k, err := c.keysFor(topic)
	if err != nil {
		return nil, err
	}
	if err := c.noteTopic(ctx, topic); err != nil {
		return nil, err
	}
	// ARGV (see enqueue.lua): the ids, then when, max attempts and payload
	// per job. Pointers into jobs and whens go into the []any without an
	// allocation each, as a string, an int64 or a []byte would.
	n := len(jobs)
	args := make([]any, 4*n)
	whens := make([]int64, n)
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
	cmd := c.scripts.enqueue.Run(ctx, c.rdb, []string{k.due, k.job, k.wake}, args...)
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
	if len(reply) != n {
		return nil, fmt.Errorf("queue: enqueue to %s: reply of %d values for %d jobs", topic, len(reply), n)
	}
	out := make([]EnqueueResult, n)
	created := 0
	for i, v := range reply {
		out[i].ID = jobs[i].ID
		switch {
		case v > 0:
			out[i].RunAt = v
			created++
		case v < 0:
			out[i].Duplicate, out[i].RunAt = true, -v
		default:
			out[i].Duplicate = true
		}
	}
	if created > 0 {
		c.cfg.Observer.Enqueued(TopicOf(topic), created)
	}
	if o, ok := c.cfg.Observer.(EnqueueCallObserver); ok {
		o.EnqueueCall(TopicOf(topic), len(jobs))
	}
	return out, nil
}

// bytesArg sends a []byte through go-redis as is; a *bytesArg fits in an
// interface without the allocation a []byte takes.
type bytesArg []byte

// MarshalBinary returns the bytes themselves.
func (b *bytesArg) MarshalBinary() ([]byte, error) { return *b, nil }

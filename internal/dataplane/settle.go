package dataplane

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Ack forgets jobs whose handlers succeeded, one script call per topic. It
// returns how many were removed; a claim that no longer owns its job (lease
// expired and claimed again) removes nothing.
//
// On a durable topic each removed job leaves a tombstone for
// Config.TombstoneTTL, so no relay or recovery pass that read its ledger row
// just before the row was deleted can put it back (docs/design.md §4.11).
// On a redis topic with a uniqueness window its id stays taken for the
// window (§4.2.1).
//
// Plumbing: a step of the Worker's, exported for delayq's own packages; a
// service runs jobs through engine.Engine (or a Worker), never by
// calling it.
func (c *Client) Ack(ctx context.Context, refs []Ref) (int, error) {
	n, err := c.settleRefs(ctx, "ack", c.scripts.ack, refs, func(topic string, k keys) ([]string, []any) {
		lc := c.lifecycle(topic)
		return ackKeys(k), []any{lc.tombstone().Milliseconds(), "s", lc.takenFor(topic).Milliseconds()}
	})
	c.forgetTraces(ctx, refs...)
	return n, err
}

// AckCancelled forgets jobs whose run ended cancelled (a cancel was asked
// while they ran, CancelRunning): as Ack, with a tombstone on any topic,
// as every cancel leaves one, and their cancel marks removed. It returns
// how many were removed.
//
// Plumbing: a step of the Worker's, exported for delayq's own packages.
func (c *Client) AckCancelled(ctx context.Context, refs []Ref) (int, error) {
	n, err := c.settleRefs(ctx, "ack cancelled", c.scripts.ack, refs, func(topic string, k keys) ([]string, []any) {
		return ackKeys(k), []any{c.cfg.TombstoneTTL.Milliseconds(), "c", c.lifecycle(topic).takenFor(topic).Milliseconds()}
	})
	c.forgetTraces(ctx, refs...)
	return n, err
}

// Release hands claimed jobs back to due without spending an attempt, at
// their own due time. It returns how many went back.
//
// Plumbing: a step of the Worker's, exported for delayq's own packages; a
// service runs jobs through engine.Engine (or a Worker), never by
// calling it.
func (c *Client) Release(ctx context.Context, refs []Ref) (int, error) {
	return c.settleRefs(ctx, "release", c.scripts.release, refs, func(_ string, k keys) ([]string, []any) {
		return releaseKeys(k), nil
	})
}

// ReleaseLater hands claimed jobs back as Release does, but due wait from
// now: the ledger said another job of their ordering key is in flight or
// retrying (queue.GoneError.Held, docs/design.md §4.24). by gives, per ref
// (same index; "" or short for none), the id of that job
// (GoneError.HeldBy): if Redis has it parked, it takes the key back and
// the released job waits in the key's order at its own due time; else the
// released job keeps the key.
//
// Plumbing: a step of the Worker's, exported for delayq's own packages.
func (c *Client) ReleaseLater(ctx context.Context, refs []Ref, by []string, wait time.Duration) (int, error) {
	return c.settleRefs(ctx, "release", c.scripts.release, refs, func(topic string, k keys) ([]string, []any) {
		head := []any{"@", wait.Milliseconds()}
		var pairs []any
		for i, r := range refs {
			if r.Topic == topic && i < len(by) && by[i] != "" {
				pairs = append(pairs, r.ID, by[i])
			}
		}
		head = append(head, len(pairs)/2)
		return releaseKeys(k), append(head, pairs...)
	})
}

// releaseKeys are release.lua's keys.
func releaseKeys(k keys) []string {
	return append([]string{k.lease, k.due, k.job, k.wake}, k.ordered()...)
}

// ackKeys are ack.lua's keys.
func ackKeys(k keys) []string {
	return append(append([]string{k.lease, k.due, k.job, k.gone, k.runs, k.cancel, k.taken}, k.ordered()...), k.wake)
}

// settleRefs runs script once per topic with the keys and leading
// arguments scriptArgs gives, then the topic's refs as (id, attempt) pairs,
// and sums the counts the calls return: the shape Ack and Release share.
func (c *Client) settleRefs(ctx context.Context, op string, script *redis.Script, refs []Ref, scriptArgs func(topic string, k keys) ([]string, []any)) (int, error) {
	groups := byTopic(refs)
	ks, err := keysForAll(c, groups)
	if err != nil {
		return 0, fmt.Errorf("queue: %s: %w", op, err)
	}
	n := 0
	for topic, rs := range groups {
		keys, head := scriptArgs(topic, ks[topic])
		args := make([]any, 0, len(head)+2*len(rs))
		args = append(args, head...)
		for _, r := range rs {
			args = append(args, r.ID, r.Attempt)
		}
		m, err := script.Run(ctx, c.rdb, keys, args...).Int()
		if err != nil {
			return n, fmt.Errorf("queue: %s on %s: %w", op, topic, err)
		}
		n += m
	}
	return n, nil
}

// RetryRequest is a failed claim going back to due for another attempt:
// Client.Retry puts it back in Redis, Ledger.MarkRetrying marks its row.
type RetryRequest struct {
	Ref
	// RunAt is when the next attempt is due (Unix ms). Client.Retry may
	// instead take Delay from Redis's clock when RunAt is 0; the ledger
	// needs RunAt.
	RunAt int64
	Delay time.Duration
	// LeaseUntil is RunAt plus a lease: when the recoverer may step in if
	// Redis lost the job during its backoff. Only the ledger keeps it.
	LeaseUntil int64
	Error      string
}

// Retry puts failed claims back in due, recording their error. It returns
// the new due time of each request, in order, or 0 where the claim no longer
// owned its job and nothing changed.
//
// Plumbing: a step of the Worker's, exported for delayq's own packages; a
// service runs jobs through engine.Engine (or a Worker), never by
// calling it.
func (c *Client) Retry(ctx context.Context, reqs []RetryRequest) ([]int64, error) {
	out := make([]int64, len(reqs))
	idx := make(map[string][]int)
	for i, r := range reqs {
		idx[r.Topic] = append(idx[r.Topic], i)
	}
	ks, err := keysForAll(c, idx)
	if err != nil {
		return out, fmt.Errorf("queue: retry: %w", err)
	}
	for topic, is := range idx {
		k := ks[topic]
		args := make([]any, 0, 5*len(is))
		for _, i := range is {
			r := reqs[i]
			mode, v := "d", r.Delay.Milliseconds()
			if r.RunAt != 0 {
				mode, v = "a", r.RunAt
			}
			args = append(args, r.ID, r.Attempt, mode, v, r.Error)
		}
		reply, err := c.scripts.retry.Run(ctx, c.rdb, append([]string{k.lease, k.due, k.job, k.wake, k.runs}, k.levels()...), args...).Int64Slice()
		if err != nil {
			return out, fmt.Errorf("queue: retry on %s: %w", topic, err)
		}
		if len(reply) != 1+len(is) {
			return out, fmt.Errorf("queue: retry on %s: reply of %d values for %d jobs", topic, len(reply), len(is))
		}
		for n, i := range is {
			out[i] = max(reply[1+n], 0)
		}
	}
	return out, nil
}

// Bury moves failed claims to the dead set with their error as last error.
// It returns how many were buried and Redis's time of death (Unix ms).
//
// Plumbing: a step of the Worker's, exported for delayq's own packages; a
// service runs jobs through engine.Engine (or a Worker), never by
// calling it.
func (c *Client) Bury(ctx context.Context, dead []DeadJob) (int, int64, error) {
	groups := make(map[string][]DeadJob)
	for i, d := range dead {
		if d.Job == nil {
			return 0, 0, fmt.Errorf("queue: bury: dead job %d has no job", i)
		}
		groups[d.Job.Topic] = append(groups[d.Job.Topic], d)
	}
	ks, err := keysForAll(c, groups)
	if err != nil {
		return 0, 0, fmt.Errorf("queue: bury: %w", err)
	}
	n, at := 0, int64(0)
	for topic, ds := range groups {
		k := ks[topic]
		args := make([]any, 0, 3*len(ds))
		for _, d := range ds {
			args = append(args, d.Job.ID, d.Job.Attempt, d.Error)
		}
		reply, err := c.scripts.bury.Run(ctx, c.rdb, append(append([]string{k.lease, k.due, k.job, k.dead, k.runs}, k.ordered()...), k.wake), args...).Int64Slice()
		if err != nil {
			return n, at, fmt.Errorf("queue: bury on %s: %w", topic, err)
		}
		if len(reply) != 2 {
			return n, at, fmt.Errorf("queue: bury on %s: reply of %d values", topic, len(reply))
		}
		at = reply[0]
		n += int(reply[1])
	}
	return n, at, nil
}

// Extend moves the lease deadline of jobs still leased to Redis now + lease,
// never earlier than it was. It returns how many leases moved and the new
// deadline (Unix ms; 0 if refs is empty).
//
// Plumbing: a step of the Worker's, exported for delayq's own packages; a
// service runs jobs through engine.Engine (or a Worker), never by
// calling it.
func (c *Client) Extend(ctx context.Context, refs []Ref, lease time.Duration) (int, int64, error) {
	n, deadline, _, err := c.extend(ctx, refs, lease)
	return n, deadline, err
}

// extend is Extend that also returns the refs whose cancel was asked
// (cancelrun.lua): the heartbeat cancels their runs, in case its worker
// missed the ask's message.
func (c *Client) extend(ctx context.Context, refs []Ref, lease time.Duration) (int, int64, []Ref, error) {
	groups := byTopic(refs)
	ks, err := keysForAll(c, groups)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("queue: extend: %w", err)
	}
	n, deadline := 0, int64(0)
	var asked []Ref
	for topic, rs := range groups {
		k := ks[topic]
		args := make([]any, 0, 1+len(rs))
		args = append(args, lease.Milliseconds())
		for _, r := range rs {
			args = append(args, r.ID)
		}
		reply, err := c.scripts.extend.Run(ctx, c.rdb, []string{k.lease, k.job, k.cancel}, args...).Slice()
		if err != nil {
			return n, deadline, asked, fmt.Errorf("queue: extend on %s: %w", topic, err)
		}
		if len(reply) != 3 {
			return n, deadline, asked, fmt.Errorf("queue: extend on %s: reply of %d values", topic, len(reply))
		}
		deadline = asInt64(reply[0])
		n += int(asInt64(reply[1]))
		ids, _ := reply[2].([]any)
		for _, id := range ids {
			if s, ok := id.(string); ok {
				asked = append(asked, Ref{Topic: topic, ID: s})
			}
		}
	}
	return n, deadline, asked, nil
}

// byTopic groups refs by topic: one script call per topic keeps every call
// inside one Cluster slot.
func byTopic(refs []Ref) map[string][]Ref {
	m := make(map[string][]Ref, 1)
	for _, r := range refs {
		m[r.Topic] = append(m[r.Topic], r)
	}
	return m
}

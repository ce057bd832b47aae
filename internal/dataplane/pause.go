package dataplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"
)

// Pause pauses topic on behalf of actor (for the audit): workers claim none
// of its jobs from the instant the Redis key is written (claim.lua checks it
// in the claim's own atomic step), handlers already running finish, and its
// jobs keep falling due and wait. The state is written to store first, then
// to Redis: a store error (wrapping ErrLedger) leaves Redis alone; a Redis
// error after the store's write wraps ErrNotApplied. Pausing a paused topic
// changes nothing and returns the pause in force.
func (c *Client) Pause(ctx context.Context, store PauseStore, topic, actor string) (PauseState, error) {
	return c.setPaused(ctx, store, topic, actor, true)
}

// Resume lifts topic's pause on behalf of actor and publishes on the
// topic's wake channel, so every worker's fetcher claims at once, each up to
// its free handler slots (no burst beyond the topic's concurrency). Same
// order and errors as Pause; resuming a topic that is not paused changes
// nothing (the wake is sent anyway).
func (c *Client) Resume(ctx context.Context, store PauseStore, topic, actor string) (PauseState, error) {
	return c.setPaused(ctx, store, topic, actor, false)
}

func (c *Client) setPaused(ctx context.Context, store PauseStore, topic, actor string, paused bool) (PauseState, error) {
	verb := "resume"
	if paused {
		verb = "pause"
	}
	k, err := c.keysFor(topic)
	if err != nil {
		return PauseState{}, err
	}
	if store == nil {
		return PauseState{}, fmt.Errorf("queue: %s %s: a PauseStore is required", verb, topic)
	}
	st, changed, err := store.SetPaused(ctx, topic, paused, actor)
	if err != nil {
		return PauseState{}, fmt.Errorf("queue: %s %s: %w: %w", verb, topic, ErrLedger, err)
	}
	st.Changed = changed
	// Redis is written even when SQL changed nothing: an earlier call may
	// have failed at this step. Every partition has the flag in its own
	// slot, where its claims read it; the topic's own key (partition
	// count 1, always listed) is written last, as PausesOf reads it.
	// The layout as Redis has it now, not this process's copy: a raise
	// another process made a moment ago must not leave partitions out.
	l, err := c.readLayout(ctx, topic)
	if err != nil {
		return st, fmt.Errorf("queue: %s %s: %w: %w", verb, topic, ErrNotApplied, err)
	}
	names := l.Names(topic)
	for _, name := range names {
		if name != topic {
			if k, err = c.keysFor(name); err != nil {
				return st, err
			}
		} else if k, err = c.keysFor(topic); err != nil {
			return st, err
		}
		if paused {
			// A topic paused before its first job is listed all the same
			// (GET /v1/topics, delayq stats, the gauge): an operator must see
			// every pause in force, a mistyped topic name's included.
			if err = c.rdb.Set(ctx, k.paused, pauseValue(st), 0).Err(); err == nil {
				err = c.rdb.SAdd(ctx, topicsKey(c.cfg.Namespace), topic).Err()
			}
		} else {
			err = c.scripts.resume.Run(ctx, c.rdb, []string{k.paused, k.wake}, 0).Err()
		}
		if err != nil {
			return st, fmt.Errorf("queue: %s %s: %w: %w", verb, topic, ErrNotApplied, err)
		}
	}
	return st, nil
}

// PauseOf returns topic's pause state as Redis has it: the one workers obey.
func (c *Client) PauseOf(ctx context.Context, topic string) (PauseState, error) {
	m, err := c.PausesOf(ctx, []string{topic})
	if err != nil {
		return PauseState{}, err
	}
	return m[topic], nil
}

// PausesOf returns the pause state of each of topics as Redis has it, in
// one round trip, by topic; an invalid topic name is an error.
func (c *Client) PausesOf(ctx context.Context, topics []string) (map[string]PauseState, error) {
	ks := make([]keys, len(topics))
	for i, t := range topics {
		k, err := c.keysFor(t)
		if err != nil {
			return nil, err
		}
		ks[i] = k
	}
	out := make(map[string]PauseState, len(topics))
	if len(topics) == 0 {
		return out, nil
	}
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(topics))
	for i, k := range ks {
		cmds[i] = pipe.Get(ctx, k.paused)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("queue: pause states: %w", err)
	}
	for i, t := range topics {
		v, err := cmds[i].Result()
		if err != nil {
			out[t] = PauseState{Topic: t}
			continue
		}
		out[t] = parsePause(t, v)
	}
	return out, nil
}

// ApplyPauses brings Redis in line with states, the store's (TopicStates),
// and returns the topics whose Redis key it changed. The relay calls it on
// its reload and full passes and the recoverer on every run, before either
// puts any job back, so a Redis that lost its data (or missed a Pause's or Resume's
// Redis step) has the operator's pauses again before a job can be claimed.
//
// One pipelined EXISTS checks them all; only mismatches are written: a
// paused topic without its key gets it (SET NX), a resumed one that still
// has it loses it (resume.lua, only if the key's pause is older than the
// resume, so a pause set since the states were read is never undone).
func (c *Client) ApplyPauses(ctx context.Context, states []PauseState) ([]string, error) {
	// A row whose topic is no valid name (written around Pause) names no
	// topic a worker runs: skipped, so that it can never stop the relay.
	states = slices.DeleteFunc(slices.Clone(states), func(st PauseState) bool { return ValidateTopic(st.Topic) != nil })
	if len(states) == 0 {
		return nil, nil
	}
	// A partitioned topic's state goes to each of its partitions.
	var ks []keys
	var of []PauseState
	for _, st := range states {
		names, err := c.Partitions(ctx, st.Topic)
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			k, err := c.keysFor(name)
			if err != nil {
				return nil, err
			}
			ks, of = append(ks, k), append(of, st)
		}
	}
	states = of
	pipe := c.rdb.Pipeline()
	exists := make([]*redis.IntCmd, len(states))
	for i, k := range ks {
		exists[i] = pipe.Exists(ctx, k.paused)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("queue: apply pauses: %w", err)
	}
	var changed []string
	for i, st := range states {
		has := exists[i].Val() == 1
		switch {
		case st.Paused && !has:
			ok, err := c.rdb.SetNX(ctx, ks[i].paused, pauseValue(st), 0).Result()
			if err != nil {
				return changed, fmt.Errorf("queue: apply the pause of %s: %w", st.Topic, err)
			}
			if ok && !slices.Contains(changed, st.Topic) {
				changed = append(changed, st.Topic)
				if err := c.rdb.SAdd(ctx, topicsKey(c.cfg.Namespace), st.Topic).Err(); err != nil {
					return changed, fmt.Errorf("queue: list the paused topic %s: %w", st.Topic, err)
				}
			}
		case !st.Paused && has && st.At > 0:
			n, err := c.scripts.resume.Run(ctx, c.rdb, []string{ks[i].paused, ks[i].wake}, st.At).Int()
			if err != nil {
				return changed, fmt.Errorf("queue: apply the resume of %s: %w", st.Topic, err)
			}
			if n == 1 && !slices.Contains(changed, st.Topic) {
				changed = append(changed, st.Topic)
			}
		}
	}
	return changed, nil
}

// pauseValue is the paused key's value: who paused, and when.
func pauseValue(st PauseState) string {
	b, _ := json.Marshal(st) // two plain fields: cannot fail
	return string(b)
}

// parsePause reads a paused key's value. A value that is not ours (someone
// set the key by hand) still means paused: the key's existence is the state.
func parsePause(topic, v string) PauseState {
	st := PauseState{}
	_ = json.Unmarshal([]byte(v), &st)
	st.Topic, st.Paused = topic, true
	return st
}

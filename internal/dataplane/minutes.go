package dataplane

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Per-minute counts of a topic, for the dashboard's 24-hour charts
// (docs/design.md §4.20): one HASH per topic and epoch hour,
// "<ns>:{<topic>}:min:<hour>", field "<minute of the hour>:<counter>",
// each hash expiring MinuteTTL after its last write. Processes add their
// own counts (HINCRBY), so the counters sum every process; the backlog is
// a sample of Redis, set by whichever process sampled last.

// MinuteTTL is how long a per-minute hash lives after its last write: a
// day of charts and the hour being written.
const MinuteTTL = 25 * time.Hour

// MinuteCounts are one topic's counts of one minute.
type MinuteCounts struct {
	Minute   int64 // Unix minutes (Unix ms / 60,000)
	Enqueued int64 // jobs enqueued
	Done     int64 // handlers that succeeded
	Retried  int64 // failed attempts that will retry
	Dead     int64 // jobs that died
	// Backlog is the jobs due and not yet claimed (Stats.DueNow), sampled
	// once in the minute; -1 when no process sampled it.
	Backlog int64
}

// counts reports whether m has a count to add.
func (m MinuteCounts) counts() bool {
	return m.Enqueued > 0 || m.Done > 0 || m.Retried > 0 || m.Dead > 0 || m.Backlog >= 0
}

// AddMinute adds m's counts to topic's minute m.Minute and sets its
// backlog when m has one: one script call (minuteadd.lua), nothing when m
// counts nothing.
func (c *Client) AddMinute(ctx context.Context, topic string, m MinuteCounts) error {
	if _, err := c.keysFor(topic); err != nil {
		return err
	}
	if m.Minute <= 0 || m.Enqueued < 0 || m.Done < 0 || m.Retried < 0 || m.Dead < 0 {
		return fmt.Errorf("queue: minute counts of %s: %+v: want a positive minute and counts of 0 or more", topic, m)
	}
	if !m.counts() {
		return nil
	}
	key := minuteKey(c.cfg.Namespace, topic, m.Minute/60)
	err := c.scripts.minuteAdd.Run(ctx, c.rdb, []string{key}, m.Minute%60, m.Enqueued, m.Done, m.Retried, m.Dead,
		m.Backlog, int64(MinuteTTL/time.Second)).Err()
	if err != nil {
		return fmt.Errorf("queue: minute counts of %s: %w", topic, err)
	}
	return nil
}

// MaxMinutes bounds a Minutes read: a day and an hour.
const MaxMinutes = 25 * 60

// Minutes returns topic's counts of the Unix minutes from to to, both
// included, one per minute, oldest first (zero counts and a Backlog of -1
// for a minute nobody wrote). One script call reads every hour's hash.
func (c *Client) Minutes(ctx context.Context, topic string, from, to int64) ([]MinuteCounts, error) {
	if _, err := c.keysFor(topic); err != nil {
		return nil, err
	}
	if from <= 0 || to < from || to-from >= MaxMinutes {
		return nil, fmt.Errorf("queue: minutes of %s: %d to %d: want 0 < from <= to, at most %d minutes", topic, from, to, MaxMinutes)
	}
	first := from / 60
	var hashKeys []string
	for h := first; h <= to/60; h++ {
		hashKeys = append(hashKeys, minuteKey(c.cfg.Namespace, topic, h))
	}
	reply, err := c.scripts.minutes.Run(ctx, c.rdb, hashKeys).Slice()
	if err != nil {
		return nil, fmt.Errorf("queue: minutes of %s: %w", topic, err)
	}
	out := make([]MinuteCounts, to-from+1)
	for i := range out {
		out[i] = MinuteCounts{Minute: from + int64(i), Backlog: -1}
	}
	for i, r := range reply {
		flat, ok := r.([]any)
		if !ok {
			return nil, fmt.Errorf("queue: minutes of %s: reply %d is %T", topic, i, r)
		}
		for j := 0; j+1 < len(flat); j += 2 {
			field, _ := flat[j].(string)
			val, _ := flat[j+1].(string)
			mm, name, ok := strings.Cut(field, ":")
			minute, err1 := strconv.ParseInt(mm, 10, 64)
			n, err2 := strconv.ParseInt(val, 10, 64)
			if !ok || err1 != nil || err2 != nil {
				continue // not a field minuteadd.lua writes
			}
			at := (first+int64(i))*60 + minute
			if at < from || at > to {
				continue
			}
			m := &out[at-from]
			switch name {
			case "e":
				m.Enqueued = n
			case "d":
				m.Done = n
			case "r":
				m.Retried = n
			case "x":
				m.Dead = n
			case "b":
				m.Backlog = n
			}
		}
	}
	return out, nil
}

package dataplane

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// RelayMark is how far a relay (recoverer.Relay) has got through the
// durable topics' waiting rows of its ledger shard, on the SQL server's clock (Unix ms):
// every waiting row due up to Loaded was pushed to Redis (or is there
// already), and every one due up to Checked was checked after falling due.
//
// It lives in Redis on purpose, like the epoch markers (§5.3): another
// process can take the relay over where it stopped, and a Redis that lost
// data loses the mark with the jobs, which makes the relay reload the whole
// horizon from SQL.
type RelayMark struct {
	Loaded, Checked int64
}

// The mark (relayKeys.mark) is a HASH with fields loaded and checked, one
// per ledger shard. No hash tag: it spans topics, and no script touches it
// but relaymark.lua, on it alone.

// RelayMark reads shard's relay mark; ok is false when Redis has none (never
// written, or lost with Redis's data).
//
// Plumbing: a step of the relay's, exported for delayq's own packages; a
// service runs jobs through engine.Engine (or a Worker), never by
// calling it.
func (c *Client) RelayMark(ctx context.Context, shard int) (m RelayMark, ok bool, err error) {
	vals, err := c.rdb.HMGet(ctx, c.relay(shard).mark, "loaded", "checked").Result()
	if err != nil {
		return m, false, fmt.Errorf("queue: read the relay mark: %w", err)
	}
	return parseMark(vals)
}

// parseMark reads the mark's two fields as HMGET returns them.
func parseMark(vals []any) (m RelayMark, ok bool, err error) {
	if len(vals) != 2 || vals[0] == nil || vals[1] == nil {
		return m, false, nil
	}
	l, err1 := strconv.ParseInt(fmt.Sprint(vals[0]), 10, 64)
	k, err2 := strconv.ParseInt(fmt.Sprint(vals[1]), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		// Not ours to trust: reloading is always safe.
		return m, false, nil
	}
	return RelayMark{Loaded: l, Checked: k}, true, nil
}

// OpenRelayMark creates the mark's key, if missing, without a mark in it
// (a field "reload"): at the start of a reload, so that MoveRelayMark at
// its end finds the key gone if Redis lost its data meanwhile.
func (c *Client) OpenRelayMark(ctx context.Context, shard int) error {
	if err := c.rdb.HSet(ctx, c.relay(shard).mark, "reload", 1).Err(); err != nil {
		return fmt.Errorf("queue: open the relay mark: %w", err)
	}
	return nil
}

// MoveRelayMark writes the relay's mark only if Redis still has its key
// (relaymark.lua), at the end of a pass (a reload opened it first):
// moved is false when the key is gone, lost with Redis's data since the
// pass began, and it is left gone, so that the next pass reloads.
func (c *Client) MoveRelayMark(ctx context.Context, shard int, m RelayMark) (moved bool, err error) {
	n, err := c.scripts.relayMark.Run(ctx, c.rdb, []string{c.relay(shard).mark}, m.Loaded, m.Checked).Int()
	if err != nil {
		return false, fmt.Errorf("queue: move the relay mark: %w", err)
	}
	return n == 1, nil
}

// ResetRelayMark deletes shard's relay mark, so that its relay's next pass
// reloads every waiting row of the shard due within the horizon: what the
// shard's recoverer asks for when it finds that a topic of the shard lost
// data.
func (c *Client) ResetRelayMark(ctx context.Context, shard int) error {
	if err := c.rdb.Del(ctx, c.relay(shard).mark).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("queue: reset the relay mark: %w", err)
	}
	return nil
}

package dataplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The relay's inbox (docs/design.md §4.11, "A relay that sleeps"): what
// lets the relay read only Redis while nothing is coming, and pass over SQL
// only when a durable job needs it.
//
//   - <ns>:{relay}:inbox, a ZSET of notes, one per durable enqueue batch
//     with a job due within the horizon (or Client.HorizonSlack past it): written
//     before the batch's commit, removed by its push after the commit in the
//     same round trip. A note still there past its score (the batch's
//     earliest due time, on the enqueuer's clock) plus the relay's grace is
//     a push that was lost, skipped or never made: the relay passes.
//   - <ns>:{relay}:bell, a LIST of at most one element: every note
//     written rings it (RPUSH, then LTRIM to one), so that an idle relay
//     blocked on it (BLPOP, WaitRelayBell) wakes for the new note instead
//     of reading the inbox five times a second for nothing.
//   - <ns>:{relay}:recheck, a ZSET of times (Unix ms, the enqueuers'
//     clocks) at which the relay checks every waiting row of the horizon
//     (a full pass): an enqueuer whose commit failed with an unknown
//     outcome asks for one at once and one Config.UncertainRecheck later
//     (AskRelayRecheck; one member per second, so an outage adds at most
//     two a second); a full pass drops those due by its start.
//   - <ns>:{relay}:next, a ZSET of one member, "load": when the next
//     waiting row beyond the horizon enters it (Unix ms, local clocks).
//     The relay sets it from SQL after each pass; an enqueuer of a job
//     beyond the horizon lowers it (ZADD LT) before its commit.
//
// The four keys share a hash tag, so one script can touch several in a
// cluster (relayunnote.lua). A
// Redis that lost them lost the relay's mark too, which makes the relay
// reload the whole horizon from SQL. Each ledger shard has its own four
// (relayshard.go: shard i > 0 tags them {relay:i}), and a batch's note
// goes to the inbox of each shard its rows are written to.

// HorizonSlack is how far past Config.Horizon an enqueue still pushes a
// durable job itself (and notes it in the relay's inbox) instead of leaving
// it to the relay's loader: Horizon/8, at most 2s. It covers a commit that
// lands after the job entered the horizon (the loader's read may have
// missed the row: it was not committed yet), and the enqueuer's and the
// relay's clocks, which may differ from SQL's by this much at most.
func (c *Client) HorizonSlack() time.Duration { return min(2*time.Second, c.cfg.Horizon/8) }

// nextLoadMember is the one member of the next-load key.
const nextLoadMember = "load"

// relayNote is what one durable enqueue batch writes into the relay's inbox
// before its commit.
type relayNote struct {
	// member is the note in the inbox ("" when the batch has no job within
	// the horizon's reach): "<ref>:<latest>", with latest the latest due
	// time (Unix ms, the enqueuer's clock) of the batch's jobs it covers.
	member string
	due    int64 // the earliest due time of those jobs (score)
	// load is when the earliest job beyond the horizon enters it (0:
	// none).
	load int64
	// shards are the ledger shards the batch's rows go to: the note and
	// the load go to each one's relay.
	shards []int
}

// noteRef is a note written: its member, in the inbox of each of shards.
// The zero value is no note.
type noteRef struct {
	member string
	shards []int
}

// planNote estimates, on this process's clock, the due times of jobs and
// returns the note that covers them, for the relays of the shards of names
// (the topics or partitions the jobs' rows go to). SQL decides the real
// due times; the slack on each side covers the difference of the clocks.
func (c *Client) planNote(jobs []NewJob, names ...string) relayNote {
	now := time.Now().UnixMilli()
	h := c.cfg.Horizon.Milliseconds()
	reach := now + h + c.HorizonSlack().Milliseconds()
	n := relayNote{shards: c.shardsOf(names...)}
	var latest int64
	for i := range jobs {
		j := &jobs[i]
		due := now + j.Delay.Milliseconds()
		if j.RunAt != 0 {
			due = max(j.RunAt, now)
		}
		if due <= reach {
			if n.due == 0 || due < n.due {
				n.due = due
			}
			latest = max(latest, due)
		}
		if due > now+h {
			if at := due - h; n.load == 0 || at < n.load {
				n.load = at
			}
		}
	}
	if n.due != 0 {
		n.member = c.noteRef() + ":" + strconv.FormatInt(latest, 10)
	}
	return n
}

// noteRef is a reference no other batch has: this client's random prefix and
// a counter.
func (c *Client) noteRef() string {
	return c.notePrefix + strconv.FormatUint(c.noteSeq.Add(1), 36)
}

func newNotePrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:]) + "."
}

// writeNote writes n into the inbox of each of its shards' relays (and
// lowers their next load) in one round trip, bounded by PushTimeout like a
// push, and returns the note once it is in the inboxes (no note when the
// batch needs none or the write failed). A failure is not the caller's: SQL is the truth, and a
// Redis that failed the note fails the relay's own reads too, so its next
// pass is a full one.
func (c *Client) writeNote(ctx context.Context, n relayNote) noteRef {
	// Redis failed a push or a note moments ago: the push will be skipped
	// too, and the relay, which fails its own reads, passes in full.
	if n.member == "" && n.load == 0 || c.pushesPaused() {
		return noteRef{}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.PushTimeout)
	defer cancel()
	pipe := c.rdb.Pipeline()
	for _, s := range n.shards {
		k := c.relay(s)
		if n.member != "" {
			pipe.ZAdd(ctx, k.inbox, redis.Z{Score: float64(n.due), Member: n.member})
		}
		if n.load != 0 {
			pipe.ZAddLT(ctx, k.next, redis.Z{Score: float64(n.load), Member: nextLoadMember})
		}
		ringBell(ctx, pipe, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		c.pausePushes()
		return noteRef{}
	}
	if n.member == "" {
		return noteRef{}
	}
	return noteRef{member: n.member, shards: n.shards}
}

// noteAlong runs fn (the batch's SQL statements) while the note goes to
// Redis, and waits for both: the note adds no round trip in series. It
// returns what writeNote does, and fn's error.
func (c *Client) noteAlong(ctx context.Context, n relayNote, fn func() error) (note noteRef, err error) {
	if n.member == "" && n.load == 0 {
		return noteRef{}, fn()
	}
	done := make(chan noteRef, 1)
	go func() { done <- c.writeNote(ctx, n) }()
	err = fn()
	return <-done, err
}

// unnote takes back a note (and the bell's ring, when no other note is
// left) whose batch has nothing for the relay: its SQL statements failed (a
// refused enqueue writes nothing), or it has no job to push: from each of
// its shards' inboxes, in one round trip. Best effort, like the note: a
// note left behind costs the relay one pass. No note is a no-op.
func (c *Client) unnote(ctx context.Context, note noteRef) {
	if note.member == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.PushTimeout)
	defer cancel()
	calls := make([]scriptCall, len(note.shards))
	for i, s := range note.shards {
		k := c.relay(s)
		calls[i] = scriptCall{keys: []string{k.inbox, k.bell}, args: []any{note.member}}
	}
	c.runEach(ctx, c.scripts.relayUnnote, calls, nil)
}

// renote puts back a note whose push failed after the pipeline removed it,
// due at once: the relays pass at their next tick.
func (c *Client) renote(ctx context.Context, note noteRef) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.PushTimeout)
	defer cancel()
	pipe := c.rdb.Pipeline()
	for _, s := range note.shards {
		k := c.relay(s)
		pipe.ZAdd(ctx, k.inbox, redis.Z{Score: 0, Member: note.member})
		ringBell(ctx, pipe, k)
	}
	_, _ = pipe.Exec(ctx)
}

// dropNote queues on pipe the removal of note from each of its shards'
// inboxes: a push's round trip takes its note with it.
func (c *Client) dropNote(ctx context.Context, pipe redis.Pipeliner, note noteRef) {
	for _, s := range note.shards {
		pipe.ZRem(ctx, c.relay(s).inbox, note.member)
	}
}

// ringBell queues the ring of a relay's bell on pipe: one element at
// most, however many notes come while the relay is busy.
func ringBell(ctx context.Context, pipe redis.Pipeliner, k relayKeys) {
	pipe.RPush(ctx, k.bell, "1")
	pipe.LTrim(ctx, k.bell, 0, 0)
}

// WaitRelayBell blocks until an enqueuer rings the bell of shard's relay (a
// note was written) or d passes, whichever comes first, in whole seconds (at
// least 1s): a blocked BLPOP costs neither this process nor Redis
// anything. The relay waits on it while nothing is pending.
func (c *Client) WaitRelayBell(ctx context.Context, shard int, d time.Duration) error {
	err := c.rdb.BLPop(ctx, max(d.Truncate(time.Second), time.Second), c.relay(shard).bell).Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("queue: wait for the relay's bell: %w", err)
	}
	return nil
}

// RelayTick is what the relay reads from Redis every tick, in one round
// trip: its mark, the notes due, and whether the next load is due.
type RelayTick struct {
	Mark   RelayMark
	MarkOK bool // false: Redis has no mark (first start, or it lost data)
	// Notes are the inbox's notes due at or before the notesUpTo asked
	// for (at most RelayTickNotes), and Latest the latest due time they
	// cover (Unix ms, the enqueuers' clocks).
	Notes  []string
	Latest int64
	// LoadDue: the next waiting row beyond the horizon has entered it
	// (or an enqueuer said one will have by now). NextLoad is when it
	// does (Unix ms; 0: no row beyond the horizon is known).
	LoadDue  bool
	NextLoad int64
	// Pending counts every note in the inbox and every recheck asked for,
	// those not due yet included: a relay with any pending ticks; one with
	// none may wait for the bell.
	Pending int64
	// RecheckDue: an enqueuer asked for a full pass by now (a commit of
	// unknown outcome, AskRelayRecheck).
	RecheckDue bool
}

// RelayTickNotes is the most notes one tick reads; the rest wait for the
// next tick.
const RelayTickNotes = 1000

// ReadRelayTick reads shard's relay mark, the notes due by notesUpTo and
// whether the next load is due by loadUpTo (Unix ms, this process's clock).
func (c *Client) ReadRelayTick(ctx context.Context, shard int, notesUpTo, loadUpTo int64) (RelayTick, error) {
	var t RelayTick
	k := c.relay(shard)
	pipe := c.rdb.Pipeline()
	mark := pipe.HMGet(ctx, k.mark, "loaded", "checked")
	notes := pipe.ZRangeByScore(ctx, k.inbox, &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(notesUpTo, 10), Count: RelayTickNotes})
	load := pipe.ZScore(ctx, k.next, nextLoadMember)
	pending := pipe.ZCard(ctx, k.inbox)
	rechecks := pipe.ZCard(ctx, k.recheck)
	recheckDue := pipe.ZCount(ctx, k.recheck, "-inf", strconv.FormatInt(loadUpTo, 10))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return t, fmt.Errorf("queue: read the relay's tick: %w", err)
	}
	m, ok, err := parseMark(mark.Val())
	if err != nil {
		return t, err
	}
	t.Mark, t.MarkOK = m, ok
	t.Notes = notes.Val()
	for _, n := range t.Notes {
		if i := strings.LastIndexByte(n, ':'); i >= 0 {
			if v, err := strconv.ParseInt(n[i+1:], 10, 64); err == nil {
				t.Latest = max(t.Latest, v)
			}
		}
	}
	if at, err := load.Result(); err == nil {
		t.NextLoad = int64(at)
		t.LoadDue = t.NextLoad <= loadUpTo
	}
	t.Pending = pending.Val() + rechecks.Val()
	t.RecheckDue = recheckDue.Val() > 0
	return t, nil
}

// AskRelayRecheck asks the relays of the shards of names (the topics or
// partitions a commit wrote to; none: every shard's) for a full pass now
// and another Config.UncertainRecheck later: a durable enqueue's commit
// failed with an unknown outcome, and rows it may have committed can
// become visible after the relay's windows passed their due times (a
// Galera node that died while committing). Best effort, bounded by
// PushTimeout: a Redis that fails this fails the relay's reads too, which
// makes its next pass full.
func (c *Client) AskRelayRecheck(ctx context.Context, names ...string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.PushTimeout)
	defer cancel()
	now := time.Now()
	shards := c.shardsOf(names...)
	if len(names) == 0 {
		shards = make([]int, len(c.relays))
		for i := range shards {
			shards[i] = i
		}
	}
	pipe := c.rdb.Pipeline()
	for _, s := range shards {
		k := c.relay(s)
		pipe.ZAdd(ctx, k.recheck, recheckAt(now), recheckAt(now.Add(c.cfg.UncertainRecheck)))
		ringBell(ctx, pipe, k)
	}
	_, _ = pipe.Exec(ctx)
}

// recheckAt is the recheck due at t, rounded up to the whole second it
// names: the enqueues that fail in one second of an outage share their
// two rechecks, so an outage of any length adds at most two a second.
func recheckAt(t time.Time) redis.Z {
	s := t.UnixMilli()/1000 + 1
	return redis.Z{Score: float64(s * 1000), Member: strconv.FormatInt(s, 10)}
}

// DropRelayRechecks removes the rechecks of shard's relay due by upTo
// (Unix ms, this process's clock), after a full pass that started then.
func (c *Client) DropRelayRechecks(ctx context.Context, shard int, upTo int64) error {
	err := c.rdb.ZRemRangeByScore(ctx, c.relay(shard).recheck, "-inf", strconv.FormatInt(upTo, 10)).Err()
	if err != nil {
		return fmt.Errorf("queue: drop the relay's rechecks: %w", err)
	}
	return nil
}

// DropRelayNotes removes notes shard's relay has handled.
func (c *Client) DropRelayNotes(ctx context.Context, shard int, notes []string) error {
	if len(notes) == 0 {
		return nil
	}
	members := make([]any, len(notes))
	for i, n := range notes {
		members[i] = n
	}
	if err := c.rdb.ZRem(ctx, c.relay(shard).inbox, members...).Err(); err != nil {
		return fmt.Errorf("queue: drop the relay's notes: %w", err)
	}
	return nil
}

// SetRelayNextLoad records when the next waiting row beyond the horizon
// enters it (next, Unix ms on this process's clock; 0: no such row), after
// a pass that loaded every row that had entered it by covered
// (relaynext.lua): a time an enqueuer wrote that this pass covered goes,
// and one it did not cover stays if it is earlier than next.
func (c *Client) SetRelayNextLoad(ctx context.Context, shard int, covered, next int64) error {
	err := c.scripts.relayNext.Run(ctx, c.rdb, []string{c.relay(shard).next}, covered, next).Err()
	if err != nil {
		return fmt.Errorf("queue: set the relay's next load: %w", err)
	}
	return nil
}

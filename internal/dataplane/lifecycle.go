package dataplane

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"
)

// A topic's lifecycle is decided by its durability, here and nowhere else:
// every operation whose steps differ between a redis topic and a durable
// one asks its topic's lifecycle (Client.lifecycle), and no other code
// asks which durability a topic has (TestOnlyTheLifecycleKnowsDurability).
// Config holds the setting; Client.Durability reads it for display.

// Durability returns topic's durability (Config.TopicDurability, else
// Config.Durability), to show it: what differs between the two is the
// Client's to do, through the methods that differ. A partition's is its
// topic's.
func (c *Client) Durability(topic string) Durability {
	if d, ok := c.cfg.TopicDurability[TopicOf(topic)]; ok {
		return d
	}
	return c.cfg.Durability
}

// WaitsInSQL reports whether topic's waiting jobs are kept in the SQL
// ledger (a durable topic): they need the relay to reach Redis, they can
// be counted and searched there, and an enqueue can join a caller's SQL
// transaction.
func (c *Client) WaitsInSQL(topic string) bool { return c.lifecycle(topic).waitsInSQL() }

// SomeWaitInSQL reports whether some topic's waiting jobs may be kept in
// the SQL ledger: the default durability is durable, or a topic's is.
func (c *Client) SomeWaitInSQL() bool {
	if c.cfg.Durability == DurabilityDurable {
		return true
	}
	for _, d := range c.cfg.TopicDurability {
		if d == DurabilityDurable {
			return true
		}
	}
	return false
}

// lifecycle is what differs between the durabilities, per operation.
type lifecycle interface {
	// enqueue writes one call's validated jobs: one script (redis), or
	// the rows, committed, then the push (durable).
	enqueue(ctx context.Context, topic string, jobs []NewJob) ([]EnqueueResult, error)
	// requeueDead and requeueAllDead put dead jobs back: in Redis, or as
	// new rows first (SQL is the truth), then pushed.
	requeueDead(ctx context.Context, topic, id string) error
	requeueAllDead(ctx context.Context, topic string) (int, error)
	// enqueueTick enqueues a periodic tick's job with the claim of the
	// tick: in one script (redis), or in one SQL transaction (durable).
	enqueueTick(ctx context.Context, store TickStore, topic, name string, tick int64, j NewJob) (TickResult, error)
	// lastTicks reads the schedules' last ticks where enqueueTick keeps
	// them.
	lastTicks(ctx context.Context, store TickStore, topic string, names []string) (map[string]int64, error)
	// waitsInSQL says every waiting job has a ledger row from its enqueue
	// on: a claim updates that row (Job.Durable), a released claim's row
	// goes back to waiting rather than away, a cancel or reschedule
	// changes it, and a job Redis does not have is looked for there.
	waitsInSQL() bool
	// tombstone is how long an acked job's id refuses to be put back by
	// a relay or recovery pass that read its row before it went (0: no
	// such pass reads a redis topic's waiting jobs).
	tombstone() time.Duration
	// takenFor is how long Redis keeps a finished job's id taken (the
	// uniqueness window, §4.2.1): a redis topic's window; 0 for a durable
	// topic, whose enqueue reads the job history in SQL instead.
	takenFor(topic string) time.Duration
}

// lifecycle returns topic's lifecycle. Both are a pointer wide: no
// allocation per call.
func (c *Client) lifecycle(topic string) lifecycle {
	if c.Durability(topic) == DurabilityDurable {
		return durableTopic{c}
	}
	return redisTopic{c}
}

// redisTopic is the lifecycle of a topic whose waiting jobs are in Redis
// only. Its operations are with theirs: enqueue (enqueue.go), requeueDead
// and requeueAllDead (dead.go), enqueueTick and lastTicks (periodic.go).
type redisTopic struct{ c *Client }

func (redisTopic) waitsInSQL() bool         { return false }
func (redisTopic) tombstone() time.Duration { return 0 }

// takenFor is the topic's uniqueness window (Config.TopicUniqueFor).
func (t redisTopic) takenFor(topic string) time.Duration { return t.c.cfg.UniqueFor(topic) }

// durableTopic is the lifecycle of a topic whose waiting jobs are in SQL,
// and in Redis within the horizon (§4.11). Its operations are with
// theirs: enqueue (durable.go), requeueDead and requeueAllDead (dead.go);
// the ticks, which the store does, are here.
type durableTopic struct{ c *Client }

func (t durableTopic) enqueueTick(ctx context.Context, store TickStore, topic, name string, tick int64, j NewJob) (TickResult, error) {
	if noStore(store) {
		return TickResult{}, fmt.Errorf("queue: tick of %s on %s: %w", name, topic, ErrTickDurable)
	}
	r, err := store.EnqueueTick(ctx, t.c, topic, name, tick, j)
	var ve *ValidationError
	if err != nil && !errors.As(err, &ve) && !errors.Is(err, ErrLedger) {
		err = fmt.Errorf("queue: tick of %s on %s: %w: %w", name, topic, ErrLedger, err)
	}
	return r, err
}

func (t durableTopic) lastTicks(ctx context.Context, store TickStore, topic string, names []string) (map[string]int64, error) {
	if noStore(store) {
		return nil, fmt.Errorf("queue: last ticks of %s: %w", topic, ErrTickDurable)
	}
	m, err := store.LastTicks(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("queue: last ticks of %s: %w: %w", topic, ErrLedger, err)
	}
	return m, nil
}

func (durableTopic) waitsInSQL() bool { return true }

func (t durableTopic) tombstone() time.Duration { return t.c.cfg.TombstoneTTL }

func (durableTopic) takenFor(string) time.Duration { return 0 }

// noStore says store is nil, or an interface holding a nil pointer (a
// program's *ledger.Ledger left unset), which would panic when called.
func noStore(store TickStore) bool {
	if store == nil {
		return true
	}
	v := reflect.ValueOf(store)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

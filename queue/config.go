package queue

import (
	"fmt"
	"time"
)

// Config sets the data plane's limits. The zero value of each field means
// its default, written next to it.
type Config struct {
	// Namespace prefixes every key, so tenants and tests can share one
	// Redis. Default "dq". Same character set as topics.
	Namespace string
	// MaxPayloadBytes is the largest payload accepted. Default 1 MiB.
	MaxPayloadBytes int
	// MaxDelay is how far ahead a job may be scheduled. Default 365 days.
	MaxDelay time.Duration
	// DefaultMaxAttempts is used when a job does not set one. Default 25.
	DefaultMaxAttempts int
	// MaxBatch is the most jobs one EnqueueBatch call takes. Default 1,000.
	MaxBatch int
	// Coalesce is the most jobs one enqueue script call carries when
	// concurrent Enqueue and EnqueueBatch calls on a topic are coalesced:
	// the calls that arrive while one is in flight go together as one call.
	// Default MaxBatch (at most 10,000); -1 turns coalescing off (every call makes its own
	// script call, in parallel with the others).
	Coalesce int
	// CoalesceInFlight is how many coalesced script calls of one topic may
	// be in flight at once. With 2 the next group goes out while the one
	// before is on the wire, so Redis is not idle while the client hands
	// out results: at 50 goroutines it measured 1.1-1.6x the jobs/s of 1.
	// Default 2.
	CoalesceInFlight int
	// CoalesceBytes bounds the ids and payloads one coalesced call
	// carries, so that many large payloads do not make one huge script
	// call (Redis holds its arguments and copies while it runs, and blocks
	// other clients meanwhile). A caller over it alone still runs.
	// Default 4 MiB.
	CoalesceBytes int
	// ExpiredPerClaim bounds how many expired leases one claim (a script
	// call) puts back, so a mass worker death cannot make one call long.
	// Default 1,000.
	ExpiredPerClaim int
	// Observer, if set, is told how many new jobs each enqueue wrote, for
	// metrics. Default none.
	Observer EnqueueObserver

	// Durability is the durability of every topic not in TopicDurability
	// (docs/design.md §4.11). Default DurabilityRedis: the data plane then
	// needs no SQL database, and an enqueue costs one script call; choose
	// DurabilityDurable for the topics whose waiting jobs must survive any
	// Redis loss.
	Durability Durability
	// TopicDurability sets the durability of single topics. Default none.
	TopicDurability map[string]Durability
	// Store is the SQL side of durable topics (*ledger.Ledger). Required
	// when a topic is durable.
	Store DurableStore
	// Horizon: a durable job due further ahead than this stays in SQL only;
	// the relay loads it into Redis ahead of its due time, so Redis holds
	// the near future only. Default 1 hour.
	Horizon time.Duration
	// PushTimeout bounds the push of a durable job to Redis after its
	// commit. A push that fails is left to the relay, and pushes are then
	// skipped for as long, so a Redis outage slows durable enqueues down by
	// no more than this once. Default 1 second.
	PushTimeout time.Duration
	// UncertainRecheck is how long after a durable enqueue whose commit
	// failed with an unknown outcome (SQL unreachable mid-statement: the
	// connection or its server died) the relay checks every waiting row of
	// the horizon once more, after the check it makes at once. A Galera
	// node that dies while committing may have replicated the rows, and the
	// survivors make them visible only once they have evicted it
	// (evs.suspect_timeout, 5 s, up to evs.inactive_timeout, 15 s): the
	// relay's windows have passed their due times by then. Default 20s.
	UncertainRecheck time.Duration
	// TombstoneTTL is how long Redis remembers that a durable job was
	// acked or any job cancelled, so that a relay or recovery pass that read
	// its row just before cannot bring it back (restore.lua). Longer costs
	// Redis memory (about 60 bytes per job finished in the window). Default
	// 10 seconds.
	TombstoneTTL time.Duration
	// TopicUniqueFor is the uniqueness window of single topics: how long a
	// job's id stays taken after the job finished, whatever its outcome
	// (docs/design.md §4.2.1), so that a producer retrying an enqueue
	// within it does not run the job twice; an enqueue inside it is a
	// Duplicate with Finished set. Every process of a deployment must give
	// a topic the same window: a redis topic's workers and cancellers
	// write it (Redis keeps the ids, dq:{T}:taken), a durable topic's
	// enqueuers read it from the job history in SQL, which must then be on
	// for the topic and kept at least as long (ledger.Options.UniqueFor
	// sets the same for the ledger). At most MaxUniqueFor. Default none:
	// an id is free again as soon as its job finished.
	TopicUniqueFor map[string]time.Duration
	// Trace keeps the trace context of each enqueue (the OpenTelemetry span
	// in its context, or the traceparent an API request carried) with the
	// job, so that a worker with a TracerProvider runs it in a child span
	// of the same trace (docs/design.md §4.21). Costs one Redis key per
	// traced job (about 150 bytes, expiring a week after its due time) and
	// a write with each traced enqueue. Default off.
	Trace bool
	// LayoutRefresh is how long a process keeps a topic's partition layout
	// (its stored partition counts, docs/design.md §7.1) before it reads it
	// again: after an operator raises a topic's partitions, enqueues go to
	// the new layout and workers claim from it within this time. Default
	// 2 seconds.
	LayoutRefresh time.Duration
}

// MaxUniqueFor is the longest uniqueness window a topic may have: a redis
// topic keeps every id finished within it in Redis (about 80 bytes each).
const MaxUniqueFor = 30 * 24 * time.Hour

// MaxAttempts is the most attempts any job may have, whatever the
// configuration: a bound of the envelope format.
const MaxAttempts = 100

// maxCoalesce bounds one coalesced script call, which blocks Redis while it
// runs: 10,000 jobs take Redis a few tens of ms.
const maxCoalesce = 10000

// WithDefaults is the configuration the data plane runs with: every zero field
// set to the default written next to it, or the error of a field out of
// range.
func (c Config) WithDefaults() (Config, error) {
	if c.Namespace == "" {
		c.Namespace = "dq"
	}
	if !validName(c.Namespace, 64, false) {
		return c, fmt.Errorf("queue: namespace %q: want 1-64 of [A-Za-z0-9_.-]", c.Namespace)
	}
	if c.MaxPayloadBytes == 0 {
		c.MaxPayloadBytes = 1 << 20
	}
	if c.MaxDelay == 0 {
		c.MaxDelay = 365 * 24 * time.Hour
	}
	if c.DefaultMaxAttempts == 0 {
		c.DefaultMaxAttempts = 25
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 1000
	}
	if c.Coalesce == 0 {
		c.Coalesce = min(c.MaxBatch, maxCoalesce)
	}
	if c.CoalesceBytes == 0 {
		c.CoalesceBytes = 4 << 20
	}
	if c.CoalesceInFlight == 0 {
		c.CoalesceInFlight = 2
	}
	if c.ExpiredPerClaim == 0 {
		c.ExpiredPerClaim = 1000
	}
	if c.Observer == nil {
		c.Observer = NopObserver{}
	}
	if c.Durability == "" {
		c.Durability = DurabilityRedis
	}
	if c.Horizon == 0 {
		c.Horizon = time.Hour
	}
	if c.PushTimeout == 0 {
		c.PushTimeout = time.Second
	}
	if c.LayoutRefresh == 0 {
		c.LayoutRefresh = 2 * time.Second
	}
	if c.TombstoneTTL == 0 {
		c.TombstoneTTL = 10 * time.Second
	}
	if c.UncertainRecheck == 0 {
		c.UncertainRecheck = 20 * time.Second
	}
	if err := c.checkDurability(); err != nil {
		return c, err
	}
	switch {
	case c.MaxPayloadBytes < 0:
		return c, fmt.Errorf("queue: MaxPayloadBytes %d: must be positive", c.MaxPayloadBytes)
	case c.MaxDelay < 0:
		return c, fmt.Errorf("queue: MaxDelay %s: must be positive", c.MaxDelay)
	case c.DefaultMaxAttempts < 1 || c.DefaultMaxAttempts > MaxAttempts:
		return c, fmt.Errorf("queue: DefaultMaxAttempts %d: want 1-%d", c.DefaultMaxAttempts, MaxAttempts)
	case c.MaxBatch < 1:
		return c, fmt.Errorf("queue: MaxBatch %d: must be positive", c.MaxBatch)
	case c.Coalesce < -1 || c.Coalesce > maxCoalesce:
		return c, fmt.Errorf("queue: Coalesce %d: want -1 (off) or 1-%d", c.Coalesce, maxCoalesce)
	case c.CoalesceBytes < 1:
		return c, fmt.Errorf("queue: CoalesceBytes %d: must be positive", c.CoalesceBytes)
	case c.CoalesceInFlight < 1 || c.CoalesceInFlight > 64:
		return c, fmt.Errorf("queue: CoalesceInFlight %d: want 1-64", c.CoalesceInFlight)
	case c.ExpiredPerClaim < 1:
		return c, fmt.Errorf("queue: ExpiredPerClaim %d: must be positive", c.ExpiredPerClaim)
	case c.Horizon < time.Second:
		return c, fmt.Errorf("queue: Horizon %s: want at least 1s", c.Horizon)
	case c.PushTimeout < 0:
		return c, fmt.Errorf("queue: PushTimeout %s: must be positive", c.PushTimeout)
	case c.UncertainRecheck < time.Second || c.UncertainRecheck > time.Hour:
		return c, fmt.Errorf("queue: UncertainRecheck %s: want 1s to 1h", c.UncertainRecheck)
	case c.LayoutRefresh < 10*time.Millisecond:
		return c, fmt.Errorf("queue: LayoutRefresh %s: want at least 10ms", c.LayoutRefresh)
	case c.TombstoneTTL < time.Second:
		return c, fmt.Errorf("queue: TombstoneTTL %s: want at least 1s", c.TombstoneTTL)
	}
	return c, nil
}

// WithDurableTopics returns c with topics durable and every other topic
// redis (the settings Durability and TopicDurability replaced).
func (c Config) WithDurableTopics(topics ...string) Config {
	c.Durability, c.TopicDurability = DurabilityRedis, make(map[string]Durability, len(topics))
	for _, t := range topics {
		c.TopicDurability[t] = DurabilityDurable
	}
	return c
}

// checkDurability checks the durability settings: known values, valid topic
// names, and a Store when any topic is durable.
func (c Config) checkDurability() error {
	if _, err := ParseDurability(string(c.Durability)); err != nil {
		return fmt.Errorf("queue: Durability: %w", err)
	}
	durable := c.Durability == DurabilityDurable
	for topic, d := range c.TopicDurability {
		if err := ValidateTopic(topic); err != nil {
			return fmt.Errorf("queue: TopicDurability: %w", err)
		}
		if _, err := ParseDurability(string(d)); err != nil {
			return fmt.Errorf("queue: TopicDurability[%s]: %w", topic, err)
		}
		durable = durable || d == DurabilityDurable
	}
	if durable && c.Store == nil {
		return fmt.Errorf("queue: durable topics need a Store (the SQL ledger)")
	}
	for topic, w := range c.TopicUniqueFor {
		if err := ValidateTopic(topic); err != nil {
			return fmt.Errorf("queue: TopicUniqueFor: %w", err)
		}
		if w < 0 || w > MaxUniqueFor {
			return fmt.Errorf("queue: TopicUniqueFor[%s] %s: want 0 (none) up to %s", topic, w, MaxUniqueFor)
		}
		if w > 0 && w < time.Millisecond {
			return fmt.Errorf("queue: TopicUniqueFor[%s] %s: want at least 1ms", topic, w)
		}
	}
	return nil
}

// UniqueFor is topic's uniqueness window (TopicUniqueFor; 0 for none).
// topic may be a partition's name: a partition has its topic's window.
func (c Config) UniqueFor(topic string) time.Duration {
	return c.TopicUniqueFor[TopicOf(topic)]
}

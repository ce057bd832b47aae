package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/redis/go-redis/v9"
)

// TopicInfo is one topic as both stores see it: Redis's counts at one
// instant of its clock, the topic's durability, a durable topic's jobs
// waiting in SQL, and its pause state.
type TopicInfo struct {
	queue.Stats
	// Durability is the topic's, as text: redis or durable.
	Durability string
	// UniqueFor is the topic's uniqueness window (queue.Config's
	// TopicUniqueFor); 0 for none.
	UniqueFor time.Duration
	// SQL are a durable topic's waiting jobs in the store; nil for a redis
	// topic, or when no count is at hand (see NewInspector).
	SQL *DurableCount
	// Pause is the topic's pause state (Pause.Paused, and who paused it
	// when).
	Pause queue.PauseState
}

// DurableCount is how many jobs of a durable topic wait in the store, and
// how many of them are due beyond the horizon (in SQL only until the relay
// loads them), counted at CountedAt.
type DurableCount struct {
	Waiting, BeyondHorizon int64
	CountedAt              time.Time
}

// Counter gives the durable topics' waiting jobs by topic, as counted at
// the time it returns (the relay's cached counts: zero before its first
// count).
type Counter interface {
	Counts() (map[string]ledger.ScheduledCount, time.Time)
}

// Inspector reads topics across Redis and the store: what the API's and
// the CLI's topic views show. Build it with NewInspector, or take the
// engine's (Engine.Inspector).
type Inspector struct {
	q      *dataplane.Client
	store  *ledger.Shards // every ledger shard, the home shard first
	counts Counter        // nil: count in SQL on each call that needs it
}

// NewInspector reads the topics kept in rdb and store by processes that
// run with the data plane's configuration cfg (its Namespace and which
// topics are durable; cfg.Store is store), without an engine: a dashboard
// or a one-off report. counts gives the durable topics' counts (a relay's,
// which counts every RelayConfig.CountEvery, so that no read costs a SQL
// query); nil counts them in SQL on every call that needs them (one GROUP
// BY over the waiting rows' index), for a one-off read.
func NewInspector(rdb redis.UniversalClient, store *ledger.Ledger, cfg queue.Config, counts Counter) (*Inspector, error) {
	if store == nil {
		return newReader(rdb, nil, cfg, counts)
	}
	shards, err := ledger.NewShards(store)
	if err != nil {
		return nil, err
	}
	return newReader(rdb, shards, cfg, counts)
}

// NewShardsInspector is NewInspector over a ledger of several shards
// (docs/design.md §7.1): its listings and counts merge every shard's, and
// its data plane routes each job's steps to its shard.
func NewShardsInspector(rdb redis.UniversalClient, shards *ledger.Shards, cfg queue.Config, counts Counter) (*Inspector, error) {
	if shards == nil {
		return nil, errors.New("engine: NewShardsInspector: the shards are required")
	}
	return newReader(rdb, shards, cfg, counts)
}

func newReader(rdb redis.UniversalClient, shards *ledger.Shards, cfg queue.Config, counts Counter) (*Inspector, error) {
	if rdb == nil {
		return nil, errors.New("engine: NewInspector: a Redis client is required")
	}
	switch {
	case shards != nil && shards.Len() > 1:
		router, err := ledgerops.NewShards(shards.All()...)
		if err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
		cfg.Store = router
	case shards != nil:
		cfg.Store = shards.Home()
	}
	q, err := dataplane.New(rdb, cfg)
	if err != nil {
		return nil, err
	}
	return &Inspector{q: q, store: shards, counts: counts}, nil
}

// Inspector reads the engine's topics; the durable counts are the relay's
// once Run runs it, and counted on each read otherwise (before Run, or
// with NoRecovery).
func (e *Engine) Inspector() *Inspector {
	if e.cfg.NoRecovery || !e.ran.Load() {
		return &Inspector{q: e.q, store: e.readers}
	}
	return &Inspector{q: e.q, store: e.readers, counts: relayCounter{e}}
}

type relayCounter struct{ e *Engine }

func (c relayCounter) Counts() (map[string]ledger.ScheduledCount, time.Time) {
	return c.e.DurableCounts()
}

// Topic reads one topic. A topic nobody enqueued to has zero counts: after
// its last job finished, an empty topic is exactly that. A store error
// wraps queue.ErrLedger.
func (i *Inspector) Topic(ctx context.Context, topic string) (TopicInfo, error) {
	list, err := i.Topics(ctx, topic)
	if err != nil {
		return TopicInfo{}, err
	}
	return list[0], nil
}

// Topics reads topics, in order; none means every topic: those Redis has
// keys of, and the durable topics whose jobs all wait in SQL only, sorted.
// Pause states come in one round trip for all.
func (i *Inspector) Topics(ctx context.Context, topics ...string) ([]TopicInfo, error) {
	for _, t := range topics {
		if err := queue.ValidateTopic(t); err != nil {
			return nil, err
		}
	}
	counts, at, err := i.durableCounts(ctx, topics)
	if err != nil {
		return nil, err
	}
	counts = byTopic(counts)
	if len(topics) == 0 {
		if topics, err = i.q.Topics(ctx); err != nil {
			return nil, err
		}
		for t, c := range counts {
			if c.Total > 0 && i.q.WaitsInSQL(t) && !slices.Contains(topics, t) {
				topics = append(topics, t)
			}
		}
		slices.Sort(topics)
	}
	pauses, err := i.q.PausesOf(ctx, topics)
	if err != nil {
		return nil, err
	}
	out := make([]TopicInfo, 0, len(topics))
	for _, t := range topics {
		st, err := i.q.Stats(ctx, t)
		if err != nil {
			return nil, err
		}
		st.Topic = t
		info := TopicInfo{Stats: st, Durability: string(i.q.Durability(t)), Pause: pauses[t], UniqueFor: i.q.Config().UniqueFor(t)}
		if i.q.WaitsInSQL(t) && !at.IsZero() {
			c := counts[t]
			info.SQL = &DurableCount{Waiting: c.Total, BeyondHorizon: c.Beyond, CountedAt: at}
		}
		out = append(out, info)
	}
	return out, nil
}

// byTopic sums the counts of a topic's partitions (their rows carry the
// partitions' names, docs/design.md §7.1) into the topic's.
func byTopic(counts map[string]ledger.ScheduledCount) map[string]ledger.ScheduledCount {
	out := make(map[string]ledger.ScheduledCount, len(counts))
	addCounts(out, counts, dataplane.TopicOf)
	return out
}

// addCounts adds the counts of src into dst, each under key(its name).
func addCounts(dst, src map[string]ledger.ScheduledCount, key func(string) string) {
	for name, c := range src {
		k := key(name)
		sum := dst[k]
		sum.Total += c.Total
		sum.Beyond += c.Beyond
		dst[k] = sum
	}
}

// sameName is the key of addCounts that keeps each name.
func sameName(name string) string { return name }

// durableCounts are the counter's counts, or, without one, counted now in
// SQL when one of topics (any topic, for none) may be durable.
func (i *Inspector) durableCounts(ctx context.Context, topics []string) (map[string]ledger.ScheduledCount, time.Time, error) {
	if i.counts != nil {
		counts, at := i.counts.Counts()
		return counts, at, nil
	}
	if !i.anyDurable(topics) {
		return nil, time.Time{}, nil
	}
	counts := map[string]ledger.ScheduledCount{}
	for _, s := range i.store.All() {
		// Each shard's rows are timed by its own server's clock.
		now, err := s.SQLNow(ctx)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("%w: %w", queue.ErrLedger, err)
		}
		m, err := s.ScheduledCounts(ctx, now+i.q.Config().Horizon.Milliseconds())
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("%w: %w", queue.ErrLedger, err)
		}
		addCounts(counts, m, sameName)
	}
	return counts, time.Now(), nil
}

// anyDurable says whether one of topics (any topic, for none) is durable.
func (i *Inspector) anyDurable(topics []string) bool {
	if len(topics) == 0 {
		return i.q.SomeWaitInSQL()
	}
	return slices.ContainsFunc(topics, i.q.WaitsInSQL)
}

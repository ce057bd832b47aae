package httpapi

import (
	"net/http"
	"time"

	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/queue/engine"
)

// TopicStats are one topic's counts at one instant of Redis's clock; times
// are Unix milliseconds.
type TopicStats struct {
	Topic    string `json:"topic"`
	Now      int64  `json:"now"`
	Due      int64  `json:"due"`       // waiting in Redis, due or not
	DueNow   int64  `json:"due_now"`   // waiting and already due: the overdue backlog
	InFlight int64  `json:"in_flight"` // leased to workers
	Dead     int64  `json:"dead"`
	// OldestOverdueMs is how long the earliest overdue job has waited past
	// its due time: the number to alert on when workers fall behind.
	OldestOverdueMs int64 `json:"oldest_overdue_ms"`
	NextDue         int64 `json:"next_due,omitempty"`
	// ByPriority splits Due by priority: index l counts the waiting jobs
	// of priority l (0-3; docs/design.md §4.23).
	ByPriority [queue.MaxPriority + 1]int64 `json:"by_priority"`
	// Parked counts the waiting jobs parked behind an earlier job of their
	// ordering key (docs/design.md §4.24): in due, not in due_now.
	Parked int64 `json:"parked"`
	// Durability is where the topic's waiting jobs are kept safe: redis,
	// or durable (committed to SQL first; docs/design.md §4.11).
	Durability string `json:"durability"`
	// UniqueForMs is the topic's uniqueness window in ms
	// (queue.topics.<t>.unique_for): a finished job's id stays taken that
	// long; absent for none.
	UniqueForMs int64 `json:"unique_for_ms,omitempty"`
	// SQL are a durable topic's waiting jobs in the SQL ledger, as the
	// relay last counted them; absent for a redis topic, and where no count
	// is at hand (the process runs no relay, or it has not counted yet).
	SQL *SQLCounts `json:"sql,omitempty"`
	// Paused says an operator paused the topic: workers claim none of its
	// jobs until it is resumed. PausedAt (SQL's clock, Unix ms) and
	// PausedBy say when and by whom, while it is paused.
	Paused   bool   `json:"paused"`
	PausedAt int64  `json:"paused_at,omitempty"`
	PausedBy string `json:"paused_by,omitempty"`
	// RateLimit is the topic's rate limit as this process's configuration
	// has it (worker.topics.<t>.rate_limit); absent when it sets none.
	RateLimit *RateLimitView `json:"rate_limit,omitempty"`
	// Consumers counts the live worker processes that handle the topic
	// (the workers' registry, GET /v1/workers). Unconsumed says the topic
	// has jobs due now and no live worker handling it: they wait until a
	// worker for it starts (a typo in a topic name, or a producer that
	// started first).
	Consumers  int  `json:"consumers"`
	Unconsumed bool `json:"unconsumed"`
}

// SetConsumers fills Consumers and Unconsumed from the registry's counts.
func (s *TopicStats) SetConsumers(consumers map[string]int) {
	s.Consumers = consumers[s.Topic]
	s.Unconsumed = s.Consumers == 0 && s.DueNow > 0
}

// RateLimitView is a topic's rate limit: at most PerSecond handler starts
// per second across the cluster, Burst at once after an idle spell.
type RateLimitView struct {
	PerSecond float64 `json:"per_second"`
	Burst     int     `json:"burst"`
}

// NewRateLimitView renders l, nil when it is no limit.
func NewRateLimitView(l queue.RateLimit) *RateLimitView {
	if l.PerSecond <= 0 {
		return nil
	}
	return &RateLimitView{PerSecond: l.PerSecond, Burst: l.Burst}
}

// SQLCounts are a durable topic's waiting jobs (waiting rows) in the SQL
// ledger.
type SQLCounts struct {
	// Waiting counts them all; BeyondHorizon those due after
	// queue.horizon, which are in SQL only until the relay loads them.
	Waiting       int64 `json:"waiting"`
	BeyondHorizon int64 `json:"beyond_horizon"`
	// CountedAt is when they were counted, Unix ms: the relay counts
	// every recovery.RelayConfig.CountEvery (30 s), never per request.
	CountedAt int64 `json:"counted_at"`
}

// SQLCounter gives the counts of the durable topics' waiting jobs, cached
// (*recoverer.Relay: its Counts, refreshed by its own loop). A zero time
// means nothing was counted yet.
type SQLCounter interface {
	Counts() (map[string]ledger.ScheduledCount, time.Time)
}

// TopicList answers GET /v1/topics.
type TopicList struct {
	Topics []TopicStats `json:"topics"`
}

// NewTopicStats renders a topic as the inspector read it, with rl, its
// rate limit in this process's configuration.
func NewTopicStats(info engine.TopicInfo, rl queue.RateLimit) TopicStats {
	s := info.Stats
	v := TopicStats{
		Topic: s.Topic, Now: s.Now, Due: s.Due, DueNow: s.DueNow, InFlight: s.InFlight,
		Dead: s.Dead, OldestOverdueMs: s.OldestOverdueMs, NextDue: s.NextDue, ByPriority: s.ByPriority, Parked: s.Parked, Durability: info.Durability,
		RateLimit: NewRateLimitView(rl), UniqueForMs: info.UniqueFor.Milliseconds(),
	}
	if c := info.SQL; c != nil {
		v.SQL = &SQLCounts{Waiting: c.Waiting, BeyondHorizon: c.BeyondHorizon, CountedAt: c.CountedAt.UnixMilli()}
	}
	return WithPause(v, info.Pause)
}

// noCounts is the counter of a process that runs no relay: the API counts
// nothing per request.
type noCounts struct{}

func (noCounts) Counts() (map[string]ledger.ScheduledCount, time.Time) { return nil, time.Time{} }

// listTopics handles GET /v1/topics: every topic jobs were enqueued to, with
// its stats (one cheap script call per topic; topics are few). A durable
// topic whose jobs all wait beyond the horizon is in SQL only: the relay's
// counts name it.
func (a *api) listTopics(w http.ResponseWriter, r *http.Request) error {
	infos, err := a.inspect.Topics(r.Context())
	if err != nil {
		return fromRedis(err)
	}
	consumers, err := a.consumers(r)
	if err != nil {
		return err
	}
	out := TopicList{Topics: make([]TopicStats, 0, len(infos))}
	for _, info := range infos {
		s := NewTopicStats(info, a.rateLimits[info.Topic])
		s.SetConsumers(consumers)
		out.Topics = append(out.Topics, s)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// consumers counts the live workers of each topic from the registry.
func (a *api) consumers(r *http.Request) (map[string]int, error) {
	workers, err := a.q.Workers(r.Context())
	if err != nil {
		return nil, fromRedis(err)
	}
	return queue.Consumers(workers), nil
}

// topicStats handles GET /v1/topics/{topic}. A topic nobody enqueued to has
// zero counts rather than a 404: after a job finishes, an empty topic is
// exactly that.
func (a *api) topicStats(w http.ResponseWriter, r *http.Request) error {
	info, err := a.inspect.Topic(r.Context(), r.PathValue("topic"))
	if err != nil {
		return fromRedis(err)
	}
	consumers, err := a.consumers(r)
	if err != nil {
		return err
	}
	s := NewTopicStats(info, a.rateLimits[info.Topic])
	s.SetConsumers(consumers)
	writeJSON(w, http.StatusOK, s)
	return nil
}

package httpapi

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
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
	// Durability is where the topic's waiting jobs are kept safe: redis,
	// or durable (committed to SQL first; docs/design.md §4.11).
	Durability string `json:"durability"`
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

// SQLCounts are a durable topic's waiting jobs (scheduled rows) in the SQL
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
// (*recovery.Relay: its Counts, refreshed by its own loop). A zero time
// means nothing was counted yet.
type SQLCounter interface {
	Counts() (map[string]ledger.ScheduledCount, time.Time)
}

// TopicList answers GET /v1/topics.
type TopicList struct {
	Topics []TopicStats `json:"topics"`
}

// NewTopicStats renders a topic's stats with its durability and, for a
// durable topic counted at at (non-zero), its SQL counts c.
func NewTopicStats(s queue.Stats, d queue.Durability, c ledger.ScheduledCount, at time.Time) TopicStats {
	v := TopicStats{
		Topic: s.Topic, Now: s.Now, Due: s.Due, DueNow: s.DueNow, InFlight: s.InFlight,
		Dead: s.Dead, OldestOverdueMs: s.OldestOverdueMs, NextDue: s.NextDue, Durability: string(d),
	}
	if d == queue.DurabilityDurable && !at.IsZero() {
		v.SQL = &SQLCounts{Waiting: c.Total, BeyondHorizon: c.Beyond, CountedAt: at.UnixMilli()}
	}
	return v
}

// counts returns the cached SQL counts, nil and zero without a counter.
func (a *api) counts() (map[string]ledger.ScheduledCount, time.Time) {
	if a.sqlCounts == nil {
		return nil, time.Time{}
	}
	return a.sqlCounts.Counts()
}

// stats reads a topic's stats; its pause state is p, or read here when p
// is nil.
func (a *api) stats(ctx context.Context, topic string, counts map[string]ledger.ScheduledCount, at time.Time, p *queue.PauseState) (TopicStats, error) {
	s, err := a.q.Stats(ctx, topic)
	if err != nil {
		return TopicStats{}, fromRedis(err)
	}
	s.Topic = topic
	if p == nil {
		st, err := a.q.PauseOf(ctx, topic)
		if err != nil {
			return TopicStats{}, fromRedis(err)
		}
		p = &st
	}
	v := WithPause(NewTopicStats(s, a.q.Durability(topic), counts[topic], at), *p)
	v.RateLimit = NewRateLimitView(a.rateLimits[topic])
	return v, nil
}

// WithSQLOnlyTopics adds to topics (those Redis knows) the durable topics
// that counts give waiting jobs, whose jobs may all be in SQL only (due
// beyond the horizon), and returns them sorted.
func WithSQLOnlyTopics(topics []string, counts map[string]ledger.ScheduledCount, isDurable func(topic string) bool) []string {
	for t, c := range counts {
		if c.Total > 0 && isDurable(t) && !slices.Contains(topics, t) {
			topics = append(topics, t)
		}
	}
	slices.Sort(topics)
	return topics
}

// listTopics handles GET /v1/topics: every topic jobs were enqueued to, with
// its stats (one cheap script call per topic; topics are few). A durable
// topic whose jobs all wait beyond the horizon is in SQL only: the relay's
// counts name it.
func (a *api) listTopics(w http.ResponseWriter, r *http.Request) error {
	topics, err := a.q.Topics(r.Context())
	if err != nil {
		return fromRedis(err)
	}
	counts, at := a.counts()
	topics = WithSQLOnlyTopics(topics, counts, a.q.IsDurable)
	pauses, err := a.q.PausesOf(r.Context(), topics) // one round trip for all
	if err != nil {
		return fromRedis(err)
	}
	out := TopicList{Topics: make([]TopicStats, 0, len(topics))}
	for _, t := range topics {
		p := pauses[t]
		s, err := a.stats(r.Context(), t, counts, at, &p)
		if err != nil {
			return err
		}
		out.Topics = append(out.Topics, s)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// topicStats handles GET /v1/topics/{topic}. A topic nobody enqueued to has
// zero counts rather than a 404: after a job finishes, an empty topic is
// exactly that.
func (a *api) topicStats(w http.ResponseWriter, r *http.Request) error {
	counts, at := a.counts()
	s, err := a.stats(r.Context(), r.PathValue("topic"), counts, at, nil)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s)
	return nil
}

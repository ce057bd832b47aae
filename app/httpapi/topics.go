package httpapi

import (
	"net/http"

	"github.com/delayq/delayq/queue"
)

// TopicStats are one topic's counts at one instant of Redis's clock; times
// are Unix milliseconds.
type TopicStats struct {
	Topic    string `json:"topic"`
	Now      int64  `json:"now"`
	Due      int64  `json:"due"`       // waiting, due or not
	DueNow   int64  `json:"due_now"`   // waiting and already due: the overdue backlog
	InFlight int64  `json:"in_flight"` // leased to workers
	Dead     int64  `json:"dead"`
	// OldestOverdueMs is how long the earliest overdue job has waited past
	// its due time: the number to alert on when workers fall behind.
	OldestOverdueMs int64 `json:"oldest_overdue_ms"`
	NextDue         int64 `json:"next_due,omitempty"`
}

// TopicList answers GET /v1/topics.
type TopicList struct {
	Topics []TopicStats `json:"topics"`
}

func topicStats(s queue.Stats) TopicStats {
	return TopicStats{
		Topic: s.Topic, Now: s.Now, Due: s.Due, DueNow: s.DueNow, InFlight: s.InFlight,
		Dead: s.Dead, OldestOverdueMs: s.OldestOverdueMs, NextDue: s.NextDue,
	}
}

// listTopics handles GET /v1/topics: every topic jobs were enqueued to, with
// its stats (one cheap script call per topic; topics are few).
func (a *api) listTopics(w http.ResponseWriter, r *http.Request) error {
	topics, err := a.q.Topics(r.Context())
	if err != nil {
		return fromRedis(err)
	}
	out := TopicList{Topics: make([]TopicStats, 0, len(topics))}
	for _, t := range topics {
		s, err := a.q.Stats(r.Context(), t)
		if err != nil {
			return fromRedis(err)
		}
		out.Topics = append(out.Topics, topicStats(s))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// topicStats handles GET /v1/topics/{topic}. A topic nobody enqueued to has
// zero counts rather than a 404: after a job finishes, an empty topic is
// exactly that.
func (a *api) topicStats(w http.ResponseWriter, r *http.Request) error {
	s, err := a.q.Stats(r.Context(), r.PathValue("topic"))
	if err != nil {
		return fromRedis(err)
	}
	writeJSON(w, http.StatusOK, topicStats(s))
	return nil
}

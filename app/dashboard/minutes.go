package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/httpjson"
	"github.com/delayq/delayq/queue"
)

// MinutesPattern is the route of a topic's per-minute counts, the 24-hour
// charts of its page (mount MinutesHandler there, behind the API's token).
const MinutesPattern = "GET /v1/dashboard/minutes"

// MinuteReader reads per-minute counts (*dataplane.Client, Minutes).
type MinuteReader interface {
	Minutes(ctx context.Context, topic string, from, to int64) ([]dataplane.MinuteCounts, error)
}

// Minutes is the answer of GET /v1/dashboard/minutes: one topic's counts
// per minute over the last hours, oldest first, one array per counter,
// each as long as t.
type Minutes struct {
	Topic   string  `json:"topic"`
	Hours   int64   `json:"hours"`
	EveryMs int64   `json:"every_ms"` // 60,000
	T       []int64 `json:"t"`        // each minute's start, Unix ms
	// Summed over every process: jobs enqueued, handlers that succeeded,
	// failed attempts that retry, jobs that died.
	Enqueued []int64 `json:"enqueued"`
	Done     []int64 `json:"done"`
	Retried  []int64 `json:"retried"`
	Dead     []int64 `json:"dead"`
	// Backlog is the jobs due and not claimed, sampled once in the
	// minute by a server process; null where none sampled it.
	Backlog []any `json:"backlog"`
}

// MinutesHandler serves GET /v1/dashboard/minutes?topic=T&hours=H (hours
// 1 to 24, default 24). A missing or bad parameter is 400 naming it;
// Redis down, 503. Without a MinuteReader (Config.Minutes) the route
// answers 503 not_configured.
func (d *Dashboard) MinutesHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := d.minutes(w, r); err != nil {
			httpjson.WriteError(w, r, err)
		}
	})
}

func (d *Dashboard) minutes(w http.ResponseWriter, r *http.Request) error {
	if err := httpjson.Query(r, "topic", "hours"); err != nil {
		return err
	}
	topic := httpjson.QueryString(r, "topic")
	if topic == "" {
		return httpjson.BadRequest(httpjson.CodeMissingField, "topic", "give the topic: ?topic=NAME")
	}
	if err := queue.ValidateTopic(topic); err != nil {
		return httpjson.NewError(http.StatusBadRequest, httpapi.CodeInvalidTopic, "topic", err.Error())
	}
	hours, err := httpjson.QueryInt(r, "hours", 24, 1, 24)
	if err != nil {
		return err
	}
	if d.cfg.Minutes == nil {
		return httpjson.NewError(http.StatusServiceUnavailable, httpapi.CodeNotConfigured, "", "this process keeps no per-minute counts")
	}
	to := time.Now().Unix() / 60
	from := to - hours*60 + 1
	ms, err := d.cfg.Minutes.Minutes(r.Context(), topic, from, to)
	if err != nil {
		d.log.WithError(err).WithField("topic", topic).Debug("dashboard: minutes not read")
		return httpjson.NewError(http.StatusServiceUnavailable, httpapi.CodeBackendUnavailable, "", "redis is unavailable; retry later")
	}
	out := Minutes{Topic: topic, Hours: hours, EveryMs: 60_000, T: make([]int64, len(ms)), Enqueued: make([]int64, len(ms)),
		Done: make([]int64, len(ms)), Retried: make([]int64, len(ms)), Dead: make([]int64, len(ms)), Backlog: make([]any, len(ms))}
	for i, m := range ms {
		out.T[i] = m.Minute * 60_000
		out.Enqueued[i], out.Done[i], out.Retried[i], out.Dead[i] = m.Enqueued, m.Done, m.Retried, m.Dead
		out.Backlog[i] = orNull(m.Backlog >= 0, m.Backlog)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err := json.NewEncoder(w).Encode(out); err != nil {
		d.log.WithError(err).Debug("dashboard: writing the minutes failed")
	}
	return nil
}

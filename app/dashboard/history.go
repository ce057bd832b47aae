package dashboard

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/delayq/delayq/app/metrics"
	"github.com/delayq/delayq/queue"
)

// Source is what the dashboard charts: the process's live per-topic totals
// and the state of Redis and the ledger (*metrics.Metrics).
type Source interface {
	// SampleLive returns cumulative per-topic totals and the lateness of
	// the handlers started since the previous call.
	SampleLive() map[string]metrics.TopicSample
	// State returns a recent reading of Redis and the ledger.
	State(ctx context.Context) (metrics.State, error)
	// RelayState returns the totals of the durable topics' relay that runs
	// in this process; ok is false when none runs here.
	RelayState() (s metrics.RelayState, ok bool)
	// Targets returns the HTTP-target topics this process's workers
	// deliver, with their latest failures.
	Targets() map[string]metrics.TargetState
}

// maxTopics bounds how many topics the history keeps (the first by name).
const maxTopics = 100

// point is one topic's sample: rates over the interval that ends at At,
// and the gauges read then.
type point struct {
	At                                 int64 // Unix ms
	Enqueued, Completed, Retried, Dead float64
	Started                            int64
	LateAvgMs, LateMaxMs               float64
	HasState                           bool
	Due, Overdue, InFlight, DeadNow    int64
}

// history keeps the last points of every topic.
type history struct {
	size int

	mu     sync.Mutex
	prev   map[string]metrics.TopicSample
	prevAt time.Time
	topics map[string][]point
	ledger *ledgerCounts // the latest reading; nil when unknown
}

type ledgerCounts struct {
	Rows  int64 `json:"rows"`
	Stale int64 `json:"stale"`
}

func newHistory(size int) *history {
	return &history{size: size, topics: make(map[string][]point)}
}

// add turns one sample into a point per topic. The first sample only sets
// the baseline of the rates.
func (h *history) add(now time.Time, live map[string]metrics.TopicSample, st metrics.State, stErr error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	defer func() { h.prev, h.prevAt = live, now }()
	h.ledger = nil
	if stErr == nil && st.HasLedger && st.LedgerErr == nil {
		h.ledger = &ledgerCounts{Rows: st.LedgerRows, Stale: st.StaleRows}
	}
	if h.prevAt.IsZero() {
		return
	}
	dt := now.Sub(h.prevAt).Seconds()
	if dt <= 0 {
		return
	}
	gauges := make(map[string]queue.Stats)
	names := make([]string, 0, len(live)+len(st.Topics))
	for t := range live {
		names = append(names, t)
	}
	stateOK := stErr == nil && st.RedisErr == nil
	if stateOK {
		for _, s := range st.Topics {
			names = append(names, s.Topic)
			gauges[s.Topic] = s
		}
	}
	for t := range h.topics {
		names = append(names, t)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) > maxTopics {
		names = names[:maxTopics]
	}
	keep := make(map[string][]point, len(names))
	for _, t := range names {
		cur, prev := live[t], h.prev[t]
		rate := func(c, p int64) float64 { return float64(max(c-p, 0)) / dt }
		p := point{
			At:        now.UnixMilli(),
			Enqueued:  rate(cur.Enqueued, prev.Enqueued),
			Completed: rate(cur.Completed, prev.Completed),
			Retried:   rate(cur.Retried, prev.Retried),
			Dead:      rate(cur.Dead, prev.Dead),
			Started:   cur.Started,
			LateAvgMs: float64(cur.LatenessAvg) / float64(time.Millisecond),
			LateMaxMs: float64(cur.LatenessMax) / float64(time.Millisecond),
		}
		if s, ok := gauges[t]; ok {
			p.HasState, p.Due, p.Overdue, p.InFlight, p.DeadNow = true, s.Due, s.DueNow, s.InFlight, s.Dead
		} else if stateOK {
			p.HasState = true // not in the topics set: nothing waits
		}
		pts := append(h.topics[t], p)
		if n := len(pts) - h.size; n > 0 {
			pts = slices.Delete(pts, 0, n)
		}
		keep[t] = pts
	}
	h.topics = keep
}

// errUnwatched stands for the state a sample did not read: nobody looked
// at the charts lately.
var errUnwatched = errors.New("dashboard: nobody is watching")

// run samples src every interval until ctx ends. It reads the state of
// Redis and the ledger only while watched says someone looks at the charts;
// the live totals, kept in memory, are sampled always.
func (h *history) run(ctx context.Context, src Source, every time.Duration, watched func() bool) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		st, err := metrics.State{}, errUnwatched
		if watched() {
			st, err = src.State(ctx)
		}
		h.add(time.Now(), src.SampleLive(), st, err)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// topicSeries is one topic's history as the series endpoint sends it:
// one array per quantity, nulls where a value is unknown.
type topicSeries struct {
	Topic     string    `json:"topic"`
	T         []int64   `json:"t"`
	Enqueued  []float64 `json:"enqueued"`
	Completed []float64 `json:"completed"`
	Retried   []float64 `json:"retried"`
	Dead      []float64 `json:"dead"`
	LateAvgMs []any     `json:"late_avg_ms"` // null: no handler started then
	LateMaxMs []any     `json:"late_max_ms"`
	Due       []any     `json:"due"` // null: Redis could not be read
	Overdue   []any     `json:"overdue"`
	InFlight  []any     `json:"in_flight"`
	// The relay's pushes of this durable topic's jobs since this process
	// started (its relay's, when it runs one), as of the last sample.
	Loaded   int64 `json:"loaded"`
	Relayed  int64 `json:"relayed"`
	Reloaded int64 `json:"reloaded"`
	// Target is where an HTTP-target topic's jobs go, when this process
	// delivers them; null for other topics.
	Target *targetView `json:"target"`
}

// targetView is an HTTP-target topic as the page shows it: the method and
// the URL without its query, and the latest failures (no payload, no
// answer body, no secret: httptarget.Failure holds none).
type targetView struct {
	Method   string        `json:"method"`
	URL      string        `json:"url"`
	Failures []failureView `json:"failures"` // newest first
}

type failureView struct {
	At      int64  `json:"at"` // Unix ms
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
	Status  int    `json:"status"` // 0: no answer
	Class   string `json:"class"`
	Reason  string `json:"reason"`
}

func newTargetView(s metrics.TargetState) *targetView {
	v := &targetView{Method: s.Method, URL: s.URL, Failures: make([]failureView, 0, len(s.Failures))}
	for _, f := range s.Failures {
		v.Failures = append(v.Failures, failureView{At: f.At.UnixMilli(), JobID: f.JobID, Attempt: f.Attempt,
			Status: f.Status, Class: f.Class, Reason: f.Reason})
	}
	return v
}

// series returns every topic's history, by topic, and the latest ledger
// counts.
func (h *history) series() ([]topicSeries, *ledgerCounts) {
	h.mu.Lock()
	defer h.mu.Unlock()
	names := make([]string, 0, len(h.topics))
	for t := range h.topics {
		names = append(names, t)
	}
	slices.Sort(names)
	out := make([]topicSeries, 0, len(names))
	for _, t := range names {
		pts := h.topics[t]
		s := topicSeries{Topic: t}
		if last, ok := h.prev[t]; ok {
			s.Loaded, s.Relayed, s.Reloaded = last.Loaded, last.Relayed, last.Reloaded
		}
		for _, p := range pts {
			s.T = append(s.T, p.At)
			s.Enqueued = append(s.Enqueued, p.Enqueued)
			s.Completed = append(s.Completed, p.Completed)
			s.Retried = append(s.Retried, p.Retried)
			s.Dead = append(s.Dead, p.Dead)
			s.LateAvgMs = append(s.LateAvgMs, orNull(p.Started > 0, p.LateAvgMs))
			s.LateMaxMs = append(s.LateMaxMs, orNull(p.Started > 0, p.LateMaxMs))
			s.Due = append(s.Due, orNull(p.HasState, p.Due))
			s.Overdue = append(s.Overdue, orNull(p.HasState, p.Overdue))
			s.InFlight = append(s.InFlight, orNull(p.HasState, p.InFlight))
		}
		out = append(out, s)
	}
	var l *ledgerCounts
	if h.ledger != nil {
		c := *h.ledger
		l = &c
	}
	return out, l
}

func orNull[T any](ok bool, v T) any {
	if !ok {
		return nil
	}
	return v
}

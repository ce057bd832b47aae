package metrics

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/dataplane"
)

// MinuteWriter keeps per-minute counts (*dataplane.Client, AddMinute).
type MinuteWriter interface {
	AddMinute(ctx context.Context, topic string, m dataplane.MinuteCounts) error
}

// MinutesConfig configures RunMinutes.
type MinutesConfig struct {
	// Writer gets the counts. Required.
	Writer MinuteWriter
	// Every is how often the counts since the last flush are written:
	// one script call per topic that counted something. Default 5s.
	Every time.Duration
	// Backlog, when set, is read once a minute and written as each
	// topic's backlog of that minute (the server's processes set it; the
	// workers' leave it nil).
	Backlog func(ctx context.Context) (map[string]int64, error)
	// Logger gets the failures, at debug level (the charts miss a minute;
	// the counts are written with the next flush that works).
	Logger logrus.FieldLogger
}

// RunMinutes writes the process's per-topic counts (the live totals the
// dashboard samples: enqueued, completed, retried, dead) to Writer every
// Every, as what changed since the last write, until ctx ends, then
// writes what is left. Nothing is written per job: a process writes at
// most once per Every and topic.
func (m *Metrics) RunMinutes(ctx context.Context, cfg MinutesConfig) error {
	if cfg.Every <= 0 {
		cfg.Every = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = m.log
	}
	// Every count since the process started is written: the baseline is 0.
	f := &minuteFlusher{m: m, cfg: cfg, written: make(map[string]TopicSample)}
	t := time.NewTicker(cfg.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			f.flush(fctx, time.Now())
			return nil
		case now := <-t.C:
			f.flush(ctx, now)
		}
	}
}

// minuteFlusher is RunMinutes's state: the totals written so far and the
// last minute whose backlog was sampled.
type minuteFlusher struct {
	m           *Metrics
	cfg         MinutesConfig
	written     map[string]TopicSample
	backlogDone int64 // Unix minute
}

func (f *minuteFlusher) flush(ctx context.Context, now time.Time) {
	minute := now.Unix() / 60
	var backlog map[string]int64
	if f.cfg.Backlog != nil && f.backlogDone != minute {
		b, err := f.cfg.Backlog(ctx)
		if err != nil {
			f.cfg.Logger.WithError(err).Debug("minute counts: backlog not sampled")
		} else {
			backlog, f.backlogDone = b, minute
		}
	}
	cur := f.m.liveTotals()
	for topic := range backlog {
		if _, ok := cur[topic]; !ok {
			cur[topic] = f.written[topic] // no count here: only its backlog
		}
	}
	for topic, c := range cur {
		w := f.written[topic]
		mc := dataplane.MinuteCounts{Minute: minute, Enqueued: c.Enqueued - w.Enqueued, Done: c.Completed - w.Completed,
			Retried: c.Retried - w.Retried, Dead: c.Dead - w.Dead, Backlog: -1}
		if b, ok := backlog[topic]; ok {
			mc.Backlog = b
		}
		if mc.Enqueued == 0 && mc.Done == 0 && mc.Retried == 0 && mc.Dead == 0 && mc.Backlog < 0 {
			continue
		}
		if err := f.cfg.Writer.AddMinute(ctx, topic, mc); err != nil {
			// Kept for the next flush: the counts land a little later.
			f.cfg.Logger.WithError(err).WithField("topic", topic).Debug("minute counts not written")
			if _, ok := backlog[topic]; ok {
				f.backlogDone = 0 // and the backlog is sampled again
			}
			continue
		}
		f.written[topic] = c
	}
}

// liveTotals returns every topic's totals since the process started,
// leaving the lateness SampleLive hands out alone.
func (m *Metrics) liveTotals() map[string]TopicSample {
	out := make(map[string]TopicSample)
	m.live.topics.Range(func(k, v any) bool {
		t := v.(*liveTopic)
		out[k.(string)] = TopicSample{Enqueued: t.enqueued.Load(), Completed: t.completed.Load(),
			Retried: t.retried.Load(), Dead: t.dead.Load()}
		return true
	})
	return out
}

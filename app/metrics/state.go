package metrics

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/queue"
)

// QueueReader is what the state metrics read of Redis (*queue.Client):
// the topics set and one stats script per topic, no scans.
type QueueReader interface {
	Topics(ctx context.Context) ([]string, error)
	Stats(ctx context.Context, topic string) (queue.Stats, error)
}

// PauseReader is what the paused gauge reads of Redis (*queue.Client):
// the topics' pause keys, in one round trip. A QueueReader that is one
// gets delayq_topic_paused.
type PauseReader interface {
	PausesOf(ctx context.Context, topics []string) (map[string]queue.PauseState, error)
}

// LedgerReader is what the state metrics read of the ledger
// (*ledger.Ledger): two counts.
type LedgerReader interface {
	Count(ctx context.Context) (int64, error)
	CountStale(ctx context.Context, olderThan int64) (int64, error)
}

// StateConfig says where the state metrics come from.
type StateConfig struct {
	// Queue is read for the per-topic gauges. Required.
	Queue QueueReader
	// Ledger is read for the ledger gauges; nil leaves them out.
	Ledger LedgerReader
	// StaleAfter is how long past its lease a ledger row counts as stale:
	// the recoverer's grace. Default 1m.
	StaleAfter time.Duration
	// MaxAge is how long a reading is reused: one scrape reads once, and
	// scrapes and the dashboard close together share a reading. Default 1s.
	MaxAge time.Duration
	// Timeout bounds one reading. Default 5s.
	Timeout time.Duration
}

// State is one reading of Redis and the ledger.
type State struct {
	At time.Time
	// Topics are the stats of every known topic, sorted by topic; RedisErr
	// is why they are missing or incomplete.
	Topics   []queue.Stats
	RedisErr error
	// Paused are the topics' pause states (docs/design.md §4.13) when the
	// QueueReader is a PauseReader; nil otherwise.
	Paused map[string]queue.PauseState
	// LedgerRows and StaleRows count the ledger's rows, all and stale;
	// LedgerErr is why they are missing. HasLedger is false when no ledger
	// is watched.
	HasLedger  bool
	LedgerRows int64
	StaleRows  int64
	LedgerErr  error
}

// stateCollector reads State at scrape time.
type stateCollector struct {
	cfg StateConfig
	log logrus.FieldLogger

	mu   sync.Mutex // held while reading: concurrent callers share one reading
	last State

	due, overdue, inFlight, dead, oldest *prometheus.Desc
	paused                               *prometheus.Desc
	redisUp, ledgerUp, rows, stale       *prometheus.Desc
}

// WatchState registers the gauges read from Redis and the ledger at scrape
// time. Call it once.
func (m *Metrics) WatchState(cfg StateConfig) error {
	if cfg.Queue == nil {
		return errors.New("metrics: WatchState needs a Queue")
	}
	if cfg.StaleAfter == 0 {
		cfg.StaleAfter = time.Minute
	}
	if cfg.MaxAge == 0 {
		cfg.MaxAge = time.Second
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.StaleAfter < 0 || cfg.MaxAge < 0 || cfg.Timeout < 0 {
		return fmt.Errorf("metrics: StateConfig %+v: durations must not be negative", cfg)
	}
	name := func(n string) string { return prometheus.BuildFQName(namespace, "", n) }
	topic := []string{"topic"}
	c := &stateCollector{
		cfg:      cfg,
		log:      m.log,
		due:      prometheus.NewDesc(name("jobs_due"), "Jobs waiting in Redis, due or not (read at scrape time).", topic, nil),
		overdue:  prometheus.NewDesc(name("jobs_overdue"), "Jobs waiting in Redis whose due time has passed: the overdue backlog (read at scrape time).", topic, nil),
		inFlight: prometheus.NewDesc(name("jobs_in_flight"), "Jobs leased to workers (read at scrape time).", topic, nil),
		dead:     prometheus.NewDesc(name("jobs_dead"), "Jobs in the dead set (read at scrape time).", topic, nil),
		oldest:   prometheus.NewDesc(name("oldest_overdue_seconds"), "How long the earliest overdue job has waited past its due time (0 when none).", topic, nil),
		paused:   prometheus.NewDesc(name("topic_paused"), "1 while an operator has the topic paused (delayq pause): no worker claims its jobs; else 0.", topic, nil),
		redisUp:  prometheus.NewDesc(name("redis_up"), "1 when the scrape-time read of Redis succeeded, else 0.", nil, nil),
		ledgerUp: prometheus.NewDesc(name("ledger_up"), "1 when the scrape-time read of the ledger succeeded, else 0.", nil, nil),
		rows:     prometheus.NewDesc(name("ledger_rows"), "Rows in the ledger: jobs some worker started that have not finished for good.", nil, nil),
		stale:    prometheus.NewDesc(name("ledger_stale_rows"), "Ledger rows whose lease ended more than the recoverer's grace ago.", nil, nil),
	}
	if err := m.reg.Register(c); err != nil {
		return fmt.Errorf("metrics: register the state collector: %w", err)
	}
	m.mu.Lock()
	m.state = c
	m.mu.Unlock()
	return nil
}

// State returns a reading of Redis and the ledger no older than
// StateConfig.MaxAge. It fails only when WatchState was not called; read
// errors are in the State.
func (m *Metrics) State(ctx context.Context) (State, error) {
	m.mu.Lock()
	c := m.state
	m.mu.Unlock()
	if c == nil {
		return State{}, errors.New("metrics: State before WatchState")
	}
	return c.read(ctx), nil
}

// read returns the cached reading if it is fresh, else reads again.
func (c *stateCollector) read(ctx context.Context) State {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.last.At.IsZero() && time.Since(c.last.At) < c.cfg.MaxAge {
		return c.last
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	s := State{At: time.Now(), HasLedger: c.cfg.Ledger != nil}
	if topics, err := c.cfg.Queue.Topics(ctx); err != nil {
		s.RedisErr = err
	} else {
		for _, t := range topics {
			st, err := c.cfg.Queue.Stats(ctx, t)
			if err != nil {
				s.RedisErr = err
				break
			}
			st.Topic = t
			s.Topics = append(s.Topics, st)
		}
		if pr, ok := c.cfg.Queue.(PauseReader); ok && s.RedisErr == nil {
			s.Paused, s.RedisErr = pr.PausesOf(ctx, topics)
		}
	}
	if c.cfg.Ledger != nil {
		s.LedgerRows, s.LedgerErr = c.cfg.Ledger.Count(ctx)
		if s.LedgerErr == nil {
			s.StaleRows, s.LedgerErr = c.cfg.Ledger.CountStale(ctx, time.Now().Add(-c.cfg.StaleAfter).UnixMilli())
		}
	}
	if s.RedisErr != nil {
		c.log.WithError(s.RedisErr).Warn("metrics: reading Redis at scrape time failed")
	}
	if s.LedgerErr != nil {
		c.log.WithError(s.LedgerErr).Warn("metrics: reading the ledger at scrape time failed")
	}
	c.last = s
	return s
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.due, c.overdue, c.inFlight, c.dead, c.oldest, c.paused, c.redisUp, c.ledgerUp, c.rows, c.stale} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.read(context.Background())
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.redisUp, up(s.RedisErr))
	if s.RedisErr == nil { // a partial reading would show topics dropping to nothing
		for _, t := range s.Topics {
			gauge(c.due, float64(t.Due), t.Topic)
			gauge(c.overdue, float64(t.DueNow), t.Topic)
			gauge(c.inFlight, float64(t.InFlight), t.Topic)
			gauge(c.dead, float64(t.Dead), t.Topic)
			gauge(c.oldest, float64(t.OldestOverdueMs)/1000, t.Topic)
			if s.Paused != nil {
				v := 0.0
				if s.Paused[t.Topic].Paused {
					v = 1
				}
				gauge(c.paused, v, t.Topic)
			}
		}
	}
	if s.HasLedger {
		gauge(c.ledgerUp, up(s.LedgerErr))
		if s.LedgerErr == nil {
			gauge(c.rows, float64(s.LedgerRows))
			gauge(c.stale, float64(s.StaleRows))
		}
	}
}

func up(err error) float64 {
	if err != nil {
		return 0
	}
	return 1
}

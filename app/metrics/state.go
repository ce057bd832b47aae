package metrics

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// QueueReader is what the state metrics read of Redis (*dataplane.Client):
// the topics set and one stats script per topic, no scans.
type QueueReader interface {
	Topics(ctx context.Context) ([]string, error)
	Stats(ctx context.Context, topic string) (queue.Stats, error)
}

// PauseReader is what the paused gauge reads of Redis (*dataplane.Client):
// the topics' pause keys, in one round trip. A QueueReader that is one
// gets delayq_topic_paused.
type PauseReader interface {
	PausesOf(ctx context.Context, topics []string) (map[string]queue.PauseState, error)
}

// WorkersReader is what the consumers gauges read of Redis
// (*dataplane.Client): the workers' registry. A QueueReader that is one
// gets delayq_topic_consumers and delayq_workers.
type WorkersReader interface {
	Workers(ctx context.Context) ([]queue.WorkerInfo, error)
}

// LedgerReader is what the state metrics read of the ledger
// (*ledger.Ledger): two counts.
type LedgerReader interface {
	Count(ctx context.Context) (int64, error)
	CountStale(ctx context.Context, olderThan int64) (int64, error)
}

// SchemaReader is what the schema gauges read of the ledger
// (*ledger.Ledger): where its schema stands. A LedgerReader that is one
// gets delayq_ledger_schema_version and
// delayq_ledger_schema_pending_migrations.
type SchemaReader interface {
	MigrationStatus(ctx context.Context) (ledger.SchemaStatus, error)
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
	// SchemaMaxAge is how long a reading of the ledger's schema version is
	// reused: it changes only when someone migrates. Default 1m.
	SchemaMaxAge time.Duration
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
	// Workers is the workers' registry when the QueueReader is a
	// WorkersReader; nil otherwise.
	Workers []queue.WorkerInfo
	// LedgerRows and StaleRows count the ledger's rows, all and stale;
	// LedgerErr is why they are missing. HasLedger is false when no ledger
	// is watched.
	HasLedger  bool
	LedgerRows int64
	StaleRows  int64
	LedgerErr  error
	// Schema is where the ledger's schema stands, when the LedgerReader is
	// a SchemaReader and the reading succeeded; nil otherwise.
	Schema *ledger.SchemaStatus
}

// stateCollector reads State at scrape time.
type stateCollector struct {
	cfg StateConfig
	log logrus.FieldLogger

	mu   sync.Mutex // held while reading: concurrent callers share one reading
	last State
	// schemaAt is when last.Schema was read.
	schemaAt time.Time

	due, overdue, inFlight, dead, oldest *prometheus.Desc
	duePriority                          *prometheus.Desc // jobs_due by priority
	parked                               *prometheus.Desc // jobs parked behind their ordering key
	paused, consumers, workers           *prometheus.Desc
	redisUp, ledgerUp, rows, stale       *prometheus.Desc
	schemaVersion, schemaPending         *prometheus.Desc
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
	if cfg.SchemaMaxAge == 0 {
		cfg.SchemaMaxAge = time.Minute
	}
	if cfg.StaleAfter < 0 || cfg.MaxAge < 0 || cfg.Timeout < 0 || cfg.SchemaMaxAge < 0 {
		return fmt.Errorf("metrics: StateConfig %+v: durations must not be negative", cfg)
	}
	name := func(n string) string { return prometheus.BuildFQName(namespace, "", n) }
	topic := []string{"topic"}
	c := &stateCollector{
		cfg: cfg,
		log: m.log,
		due: prometheus.NewDesc(name("jobs_due"), "Jobs waiting in Redis, due or not (read at scrape time).", topic, nil),
		duePriority: prometheus.NewDesc(name("jobs_due_by_priority"),
			"Jobs waiting in Redis, due or not, by their priority within the topic (0-3; read at scrape time).", []string{"topic", "priority"}, nil),
		parked: prometheus.NewDesc(name("jobs_parked"),
			"Jobs waiting in Redis behind an earlier job of their ordering key, which runs or waits first; counted in jobs_due, not in jobs_overdue (read at scrape time).", topic, nil),
		overdue:  prometheus.NewDesc(name("jobs_overdue"), "Jobs waiting in Redis whose due time has passed: the overdue backlog (read at scrape time).", topic, nil),
		inFlight: prometheus.NewDesc(name("jobs_in_flight"), "Jobs leased to workers (read at scrape time).", topic, nil),
		dead:     prometheus.NewDesc(name("jobs_dead"), "Jobs in the dead set (read at scrape time).", topic, nil),
		oldest:   prometheus.NewDesc(name("oldest_overdue_seconds"), "How long the earliest overdue job has waited past its due time (0 when none).", topic, nil),
		paused:   prometheus.NewDesc(name("topic_paused"), "1 while an operator has the topic paused (delayq pause): no worker claims its jobs; else 0.", topic, nil),
		consumers: prometheus.NewDesc(name("topic_consumers"),
			"Live worker processes that handle the topic (the workers' registry, delayq workers); 0 with jobs overdue: nobody consumes it.", topic, nil),
		workers:  prometheus.NewDesc(name("workers"), "Worker processes in the registry, live or gone (stopped heartbeating, not yet forgotten).", []string{"state"}, nil),
		redisUp:  prometheus.NewDesc(name("redis_up"), "1 when the scrape-time read of Redis succeeded, else 0.", nil, nil),
		ledgerUp: prometheus.NewDesc(name("ledger_up"), "1 when the scrape-time read of the ledger succeeded, else 0.", nil, nil),
		rows:     prometheus.NewDesc(name("ledger_rows"), "Rows in the ledger: jobs some worker started that have not finished for good.", nil, nil),
		stale:    prometheus.NewDesc(name("ledger_stale_rows"), "Ledger rows whose lease ended more than the recoverer's grace ago.", nil, nil),
		schemaVersion: prometheus.NewDesc(name("ledger_schema_version"),
			"The ledger's schema version: every migration up to it is applied (delayq migrate --status).", nil, nil),
		schemaPending: prometheus.NewDesc(name("ledger_schema_pending_migrations"),
			"Migrations this build knows that the ledger's database lacks; run delayq migrate while above 0.", nil, nil),
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
		if wr, ok := c.cfg.Queue.(WorkersReader); ok && s.RedisErr == nil {
			s.Workers, s.RedisErr = wr.Workers(ctx)
			if s.Workers == nil && s.RedisErr == nil {
				s.Workers = []queue.WorkerInfo{}
			}
		}
	}
	if c.cfg.Ledger != nil {
		s.LedgerRows, s.LedgerErr = c.cfg.Ledger.Count(ctx)
		if s.LedgerErr == nil {
			s.StaleRows, s.LedgerErr = c.cfg.Ledger.CountStale(ctx, time.Now().Add(-c.cfg.StaleAfter).UnixMilli())
		}
		s.Schema = c.readSchema(ctx, s.At)
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

// readSchema returns the ledger's schema status, read again once the last
// reading is SchemaMaxAge old; nil when the ledger cannot say. c.mu is held.
func (c *stateCollector) readSchema(ctx context.Context, now time.Time) *ledger.SchemaStatus {
	sr, ok := c.cfg.Ledger.(SchemaReader)
	if !ok {
		return nil
	}
	if c.last.Schema != nil && now.Sub(c.schemaAt) < c.cfg.SchemaMaxAge {
		return c.last.Schema
	}
	st, err := sr.MigrationStatus(ctx)
	if err != nil {
		c.log.WithError(err).Warn("metrics: reading the ledger's schema version failed")
		return nil
	}
	c.schemaAt = now
	return &st
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.due, c.duePriority, c.parked, c.overdue, c.inFlight, c.dead, c.oldest, c.paused, c.consumers, c.workers, c.redisUp, c.ledgerUp, c.rows, c.stale,
		c.schemaVersion, c.schemaPending} {
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
			for l, n := range t.ByPriority {
				gauge(c.duePriority, float64(n), t.Topic, strconv.Itoa(l))
			}
			gauge(c.parked, float64(t.Parked), t.Topic)
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
		if s.Workers != nil {
			consumers := queue.Consumers(s.Workers)
			states := map[string]int{queue.WorkerLive: 0, queue.WorkerGone: 0}
			for _, w := range s.Workers {
				states[w.State]++
			}
			for _, t := range s.Topics {
				gauge(c.consumers, float64(consumers[t.Topic]), t.Topic)
			}
			for st, n := range states {
				gauge(c.workers, float64(n), st)
			}
		}
	}
	if s.HasLedger {
		gauge(c.ledgerUp, up(s.LedgerErr))
		if s.LedgerErr == nil {
			gauge(c.rows, float64(s.LedgerRows))
			gauge(c.stale, float64(s.StaleRows))
		}
		if s.Schema != nil {
			gauge(c.schemaVersion, float64(s.Schema.Version))
			gauge(c.schemaPending, float64(len(s.Schema.Pending())))
		}
	}
}

func up(err error) float64 {
	if err != nil {
		return 0
	}
	return 1
}

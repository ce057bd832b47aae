package metrics

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/recovery"
)

// The durable topics' metrics (docs/design.md §4.11): the pushes right
// after an enqueue's commit (every process that enqueues), and where a
// relay runs, its work and the waiting jobs in SQL.

// RelayReader is what the relay metrics read at scrape time
// (*recoverer.Relay): its running totals and its cached counts of the
// waiting rows (refreshed by the relay itself, never by a scrape).
type RelayReader interface {
	Totals() recovery.RelayTotals
	Counts() (map[string]ledger.ScheduledCount, time.Time)
}

// ShardRelayReader is a RelayReader of a ledger of several shards
// (docs/design.md §7.1), one relay per shard: its passes, wakes, handovers
// and last success are exported per shard (label shard), so that one
// shard's failing relay is not hidden by the others' successes.
type ShardRelayReader interface {
	RelayReader
	// TotalsByShard are each shard's relay totals, shard order.
	TotalsByShard() []recovery.RelayTotals
}

// Relay push kinds, the values of delayq_relay_pushed_total's kind label.
var relayKinds = []string{"loaded", "relayed", "reloaded"}

// durableMetrics are made with the Metrics, so that Pushed and RelayPass
// always have somewhere to count; the relay's part is registered by
// WatchRelay.
type durableMetrics struct {
	pushes *prometheus.CounterVec // topic, result = pushed | deferred
	pushed *prometheus.CounterVec // topic, kind = loaded | relayed | reloaded
}

func newDurableMetrics() durableMetrics {
	return durableMetrics{
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "durable_pushes_total",
			Help: "Durable jobs this process committed and then pushed to Redis, by result: pushed (in Redis now), deferred (Redis down or slow, or it had the job already: left to the relay, which pushes it when it falls due or enters the horizon).",
		}, []string{"topic", "result"}),
		pushed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "relay_pushed_total",
			Help: "Durable jobs the relay pushed to Redis: loaded (entered the horizon), relayed (due and missing: a lost push), reloaded (the horizon reloaded after Redis lost the relay's mark).",
		}, []string{"topic", "kind"}),
	}
}

// Pushed counts the pushes of durable jobs after their commit
// (queue.PushObserver): those now in Redis, and those left to the relay.
func (m *Metrics) Pushed(topic string, pushed, notPushed int) {
	if pushed > 0 {
		m.durable.pushes.WithLabelValues(topic, "pushed").Add(float64(pushed))
	}
	if notPushed > 0 {
		m.durable.pushes.WithLabelValues(topic, "deferred").Add(float64(notPushed))
	}
}

// InitDurableTopic creates a durable topic's push and relay series at zero,
// so that increase() sees their first event (a series born at 1 would hide
// a first lost push).
func (m *Metrics) InitDurableTopic(topic string) {
	m.durable.pushes.WithLabelValues(topic, "pushed")
	m.durable.pushes.WithLabelValues(topic, "deferred")
	for _, k := range relayKinds {
		m.durable.pushed.WithLabelValues(topic, k)
	}
	m.live.topic(topic)
}

// RelayPass counts the jobs one relay pass pushed, by topic and kind
// (recovery.RelayConfig.OnPass). Passes themselves are read from the
// relay's totals at scrape time (WatchRelay).
func (m *Metrics) RelayPass(rep recovery.RelayReport) {
	for kind, byTopic := range map[string]map[string]int{"loaded": rep.Loaded, "relayed": rep.Relayed, "reloaded": rep.Reloaded} {
		for topic, n := range byTopic {
			if n == 0 {
				continue
			}
			m.durable.pushed.WithLabelValues(topic, kind).Add(float64(n))
			t := m.live.topic(topic)
			switch kind {
			case "loaded":
				t.loaded.Add(int64(n))
			case "relayed":
				t.relayed.Add(int64(n))
			case "reloaded":
				t.reloaded.Add(int64(n))
			}
		}
	}
}

// relayCollector exports a relay's passes, last success and the waiting
// jobs it counted, read at scrape time.
type relayCollector struct {
	r       RelayReader
	every   float64   // seconds
	started time.Time // the last success before the first: a fresh relay is not a failing one

	waiting, passes, wakes, handOvers, lastSuccess, interval, countedAt *prometheus.Desc
}

// WatchRelay registers the metrics of the relay that runs in this process:
// its passes by result, the time of its last pass without errors (before
// the first one, the time of this call), relay_every (so that alerts can
// say "no successful pass for N intervals"), and per topic the durable
// jobs waiting in SQL within the horizon and beyond it, as of the relay's
// last count (recovery.RelayConfig.CountEvery; a scrape never counts).
// Call it once, in a process that runs a relay.
func (m *Metrics) WatchRelay(r RelayReader, every time.Duration) error {
	if r == nil {
		return errors.New("metrics: WatchRelay needs the relay")
	}
	if every <= 0 {
		return fmt.Errorf("metrics: WatchRelay: relay interval %s: must be positive", every)
	}
	name := func(n string) string { return prometheus.BuildFQName(namespace, "", n) }
	c := &relayCollector{
		r: r, every: every.Seconds(), started: time.Now(),
		waiting: prometheus.NewDesc(name("durable_waiting_jobs"),
			"Durable jobs waiting in the SQL ledger (waiting rows) by topic: where=horizon, due within queue.horizon (in Redis too), where=beyond, due later (in SQL only until the relay loads them). As of the relay's last count.",
			[]string{"topic", "where"}, nil),
		passes: prometheus.NewDesc(name("relay_passes_total"),
			"Relay passes this process made while it held the relay lock, by result: ok or failed, and ledger shard (each shard has its relay and lock).", []string{"result", "shard"}, nil),
		wakes: prometheus.NewDesc(name("relay_wakes_total"),
			"Relay passes over SQL by what woke them: note (an enqueuer's push was lost, skipped or never made), load (a durable job entered the horizon), lost (Redis lost the relay's mark), error (a tick or pass failed), lead (this process took the relay lock), full (recovery.relay_full_every), check (recovery.relay_check_every with nothing else), recheck (an enqueue's commit failed with an unknown outcome: a full pass at once and queue.uncertain_recheck later), once (RunOnce). Between wakes the relay reads only Redis, every recovery.relay_every.",
			[]string{"cause", "shard"}, nil),
		handOvers: prometheus.NewDesc(name("relay_handovers_total"),
			"Times this process released a shard's relay lock because its passes all failed for recovery.relay_handover_after (its SQL unreachable while another process's may answer).", []string{"shard"}, nil),
		lastSuccess: prometheus.NewDesc(name("relay_last_success_timestamp_seconds"),
			"Unix time the last relay pass of this process without errors started, by ledger shard; before the first, the time the relay's metrics were set up. A process that does not hold a shard's relay lock keeps that value: alert on the maximum by shard.", []string{"shard"}, nil),
		interval: prometheus.NewDesc(name("relay_interval_seconds"), "How often the relay ticks (recovery.relay_every); it passes over SQL when woken, and at least every recovery.relay_check_every.", nil, nil),
		countedAt: prometheus.NewDesc(name("durable_counted_timestamp_seconds"),
			"Unix time of the relay's last count of the waiting durable jobs (0: none yet).", nil, nil),
	}
	if err := m.reg.Register(c); err != nil {
		return fmt.Errorf("metrics: register the relay's metrics: %w", err)
	}
	for _, col := range []prometheus.Collector{m.durable.pushed} {
		if err := m.reg.Register(col); err != nil {
			return fmt.Errorf("metrics: register the relay's metrics: %w", err)
		}
	}
	m.mu.Lock()
	m.relay = c
	m.mu.Unlock()
	return nil
}

func (c *relayCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.waiting, c.passes, c.wakes, c.handOvers, c.lastSuccess, c.interval, c.countedAt} {
		ch <- d
	}
}

func (c *relayCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for i, t := range c.byShard() {
		shard := strconv.Itoa(i)
		counter(c.passes, t.Passes-t.Failed, "ok", shard)
		counter(c.passes, t.Failed, "failed", shard)
		for _, cause := range recovery.WakeCauses {
			counter(c.wakes, t.Wakes[cause], cause, shard)
		}
		counter(c.handOvers, t.HandOvers, shard)
		gauge(c.lastSuccess, seconds(c.lastOK(t)), shard)
	}
	gauge(c.interval, c.every)
	counts, at := c.r.Counts()
	gauge(c.countedAt, seconds(at))
	for topic, n := range counts {
		gauge(c.waiting, float64(n.Total-n.Beyond), topic, "horizon")
		gauge(c.waiting, float64(n.Beyond), topic, "beyond")
	}
}

// byShard is each shard's relay totals: the one relay's on a ledger of
// one shard.
func (c *relayCollector) byShard() []recovery.RelayTotals {
	if s, ok := c.r.(ShardRelayReader); ok {
		if t := s.TotalsByShard(); len(t) > 0 {
			return t
		}
	}
	return []recovery.RelayTotals{c.r.Totals()}
}

func (c *relayCollector) lastOK(t recovery.RelayTotals) time.Time {
	if t.LastOK.IsZero() {
		return c.started
	}
	return t.LastOK
}

// seconds is t in Unix seconds, 0 for the zero time.
func seconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

// RelayState is what the dashboard shows of the relay that runs in this
// process: its totals and when its last successful pass started.
type RelayState struct {
	Totals recovery.RelayTotals
	LastOK time.Time // Totals.LastOK, or when WatchRelay was called
	Every  time.Duration
}

// RelayState returns the relay's state; ok is false when no relay runs in
// this process (WatchRelay was not called).
func (m *Metrics) RelayState() (s RelayState, ok bool) {
	m.mu.Lock()
	c := m.relay
	m.mu.Unlock()
	if c == nil {
		return RelayState{}, false
	}
	t := c.r.Totals()
	// The oldest shard's last success: the sum's is the latest of all,
	// which would hide one shard's failing relay.
	last := c.lastOK(t)
	for _, s := range c.byShard() {
		if ok := c.lastOK(s); ok.Before(last) {
			last = ok
		}
	}
	return RelayState{Totals: t, LastOK: last, Every: time.Duration(c.every * float64(time.Second))}, true
}

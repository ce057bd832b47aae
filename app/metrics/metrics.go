// Package metrics is delayq's Prometheus instrumentation: one registry per
// process (no global state, no default registry) holding
//
//   - the worker's counters and histograms, fed through queue.Observer and
//     queue.EnqueueObserver (worker.go);
//   - the state of Redis and the ledger, read at scrape time with cheap
//     calls and cached for a moment so that one scrape reads once
//     (state.go);
//   - the recoverer's runs, data-loss detections and last success
//     (recovery.go);
//   - the order sweeper's sweeps, the close jobs they found missing and
//     its last success (orderclose.go);
//   - the durable topics' pushes after commit, and where a relay runs, its
//     passes and pushes and the jobs waiting in SQL (relay.go);
//   - the HTTP-target topics' requests by status class and their
//     durations, and for the dashboard each target and its latest
//     failures (target.go);
//   - live per-topic totals for the dashboard's charts (live.go);
//   - the ledger's commits, write calls and deadlocks (ledgerwrites.go).
//
// Every name starts with delayq_, counters end in _total and durations are
// in seconds, as Prometheus conventions want. deployments/prometheus/
// alerts.yml alerts on them.
package metrics

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"
)

// namespace prefixes every metric name.
const namespace = "delayq"

// DurationBuckets are the buckets of the handler duration and lateness
// histograms, in seconds: fine enough to tell 1 ms from 10 ms from 1 s,
// and wide enough for a backlog minutes late.
var DurationBuckets = []float64{
	0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5,
	1, 2, 5, 10, 30, 60, 120, 300, 900,
}

// Metrics is one process's instrumentation. Create it with New; it is safe
// for concurrent use.
type Metrics struct {
	reg *prometheus.Registry
	log logrus.FieldLogger

	enqueued, claimed, completed, retried, dead, released, recovered *prometheus.CounterVec
	cancelledRunning                                                 *prometheus.CounterVec
	taken                                                            *prometheus.CounterVec

	handlerDuration, lateness *prometheus.HistogramVec
	enqueueCallJobs           *prometheus.HistogramVec
	reschedules               *prometheus.CounterVec // topic, result (reschedule.go)

	heartbeatAt *prometheus.GaugeVec
	heartbeats  *prometheus.CounterVec
	unsettled   *prometheus.GaugeVec
	gone, letGo *prometheus.CounterVec
	// poolInFlight and poolSize: the worker's shared pools (pool).
	poolInFlight, poolSize *prometheus.GaugeVec

	live           live
	sweep          sweepMetrics
	durable        durableMetrics
	target         targetMetrics
	rate           rateMetrics
	targets        sync.Map     // topic -> *targetLive, for the dashboard (target.go)
	sweepSucceeded atomic.Int64 // successful sweeps so far

	mu       sync.Mutex
	state    *stateCollector // nil until WatchState
	recovery *recoveryMetrics
	relay    *relayCollector // nil until WatchRelay
}

// New returns the metrics of one process on a registry of its own, with
// the Go runtime and process collectors. log receives scrape-time read
// errors (nil: logrus's standard logger).
func New(log logrus.FieldLogger) *Metrics {
	if log == nil {
		log = logrus.StandardLogger()
	}
	m := &Metrics{
		reg:     prometheus.NewRegistry(),
		log:     log.WithField("component", "metrics"),
		sweep:   newSweepMetrics(),
		durable: newDurableMetrics(),
		target:  newTargetMetrics(),
		rate:    newRateMetrics(),
	}
	perTopic := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: name, Help: help,
		}, []string{"topic"})
	}
	m.enqueued = perTopic("jobs_enqueued_total", "New jobs written to the topic by this process (duplicates not counted).")
	m.claimed = perTopic("jobs_claimed_total", "Jobs this process's workers claimed (leased).")
	m.completed = perTopic("jobs_completed_total", "Jobs whose handler succeeded and that were settled (ledger row and Redis entries deleted).")
	m.retried = perTopic("jobs_retried_total", "Failed jobs put back for another attempt.")
	m.dead = perTopic("jobs_dead_total", "Jobs that died (out of attempts or failed permanently) and were archived.")
	m.released = perTopic("jobs_released_total", "Claimed jobs handed back unstarted with their attempt unspent (ledger failure, shutdown).")
	m.taken = perTopic("enqueue_taken_total", "Enqueues answered as duplicates because the id's job finished within the topic's uniqueness window (queue.topics.<t>.unique_for): producers retrying what already ran.")
	m.cancelledRunning = perTopic("jobs_cancelled_running_total", "Jobs a worker held that ended cancelled: a cancel was asked while they ran (DELETE of a running job) and their run failed or never started.")
	m.recovered = perTopic("jobs_recovered_total", "Jobs the recoverer re-enqueued because Redis had lost them.")
	perTopicHist := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: name, Help: help, Buckets: DurationBuckets,
		}, []string{"topic"})
	}
	m.handlerDuration = perTopicHist("handler_duration_seconds", "How long handlers ran, successful or not.")
	m.lateness = perTopicHist("job_lateness_seconds", "Start of the handler minus the job's due time (Redis clock).")
	m.enqueueCallJobs = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "enqueue_call_jobs",
		Help:    "Jobs per enqueue script call: above 1 for one caller's batch or for concurrent enqueues coalesced into one call.",
		Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000},
	}, []string{"topic"})
	m.heartbeatAt = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "worker_heartbeat_timestamp_seconds",
		Help: "Unix time of the worker's last heartbeat (it beats every heartbeat interval, busy or idle).",
	}, []string{"worker"})
	m.heartbeats = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "worker_heartbeats_total",
		Help: "Heartbeats of the worker.",
	}, []string{"worker"})
	m.unsettled = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "worker_unsettled_jobs",
		Help: "Finished jobs of the worker waiting for their settlement (a store down; their leases are renewed meanwhile), as of its last heartbeat.",
	}, []string{"worker"})
	m.gone = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "worker_gone_jobs_total",
		Help: "Claimed jobs the worker found finished already (ledger row gone, history succeeded or dead: an ack Redis never got) and acked without running them.",
	}, []string{"topic"})
	m.letGo = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "worker_let_go_jobs_total",
		Help: "Jobs the worker let go because its ledger did not answer for worker.ledger_hold while another worker's did: their handlers cut at their leases' end, for a worker that reaches the ledger.",
	}, []string{"topic"})
	m.poolInFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "worker_pool_in_flight_jobs",
		Help: "Jobs of a shared pool's topics the worker holds (claimed, waiting for a handler or running), as of its last registry write (worker.pools).",
	}, []string{"pool"})
	m.poolSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "worker_pool_concurrency",
		Help: "The size of a shared pool of handlers: at most this many jobs of its topics at once (worker.pools.<pool>.concurrency).",
	}, []string{"pool"})
	m.reg.MustRegister(
		m.poolInFlight, m.poolSize,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.enqueued, m.claimed, m.completed, m.retried, m.dead, m.released, m.recovered, m.cancelledRunning, m.taken,
		m.handlerDuration, m.lateness, m.enqueueCallJobs, m.heartbeatAt, m.heartbeats, m.unsettled, m.gone, m.letGo,
		m.durable.pushes,
		m.target.requests, m.target.seconds,
	)
	m.reg.MustRegister(m.rate.collectors()...)
	m.reschedules = newReschedules(m.reg)
	return m
}

// Registry is the process's registry, for collectors of its own.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// scrapeTimeout bounds one /metrics answer, scrape-time reads included.
const scrapeTimeout = 10 * time.Second

// Handler serves the registry in the Prometheus text format (or
// OpenMetrics when asked). Concurrent scrapes share one gathering.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:       errorLog{m.log},
		ErrorHandling:  promhttp.ContinueOnError,
		Registry:       m.reg, // promhttp_metric_handler_errors_total
		CoalesceGather: true,
		Timeout:        scrapeTimeout,
	})
}

// errorLog passes promhttp's errors to logrus.
type errorLog struct{ log logrus.FieldLogger }

func (e errorLog) Println(v ...any) { e.log.Warn(v...) }

package bench

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"
	"gorm.io/gorm"

	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/recovery"
)

// ErrOptions is matched (errors.Is) by the error of a run refused for bad
// Options.
var ErrOptions = errors.New("bench: invalid options")

// Env is what the scenarios run on: a Redis and the ledger's SQL database.
// Each run makes a sandbox in them (a key namespace and table prefix of its
// own) and removes it afterwards.
type Env struct {
	// Redis is any go-redis client (single node, Sentinel or Cluster, or
	// one to an embedded miniredis). Required.
	Redis redis.UniversalClient
	// DB is the ledger's database, MySQL/MariaDB or SQLite. Required.
	DB *gorm.DB
	// Queue holds the data plane's limits; its Namespace is replaced by
	// the sandbox's.
	Queue queue.Config
	// Logger receives the worker's and the API's logs. Default: discarded.
	Logger logrus.FieldLogger
	// Keep leaves the sandbox's keys and tables in place after the run, to
	// look at them.
	Keep bool
	// Recovery and Relay are the recoverer's and the relay's settings, for
	// the durable idle run, which runs both beside its worker as `delayq
	// serve` does. Their lock keys are the sandbox's, their callbacks none
	// and their Logger Env's. Zero fields take the recovery package's
	// defaults.
	Recovery recovery.Config
	Relay    recovery.RelayConfig
	// NoHistory turns the job history off for the run's topic (ledger
	// Options.NoHistory), to compare a drain with history on and off
	// (docs/design.md §4.18). Default off: history on, as in production.
	NoHistory bool
	// Trace runs the scenario with tracing on (docs/design.md §4.21):
	// every job enqueued in a span, its trace kept (queue.Config.Trace),
	// and each run in a span of the SDK's, exported in batches to an
	// exporter that drops them, to measure what tracing costs. Default
	// off, as in production.
	Trace bool
	// Pool runs the scenario's topic alone in a shared pool of handlers of
	// its concurrency (queue.WorkerConfig.Pools, docs/design.md §4.22), to
	// measure what a pool costs: its topics claim within its free slots,
	// without a prefetch. Default off.
	Pool bool
	// Priorities spreads the loaded jobs over every priority, 0 to
	// queue.MaxPriority in turn (docs/design.md §4.23), to measure what
	// claiming by priority costs against jobs of priority 0 alone.
	// Default off.
	Priorities bool
	// OrderingKeys gives the loaded jobs this many ordering keys in turn
	// (docs/design.md §4.24), to measure per-key ordering against the same
	// jobs without keys. Default 0: none.
	OrderingKeys int
	// Partitions spreads the run's topic over this many partitions
	// (docs/design.md §7.1), to compare a partitioned topic's costs with
	// one of a single partition, and on a Redis Cluster to spread it over
	// the masters. Default 1.
	Partitions int
	// Shards are the databases of the ledger's further shards (DB is shard
	// 0), each best on an SQL server of its own, so that each one's
	// counters are its shard's (docs/design.md §7.1, "Ledger shards"):
	// the run's rows go to their partitions' shards, and Costs.SQLShards
	// reports each one's commits and rows. The enqueue, drain and lateness
	// scenarios only. Default none: one shard.
	Shards []*gorm.DB
	// ShardsConfigured says Shards are the configuration's (sql.shards),
	// not asked for by the run: a scenario that runs on one shard then
	// runs on DB alone, with a note, instead of failing.
	ShardsConfigured bool
}

// Options configure one run. Zero fields take the scenario's defaults
// (see Scenarios).
type Options struct {
	Env Env
	// Jobs is how many jobs (recovery: ledger rows) the run uses. For http
	// it caps the requests sent.
	Jobs int
	// Concurrency is the number of producer goroutines (enqueue), of
	// handlers (drain, lateness) or of client connections (http).
	Concurrency int
	// Batch is how many jobs one enqueue call carries: 1 calls Enqueue,
	// more call EnqueueBatch (enqueue; lateness with a Delay).
	Batch int
	// ClaimBatch is the most jobs one claim of the worker takes.
	// Default 100 (the worker's default).
	ClaimBatch int
	// ClaimAhead is how long before its due time the worker claims a job
	// (queue.TopicConfig.ClaimAhead). Default 0: the worker's default;
	// negative: none.
	ClaimAhead time.Duration
	// HandlerTime is how long each drain handler works (sleeps) before it
	// succeeds; default 0: a no-op. At most 10s.
	HandlerTime time.Duration
	// Window spreads the jobs' due times uniformly over this long, and
	// Lead is how far ahead of now the window starts (lateness).
	Window, Lead time.Duration
	// Delay, if set, makes each job due Delay after its own enqueue
	// instead (lateness): one goroutine enqueues them as fast as it goes,
	// Batch per call, so they fall due at the enqueue rate. Window and Lead
	// are then unused.
	Delay time.Duration
	// Duration is how long the load runs (http) or the worker is watched
	// (idle).
	Duration time.Duration
	// KeepEpoch keeps the topic's epoch marker when Redis "loses" the jobs
	// (recovery): the run then only restores stale rows, without the
	// data-loss check a real loss of Redis data triggers.
	KeepEpoch bool
	// Durable makes the run's topic durable (enqueue, drain, lateness,
	// http, idle; horizon always is): queue.Config.TopicDurability with
	// the sandbox's ledger as its Store, so every enqueue commits its jobs
	// to SQL before it returns (docs/design.md §4.11). The idle run then
	// also runs a relay and a recoverer (Env.Relay, Env.Recovery).
	Durable bool
	// HTTPTarget makes the handler of a drain or lateness run an HTTP
	// target (jobs/httptarget, with a secret) on a receiver served in
	// process on a loopback port, answering 200 at once; the receiver
	// counts the deliveries and their lateness. The same run with a no-op
	// handler runs right before and after it (Result.NoopBaseline).
	HTTPTarget bool
	// Horizon is the durable topics' horizon (queue.Config.Horizon) for
	// the run; 0 keeps Env.Queue's. The horizon scenario defaults to 1h.
	Horizon time.Duration
	// CompareJobs is how many jobs the horizon scenario enqueues to a
	// redis topic to compare Redis memory with (default Jobs; fewer are
	// extrapolated to Jobs, and the result says so).
	CompareJobs int
	// HistoryRows is how many history rows past their retention the
	// retention scenario writes, then deletes while a drain runs.
	HistoryRows int
	// Purge shapes the retention scenario's purge (batch, duty); zero
	// fields take ledger.PurgeOptions' defaults, as the recoverer's do.
	Purge ledger.PurgeOptions
	// Rate paces the enqueue scenario's producers to this many jobs per
	// second in all (job i is sent no earlier than i/Rate after the
	// start), so that two runs compare their costs per job at the same
	// total rate; it is a ceiling, not a promise. Default 0: as fast as
	// they go.
	Rate float64
	// Stall ends the wait for handlers when none has run a new job for this
	// long; the jobs not handled by then count as missing. Default 20s.
	Stall time.Duration
	// BaselineFor is how long each round-trip baseline (PING, empty
	// EVALSHA on one connection, and from Concurrency goroutines) runs,
	// before and again after the measured phase of enqueue and http.
	// Default 1s.
	BaselineFor time.Duration
	// Progress shows the run's progress; nil shows nothing.
	Progress Progress
}

// withDefaults fills in the zero fields from def and checks the result.
func (o Options) withDefaults(sc Scenario) (Options, error) {
	scenario, def := sc.Name, sc.Defaults
	pickInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	pickDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	pickInt(&o.Jobs, def.Jobs)
	pickInt(&o.Concurrency, def.Concurrency)
	pickInt(&o.Batch, def.Batch)
	pickInt(&o.ClaimBatch, def.ClaimBatch)
	pickInt(&o.ClaimBatch, 100)
	pickDur(&o.Window, def.Window)
	pickDur(&o.Lead, def.Lead)
	pickDur(&o.Duration, def.Duration)
	pickDur(&o.Horizon, def.Horizon)
	pickInt(&o.CompareJobs, def.CompareJobs)
	pickInt(&o.CompareJobs, o.Jobs)
	pickInt(&o.HistoryRows, def.HistoryRows)
	o.Durable = o.Durable || def.Durable
	pickDur(&o.Stall, 20*time.Second)
	pickDur(&o.BaselineFor, time.Second)
	bad := func(format string, a ...any) (Options, error) {
		return o, fmt.Errorf("%w: %s: %s", ErrOptions, scenario, fmt.Sprintf(format, a...))
	}
	// The bench's worker runs with the default lease.
	if err := queue.ValidateClaimAhead(o.ClaimAhead, queue.DefaultLease); err != nil {
		return bad("%v (negative: none)", err)
	}
	switch {
	case o.HandlerTime < 0 || o.HandlerTime > 10*time.Second:
		return bad("handler time %s: want 0 to 10s", o.HandlerTime)
	case o.HandlerTime > 0 && o.HTTPTarget:
		return bad("handler time with an HTTP target: the target's receiver answers at once")
	case o.Env.Redis == nil || o.Env.DB == nil:
		return bad("Env.Redis and Env.DB are required")
	case o.Jobs < 1:
		return bad("jobs %d: must be positive", o.Jobs)
	case o.Concurrency < 1:
		return bad("concurrency %d: must be positive", o.Concurrency)
	case o.Batch < 1 || o.Batch > 1000:
		return bad("batch %d: want 1-1000", o.Batch)
	case o.ClaimBatch < 1:
		return bad("claim batch %d: must be positive", o.ClaimBatch)
	case o.Window < 0 || o.Lead < 0 || o.Delay < 0 || o.Duration < 0 || o.Stall < 0 || o.BaselineFor < 0:
		return bad("durations must not be negative")
	case o.Durable && !sc.DurableOK:
		return bad("durable: not a scenario with a durable variant (enqueue, drain, lateness, http, idle, horizon)")
	case o.HTTPTarget && !sc.TargetOK:
		return bad("target: not a scenario with an HTTP-target variant (drain, lateness)")
	case o.HTTPTarget && o.Durable:
		return bad("target and durable together: measure one at a time")
	case o.Horizon != 0 && o.Horizon < time.Second:
		return bad("horizon %s: want at least 1s", o.Horizon)
	case o.Rate < 0 || math.IsNaN(o.Rate) || math.IsInf(o.Rate, 0):
		return bad("rate %v: want jobs per second, or 0 for as fast as they go", o.Rate)
	case o.Rate > 0 && scenario != "enqueue":
		return bad("rate: only the enqueue scenario is paced")
	case o.HistoryRows < 0:
		return bad("history rows %d: must not be negative", o.HistoryRows)
	case o.Purge.Batch < 0 || o.Purge.Batch > 10_000:
		return bad("purge batch %d: want 1-10000", o.Purge.Batch)
	case o.Purge.Duty < 0 || o.Purge.Duty > 1:
		return bad("purge duty %v: want a share of the time above 0, at most 1", o.Purge.Duty)
	case o.CompareJobs < 1 || o.CompareJobs > o.Jobs:
		return bad("compare jobs %d: want 1-%d (the jobs)", o.CompareJobs, o.Jobs)
	}
	if o.Env.Logger == nil {
		l := logrus.New()
		l.SetOutput(discard{})
		o.Env.Logger = l
	}
	return o, nil
}

// discard is an io.Writer that drops everything.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// topicConfig is the worker's topic configuration for a run with
// concurrency handlers.
func (o Options) topicConfig(concurrency int) queue.TopicConfig {
	return queue.TopicConfig{Concurrency: concurrency, BatchSize: o.ClaimBatch, ClaimAhead: o.ClaimAhead}
}

package queue

import (
	"go.opentelemetry.io/otel/trace"

	"context"
	"fmt"
	"os"
	"time"

	"github.com/sirupsen/logrus"
)

// WorkerConfig configures an engine's worker (engine.Config.Worker). The
// zero value of each field means the
// default written next to it.
type WorkerConfig struct {
	// ID names this worker in the ledger and in logs. Default "host:pid".
	ID string
	// Defaults for every topic; a topic's own TopicConfig overrides them
	// field by field.
	Topic TopicConfig
	// Pools give several topics one shared pool of handlers, split by
	// weight while all have due work (Pool). Default none: each topic
	// has its own Concurrency.
	Pools []Pool
	// ShutdownTimeout is how long shutdown waits for running handlers before
	// cancelling their contexts. Default 30s.
	ShutdownTimeout time.Duration
	// CompleteEvery and CompleteBatch: the completer flushes finished jobs
	// (ledger delete, then Redis ack) every CompleteEvery or every
	// CompleteBatch jobs, whichever comes first. Defaults 2ms and 500.
	CompleteEvery time.Duration
	CompleteBatch int
	// MaxIdle is the longest a fetcher sleeps without claiming: the safety
	// net if a wake message is lost. Default 1s.
	MaxIdle time.Duration
	// ErrorBackoff bounds the pause after a failed Redis or ledger call,
	// which doubles from ErrorBackoffMin up to ErrorBackoffMax. Meanwhile
	// the store that failed is pinged every ErrorBackoffMin (the ledger if
	// it can be pinged), and the pause ends as soon as it answers after an
	// outage (docs/design.md §4.5). Defaults
	// 50ms and 5s.
	ErrorBackoffMin, ErrorBackoffMax time.Duration
	// KeyWait is how long a claimed job of an ordering key waits before it
	// is claimed again when the ledger says another job of its key is in
	// flight or retrying, which happens only after Redis lost the key's
	// state (docs/design.md §4.24). Default 1s.
	KeyWait time.Duration
	// LedgerHold is how long the worker keeps the jobs it holds (queued
	// for a handler or running) while its ledger does not answer: their
	// leases are renewed in Redis alone, so that a short SQL outage makes
	// nothing run again. Past it, it lets them go: their Redis leases are
	// no longer renewed, a running handler's context ends with its lease
	// (ErrLeaseExpired) and its outcome is dropped, so that a worker that
	// reaches the ledger takes the job over; this is for a process cut
	// off from SQL alone, such as one whose Galera node died. Jobs that
	// ended for good (completed, dead) whose outcomes wait for the ledger
	// keep their leases until settled; a failed job waiting to be marked
	// for retry is let go too (it runs again either way). It lets go only
	// while another live worker's registry entry says its ledger answers
	// (WorkerInfo.LedgerOK): with SQL down for everyone it holds on.
	// Default 1m.
	LedgerHold time.Duration
	// OnDead, if set, is called for each job that dies, with its last error.
	OnDead func(ctx context.Context, job *Job, err error)
	// OnRedisReconnect, if set, is called each time the worker's link to
	// Redis came back after a disconnect (its wake channels were
	// re-subscribed; the first subscription does not count), with a context
	// that ends at shutdown. Redis may have lost data meanwhile (a restart
	// without persistence): the app checks the topics' epoch markers here
	// and runs recovery at once if one is gone (recovery's
	// Recoverer.RedisReconnected does both). Calls never overlap;
	// reconnects during a call lead to one more call. Default none.
	OnRedisReconnect func(ctx context.Context)
	// Observer, if set, is told about claims, handler runs, outcomes and
	// heartbeats, for metrics (see Observer). Default none.
	Observer Observer
	// TracerProvider, if set, traces every run (docs/design.md §4.21): a
	// span "delayq.run <topic>" around the handler, the child of the span
	// the job was enqueued in (Config.Trace), with the job's topic, id,
	// attempt and lateness and events for its claim and settlement; the
	// handler's context carries it (an HTTP target forwards it as
	// traceparent). Default none: no span, no cost.
	TracerProvider trace.TracerProvider
	// Logger receives the worker's logs. Default logrus.StandardLogger().
	Logger logrus.FieldLogger
	// Version is the program's version, shown in the workers' registry
	// (WorkerInfo). Default "".
	Version string
	// RegistryEvery is how often the worker writes its registry entry
	// (WorkerInfo: host, pid, topics, in-flight jobs), idle or not; a
	// process whose entry is older than 1.5 × this shows as gone.
	// Default DefaultRegistryEvery.
	RegistryEvery time.Duration
}

// TopicConfig is the per-topic part of the worker configuration.
type TopicConfig struct {
	// Concurrency is how many handlers of the topic run at once, at most
	// MaxConcurrency. Default 10.
	Concurrency int
	// BatchSize is the most jobs one claim takes (never more than the free
	// handler slots, plus Prefetch). Default 100.
	BatchSize int
	// Prefetch is the most jobs beyond its free handler slots the fetcher
	// may claim while the topic has a backlog (its last claim left due
	// jobs behind) and its handlers are quick (their recent average run
	// under 10ms, none running longer): they are recorded in the ledger
	// together with the others and wait, their leases renewed, for a slot.
	// Within it the fetcher holds no more than the handlers start in about
	// 10ms (Concurrency × 10ms / their average run), so a prefetched job
	// never waits for a slot much longer than a ledger commit. A commit
	// waits for the disk, so more jobs per ledger commit is what lets a
	// worker keep up with a backlog (docs/design.md §4.3). Never on a
	// rate-limited topic, whose claims pace its starts. Default
	// 8 × BatchSize (800; at most MaxConcurrency): as many as the eight
	// batches being recorded at once (RecordPipeline) hold; -1: none,
	// claims follow the free slots alone.
	Prefetch int
	// ClaimAhead is how long before its due time a job may be claimed and
	// recorded in the ledger; its handler still starts at its due time,
	// never before. The ledger commit that must precede every handler
	// (a disk flush, a few ms, longer in its tail) then happens before the
	// due time instead of after it, so jobs start on time rather than one
	// commit late. From its claim on, the job is in flight for Cancel and
	// Reschedule (ErrInFlight), as a prefetched job is, and a worker that
	// dies holding it delays it by one lease. Default DefaultClaimAhead;
	// negative: none, jobs are claimed once due. At most a quarter of the
	// lease and MaxClaimAhead. Never on a rate-limited topic, whose claims
	// pace its starts.
	ClaimAhead time.Duration
	// Lease is how long a claim holds a job before another worker may take
	// it over; the heartbeat renews it from the job's record until its
	// outcome is settled. Default 30s.
	Lease time.Duration
	// Heartbeat is how often running jobs' leases are renewed. Default
	// DefaultHeartbeat(Lease).
	Heartbeat time.Duration
	// Timeout, if set, bounds one handler run, heartbeats or not. Default
	// none.
	Timeout time.Duration
	// MaxAttempts, if set, lowers the attempts of the topic's jobs below
	// what each job was enqueued with. Default: the job's own.
	MaxAttempts int
	// Backoff spaces retries.
	Backoff Backoff
	// RateLimit, if set, caps the topic's handler starts per second across
	// every worker of the cluster: a token bucket in Redis that the claim
	// script spends (docs/design.md §4.16). Every worker of a topic must be
	// configured with the same limit. Default 0: none.
	RateLimit float64
	// RateBurst is the rate limit's bucket size: the most starts at once
	// after an idle spell. Default DefaultRateBurst(RateLimit), a tenth of
	// a second's starts.
	RateBurst int
	// RateStartLag, on a rate-limited topic, is how long after its claim
	// (on Redis's clock) a batch's handlers start at the earliest. The
	// ledger write between claim and start takes a varying time, and
	// batches whose write was quick would otherwise start together with
	// slower ones claimed before them, bunching the starts beyond the
	// claims' pacing; held to claim + lag, the starts keep that pacing
	// while writes take less than the lag. Default 100ms; negative turns
	// it off (starts follow the writes, windows of starts may exceed
	// rate + burst by rate × the writes' spread). Ignored without a
	// RateLimit.
	RateStartLag time.Duration
	// OldestEvery: while jobs of raised priority (NewJob.Priority) wait,
	// one due job in this many claimed from the topic is the one due
	// longest, whatever its priority, so that no job waits forever
	// (docs/design.md §4.23). Default DefaultOldestEvery (10: 10% of the
	// claims); 1 claims by due time alone, priorities ignored; at most
	// MaxOldestEvery.
	OldestEvery int
}

// DefaultRateStartLag is TopicConfig.RateStartLag when it is 0: well above
// a ledger write on a healthy database (a few ms), small next to the
// waits a binding rate limit causes.
const DefaultRateStartLag = 100 * time.Millisecond

// DefaultLease is TopicConfig.Lease when it is 0.
const DefaultLease = 30 * time.Second

// DefaultClaimAhead is TopicConfig.ClaimAhead when it is 0: above the
// ledger commits of a healthy database under load (a few ms, the tail 10-20
// ms on a shared disk; docs/benchmarks.md), short next to what an operator
// could cancel or reschedule by hand.
const DefaultClaimAhead = 20 * time.Millisecond

// MaxClaimAhead bounds TopicConfig.ClaimAhead: a job claimed further ahead
// is out of reach of Cancel and Reschedule for longer than any commit
// needs.
const MaxClaimAhead = time.Second

// RecordPipeline is how many claimed batches of one topic a worker may be
// recording in the ledger at once: it claims the next batch while earlier
// ones commit, since a durable commit takes longer than a claim.
const RecordPipeline = 8

// DefaultPrefetch is TopicConfig.Prefetch when it is 0, for a topic
// claiming batchSize jobs at a time: what RecordPipeline full batches in
// the ledger at once hold. A drain of 50,000 empty jobs at 50 handlers
// went from 8-9k jobs/s with 25 to 17-20k with 800 (one commit in
// flight), the ledger's commits from 27 to 2.7 per 1,000 jobs; 1,600 did
// no better (docs/benchmarks.md). The time bound of TopicConfig.Prefetch
// keeps it from holding slow handlers' jobs.
func DefaultPrefetch(batchSize int) int {
	return min(RecordPipeline*batchSize, MaxConcurrency)
}

// ValidateClaimAhead checks a claim-ahead (TopicConfig.ClaimAhead; 0 is
// DefaultClaimAhead, negative none) against the lease of its topic: at most
// MaxClaimAhead and a quarter of the lease, so that the heartbeat renews a
// job claimed ahead long before its lease could run out.
func ValidateClaimAhead(ahead, lease time.Duration) error {
	if ahead == 0 {
		ahead = DefaultClaimAhead
	}
	if ahead > MaxClaimAhead || ahead > lease/4 {
		return fmt.Errorf("claim ahead %s: want at most %s and a quarter of the lease (%s)", ahead, MaxClaimAhead, lease)
	}
	return nil
}

// DefaultHeartbeat is the heartbeat of a topic that sets none: a third of
// its lease, so a lease outlives two missed beats.
func DefaultHeartbeat(lease time.Duration) time.Duration { return lease / 3 }

// MaxConcurrency bounds a topic's handlers per worker: the worker holds a
// slot and a goroutine for each, so a typo of a few zeros must be an error
// at start, not gigabytes allocated. Far above what one process uses (a
// handler waiting on I/O needs a slot the whole time).
const MaxConcurrency = 10_000

// Resolve is the configuration a worker runs a topic with: c's zero fields
// taken from def (the worker's defaults for every topic), then from the
// defaults written next to each field, and the result checked.
func (c TopicConfig) Resolve(def TopicConfig) (TopicConfig, error) {
	c = c.merged(def)
	if err := c.validate(); err != nil {
		return c, err
	}
	return c, nil
}

func (c TopicConfig) merged(def TopicConfig) TopicConfig {
	pick := func(v, d time.Duration) time.Duration {
		if v == 0 {
			return d
		}
		return v
	}
	pickInt := func(v, d int) int {
		if v == 0 {
			return d
		}
		return v
	}
	c.Concurrency = pickInt(pickInt(c.Concurrency, def.Concurrency), 10)
	c.BatchSize = pickInt(pickInt(c.BatchSize, def.BatchSize), 100)
	c.Prefetch = pickInt(pickInt(c.Prefetch, def.Prefetch), DefaultPrefetch(c.BatchSize))
	c.Lease = pick(pick(c.Lease, def.Lease), DefaultLease)
	c.ClaimAhead = pick(pick(c.ClaimAhead, def.ClaimAhead), DefaultClaimAhead)
	c.Heartbeat = pick(pick(c.Heartbeat, def.Heartbeat), DefaultHeartbeat(c.Lease))
	c.Timeout = pick(c.Timeout, def.Timeout)
	c.MaxAttempts = pickInt(c.MaxAttempts, def.MaxAttempts)
	if c.Backoff == (Backoff{}) {
		c.Backoff = def.Backoff
	}
	c.Backoff = c.Backoff.withDefaults()
	if c.RateLimit == 0 {
		c.RateLimit = def.RateLimit
	}
	c.RateBurst = pickInt(c.RateBurst, def.RateBurst)
	if c.RateLimit > 0 && c.RateBurst == 0 {
		c.RateBurst = DefaultRateBurst(c.RateLimit)
	}
	c.RateStartLag = pick(pick(c.RateStartLag, def.RateStartLag), DefaultRateStartLag)
	c.OldestEvery = pickInt(pickInt(c.OldestEvery, def.OldestEvery), DefaultOldestEvery)
	return c
}

func (c TopicConfig) validate() error {
	if err := ValidateClaimAhead(c.ClaimAhead, c.Lease); err != nil {
		return err
	}
	switch {
	case c.Concurrency < 1 || c.Concurrency > MaxConcurrency:
		return fmt.Errorf("concurrency %d: want 1-%d", c.Concurrency, MaxConcurrency)
	case c.BatchSize < 1:
		return fmt.Errorf("batch size %d: must be positive", c.BatchSize)
	case c.Prefetch < -1 || c.Prefetch > MaxConcurrency:
		return fmt.Errorf("prefetch %d: want -1 (none) to %d", c.Prefetch, MaxConcurrency)
	case c.Lease < 100*time.Millisecond:
		return fmt.Errorf("lease %s: must be at least 100ms", c.Lease)
	case c.Heartbeat <= 0 || c.Heartbeat >= c.Lease:
		return fmt.Errorf("heartbeat %s: must be positive and shorter than the lease %s", c.Heartbeat, c.Lease)
	case c.Timeout < 0:
		return fmt.Errorf("timeout %s: must not be negative", c.Timeout)
	case c.MaxAttempts < 0 || c.MaxAttempts > MaxAttempts:
		return fmt.Errorf("max attempts %d: want 0-%d", c.MaxAttempts, MaxAttempts)
	case c.OldestEvery < 1 || c.OldestEvery > MaxOldestEvery:
		return fmt.Errorf("oldest every %d: want 1-%d", c.OldestEvery, MaxOldestEvery)
	}
	return RateLimit{PerSecond: c.RateLimit, Burst: c.RateBurst}.Validate()
}

// DefaultLedgerHold is WorkerConfig.LedgerHold when it is 0.
const DefaultLedgerHold = time.Minute

// WithDefaults is the configuration a worker runs with: every zero field
// set to the default written next to it, or the error of a field out of
// range.
func (c WorkerConfig) WithDefaults() (WorkerConfig, error) {
	if c.ID == "" {
		host, _ := os.Hostname()
		c.ID = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	if c.CompleteEvery == 0 {
		c.CompleteEvery = 2 * time.Millisecond
	}
	if c.CompleteBatch == 0 {
		c.CompleteBatch = 500
	}
	if c.MaxIdle == 0 {
		c.MaxIdle = time.Second
	}
	if c.KeyWait == 0 {
		c.KeyWait = time.Second
	}
	if c.ErrorBackoffMin == 0 {
		c.ErrorBackoffMin = 50 * time.Millisecond
	}
	if c.ErrorBackoffMax == 0 {
		c.ErrorBackoffMax = 5 * time.Second
	}
	if c.LedgerHold == 0 {
		c.LedgerHold = DefaultLedgerHold
	}
	if c.LedgerHold < 0 {
		return c, fmt.Errorf("queue: worker: LedgerHold %s: must not be negative", c.LedgerHold)
	}
	if c.Logger == nil {
		c.Logger = logrus.StandardLogger()
	}
	if c.Observer == nil {
		c.Observer = NopObserver{}
	}
	if c.RegistryEvery == 0 {
		c.RegistryEvery = DefaultRegistryEvery
	}
	if err := ValidatePools(c.Pools); err != nil {
		return c, err
	}
	if c.RegistryEvery < 10*time.Millisecond {
		return c, fmt.Errorf("queue: worker: RegistryEvery %s: want at least 10ms", c.RegistryEvery)
	}
	if c.ShutdownTimeout < 0 || c.CompleteEvery < 0 || c.CompleteBatch < 1 || c.MaxIdle <= 0 ||
		c.ErrorBackoffMin <= 0 || c.ErrorBackoffMax < c.ErrorBackoffMin || c.KeyWait < 0 {
		return c, fmt.Errorf("queue: worker: invalid timing config %+v", c)
	}
	return c, nil
}

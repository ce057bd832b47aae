package recovery

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/sirupsen/logrus"
)

// Config configures a Recoverer. The zero value of each field means the
// default written next to it.
type Config struct {
	// Schedule is the cron spec of the regular runs (robfig/cron/v3): five
	// fields, or six with a leading seconds field, or a descriptor such as
	// "@every 30s" or "@hourly". Default "@every 30s".
	Schedule string
	// Grace is how long past its lease_until a ledger row must be before the
	// recoverer looks at it (a stale row). It must be greater than
	// HeartbeatInterval, so a worker that is one heartbeat late is not taken
	// for dead; New refuses it otherwise. Default 30s.
	Grace time.Duration
	// HeartbeatInterval is the longest heartbeat of the workers
	// (queue.TopicConfig.Heartbeat): how often a live worker moves its rows'
	// lease_until on. Only Grace is checked against it. Default 10s (the
	// queue's default: a 30s lease / 3).
	HeartbeatInterval time.Duration
	// PageSize is how many ledger rows one read fetches. A run holds two
	// pages at a time (one read ahead), so its memory is about 2 × PageSize
	// × the largest payload. Default 1,000.
	PageSize int
	// Chunk is how many rows one restore script call carries; a page's
	// calls go to Redis in one pipeline. Default 500.
	Chunk int
	// DryRun makes every run report what it would re-enqueue while changing
	// nothing: no job restored, no epoch marker written. Default off.
	DryRun bool
	// LockKey is the Redis key of the lock that lets one recoverer at a time
	// run. Default "<queue namespace>:recovery:lock".
	LockKey string
	// LockTTL is how long the lock lives unless refreshed; its holder
	// refreshes it every LockTTL/3 while it runs, so a recoverer that died
	// holding it blocks the others for at most LockTTL. Default 1m.
	LockTTL time.Duration
	// RunTimeout bounds one run. Default 5m.
	RunTimeout time.Duration
	// KeepReports is how many of the latest reports Reports keeps.
	// Default 100.
	KeepReports int
	// SkipRunOnStart makes Run wait for the first scheduled tick instead of
	// running at once. Default off: Run starts with a run.
	SkipRunOnStart bool
	// TriggerRetry and TriggerRetries: a run asked for by Trigger (a Redis
	// reconnect, an operator) that finds the lock held by another recoverer
	// is tried again after TriggerRetry, at most TriggerRetries times, so a
	// loss noticed mid-way through another process's run is not left to the
	// next tick. Defaults 1s and 10.
	TriggerRetry   time.Duration
	TriggerRetries int
	// SampleSize is how many re-enqueued jobs (topic/id) a report lists by
	// name. Default 20.
	SampleSize int
	// OnReport, if set, is called with every report (after it is logged and
	// kept), e.g. to export metrics. Default none.
	OnReport func(Report)
	// HistoryRetention is how long the job history's rows are kept
	// (docs/design.md §4.18): each run deletes those that finished longer
	// ago, in short batches (HistoryPurgeBatch, HistoryPurgeDuty). Default
	// 7 days (ledger.DefaultHistoryRetention); negative: kept for ever.
	HistoryRetention time.Duration
	// HistoryPurgeBatch is the most history rows one DELETE of the purge
	// removes, 1 to 10000. Default 500 (ledger.DefaultPurgeBatch).
	HistoryPurgeBatch int
	// HistoryPurgeDuty is the largest share of the time a purge of the
	// history spends deleting, above 0 and at most 1: after each DELETE it
	// rests so long that deleting takes at most this share, leaving the
	// SQL server to the workers. Default 0.05 (ledger.DefaultPurgeDuty).
	HistoryPurgeDuty float64
	// TopicHistoryRetention overrides HistoryRetention per topic (negative:
	// that topic's kept for ever). Default none.
	TopicHistoryRetention map[string]time.Duration
	// Logger receives the recoverer's logs. Default logrus.StandardLogger().
	Logger logrus.FieldLogger
}

// WithDefaults fills in defaults and checks the result; it also returns the
// parsed schedule.
func (c Config) WithDefaults(namespace string) (Config, cron.Schedule, error) {
	if c.Schedule == "" {
		c.Schedule = "@every 30s"
	}
	if c.Grace == 0 {
		c.Grace = 30 * time.Second
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = 10 * time.Second
	}
	if c.PageSize == 0 {
		c.PageSize = 1000
	}
	if c.Chunk == 0 {
		c.Chunk = 500
	}
	if c.LockKey == "" {
		c.LockKey = namespace + ":recovery:lock"
	}
	if c.LockTTL == 0 {
		c.LockTTL = time.Minute
	}
	if c.RunTimeout == 0 {
		c.RunTimeout = 5 * time.Minute
	}
	if c.KeepReports == 0 {
		c.KeepReports = 100
	}
	if c.TriggerRetry == 0 {
		c.TriggerRetry = time.Second
	}
	if c.TriggerRetries == 0 {
		c.TriggerRetries = 10
	}
	if c.SampleSize == 0 {
		c.SampleSize = 20
	}
	if c.Logger == nil {
		c.Logger = logrus.StandardLogger()
	}
	if c.HistoryRetention == 0 {
		c.HistoryRetention = 7 * 24 * time.Hour // ledger.DefaultHistoryRetention
	}
	if c.HistoryPurgeBatch == 0 {
		c.HistoryPurgeBatch = 500 // ledger.DefaultPurgeBatch
	}
	if c.HistoryPurgeDuty == 0 {
		c.HistoryPurgeDuty = 0.05 // ledger.DefaultPurgeDuty
	}
	if c.HistoryPurgeBatch < 1 || c.HistoryPurgeBatch > 10_000 {
		return c, nil, fmt.Errorf("recovery: HistoryPurgeBatch %d: give 1 to 10000 rows", c.HistoryPurgeBatch)
	}
	if !(c.HistoryPurgeDuty > 0 && c.HistoryPurgeDuty <= 1) {
		return c, nil, fmt.Errorf("recovery: HistoryPurgeDuty %v: give a share of the time above 0, at most 1", c.HistoryPurgeDuty)
	}
	for t, d := range c.TopicHistoryRetention {
		if d == 0 {
			return c, nil, fmt.Errorf("recovery: TopicHistoryRetention[%q] is 0: give a duration, or a negative one to keep for ever", t)
		}
	}
	sched, err := parseSchedule(c.Schedule)
	if err != nil {
		return c, nil, fmt.Errorf("recovery: Schedule %q: %w", c.Schedule, err)
	}
	switch {
	case c.HeartbeatInterval < 0:
		return c, nil, fmt.Errorf("recovery: HeartbeatInterval %s: must be positive", c.HeartbeatInterval)
	case c.Grace <= c.HeartbeatInterval:
		return c, nil, fmt.Errorf("recovery: Grace %s must be greater than the workers' HeartbeatInterval %s: "+
			"a worker one heartbeat late would be taken for dead", c.Grace, c.HeartbeatInterval)
	case c.PageSize < 1:
		return c, nil, fmt.Errorf("recovery: PageSize %d: must be positive", c.PageSize)
	case c.Chunk < 1:
		return c, nil, fmt.Errorf("recovery: Chunk %d: must be positive", c.Chunk)
	case c.LockTTL < 10*time.Millisecond:
		return c, nil, fmt.Errorf("recovery: LockTTL %s: must be at least 10ms", c.LockTTL)
	case c.RunTimeout < 0:
		return c, nil, fmt.Errorf("recovery: RunTimeout %s: must be positive", c.RunTimeout)
	case c.KeepReports < 1:
		return c, nil, fmt.Errorf("recovery: KeepReports %d: must be positive", c.KeepReports)
	case c.TriggerRetry < 0 || c.TriggerRetries < 0:
		return c, nil, fmt.Errorf("recovery: TriggerRetry %s / TriggerRetries %d: must not be negative", c.TriggerRetry, c.TriggerRetries)
	case c.SampleSize < 0:
		return c, nil, fmt.Errorf("recovery: SampleSize %d: must not be negative", c.SampleSize)
	}
	return c, sched, nil
}

// parseSchedule parses a cron spec of five fields, or six with a leading
// seconds field, or an @ descriptor.
func parseSchedule(spec string) (cron.Schedule, error) {
	p := cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
	return p.Parse(spec)
}

package recovery

import (
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
)

// RelayConfig configures a Relay. The zero value of each field means the
// default written next to it.
type RelayConfig struct {
	// Every is how often the relay ticks: it reads its mark and its inbox
	// in Redis (one round trip), and passes over SQL only when something
	// woke it (see Relay). Default 200ms.
	Every time.Duration
	// Grace is how long past its due time a scheduled job may be missing
	// from Redis before the relay pushes it: its enqueuer pushes it right
	// after the commit, and a push that takes longer than this races the
	// relay (harmlessly: one of the two creates it). Every + Grace bound
	// how late a job whose push was lost runs. Default 300ms.
	Grace time.Duration
	// PageSize is how many rows one read fetches. Default 1,000.
	PageSize int
	// LockKey is the key of the lock that lets one relay at a time pass.
	// Default "<queue namespace>:relay:lock".
	LockKey string
	// LockTTL is how long the lock outlives a relay that died holding it:
	// how long the others wait before one takes over. Default 3s.
	LockTTL time.Duration
	// CountEvery is how often Counts is refreshed (one GROUP BY over the
	// waiting rows' index). Default 30s.
	CountEvery time.Duration
	// FullEvery is how often a pass checks every waiting row due within
	// the horizon, overdue ones included, as after a Redis data loss: the
	// backstop for what the windows of the load and the check cannot see
	// (a row committed long after it was inserted, whose enqueuer died; a
	// job a failover dropped after its check). A process that takes the
	// relay over, or whose pass failed (Redis or SQL unreachable), starts
	// with one. Default 5m.
	FullEvery time.Duration
	// CheckEvery is the backstop of the wakes: a pass (load and check, as
	// each pass does) at least this often even when nothing woke the
	// relay. It bounds how late a lost push that no note announced (the
	// note's write failed while the relay's Redis was fine, or a commit
	// that outlasted its note) is relayed, and how late a row the next-load
	// time missed is loaded. Default 10s, or FullEvery if that is shorter.
	CheckEvery time.Duration
	// IdleEvery is how long an idle relay (no note in its inbox, nothing
	// to load or check sooner, no failure to make up for) waits between
	// two ticks, blocked on the bell that every enqueuer's note rings
	// (dataplane.Client.WaitRelayBell), instead of ticking every Every: a note
	// wakes it at once, so a lost push is still relayed within Every +
	// Grace of its due time; what waits for IdleEvery is noticing that
	// Redis lost the relay's mark without a restart (a FLUSHALL; a
	// restart fails the blocked read and wakes it). Whole seconds, 1s to
	// CheckEvery. Default 1s.
	IdleEvery time.Duration
	// HandOverAfter is how long the passes of the process that holds the
	// relay lock may all fail before it releases the lock and lets
	// another process take it (waiting LockTTL before it tries again
	// itself): its own SQL may be what is unreachable, a Galera node that
	// died under it, while the other processes' SQL answers. When every
	// process fails, the lock goes round and nothing is lost: each new
	// holder starts with a full pass. Each SQL step of a pass is bounded
	// by twice this (at least 1s), so that a server gone silent fails
	// the passes too. Default 5s; at least Every.
	HandOverAfter time.Duration
	// OnPass, if set, is called with the report of every pass that did
	// something or failed, e.g. to export metrics. Default none.
	OnPass func(RelayReport)
	// Logger receives the relay's logs. Default logrus.StandardLogger().
	Logger logrus.FieldLogger
}

// WithDefaults is the configuration a relay runs with in the Redis
// namespace (its lock is named in it): every zero field set to its
// default, or the error of a field out of range.
func (c RelayConfig) WithDefaults(namespace string) (RelayConfig, error) {
	if c.Every == 0 {
		c.Every = 200 * time.Millisecond
	}
	if c.Grace == 0 {
		c.Grace = 300 * time.Millisecond
	}
	if c.PageSize == 0 {
		c.PageSize = 1000
	}
	if c.LockKey == "" {
		c.LockKey = namespace + ":relay:lock"
	}
	if c.LockTTL == 0 {
		c.LockTTL = 3 * time.Second
	}
	if c.CountEvery == 0 {
		c.CountEvery = 30 * time.Second
	}
	if c.FullEvery == 0 {
		c.FullEvery = 5 * time.Minute
	}
	if c.CheckEvery == 0 {
		c.CheckEvery = min(10*time.Second, c.FullEvery)
	}
	if c.IdleEvery == 0 {
		// 0 when CheckEvery is under a second: then never idle.
		c.IdleEvery = min(time.Second, c.CheckEvery.Truncate(time.Second))
	}
	if c.HandOverAfter == 0 {
		c.HandOverAfter = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = logrus.StandardLogger()
	}
	switch {
	case c.HandOverAfter < c.Every:
		return c, fmt.Errorf("recovery: relay HandOverAfter %s: want at least Every (%s)", c.HandOverAfter, c.Every)
	case c.Every < time.Millisecond || c.Every > time.Minute:
		return c, fmt.Errorf("recovery: relay Every %s: want 1ms to 1m", c.Every)
	case c.Grace < 0:
		return c, fmt.Errorf("recovery: relay Grace %s: must not be negative", c.Grace)
	case c.PageSize < 1 || c.PageSize > 100000:
		return c, fmt.Errorf("recovery: relay PageSize %d: want 1-100000", c.PageSize)
	case c.LockTTL < 3*c.Every:
		return c, fmt.Errorf("recovery: relay LockTTL %s: want at least 3 × Every (%s)", c.LockTTL, c.Every)
	case c.CountEvery < time.Second:
		return c, fmt.Errorf("recovery: relay CountEvery %s: want at least 1s", c.CountEvery)
	case c.FullEvery < c.Every:
		return c, fmt.Errorf("recovery: relay FullEvery %s: want at least Every (%s)", c.FullEvery, c.Every)
	case c.CheckEvery < c.Every || c.CheckEvery > c.FullEvery || c.CheckEvery > MaxRelayCheckEvery:
		return c, fmt.Errorf("recovery: relay CheckEvery %s: want Every (%s) to FullEvery (%s), at most %s", c.CheckEvery, c.Every, c.FullEvery, MaxRelayCheckEvery)
	case c.CheckEvery >= time.Second && (c.IdleEvery < time.Second || c.IdleEvery > c.CheckEvery || c.IdleEvery%time.Second != 0):
		return c, fmt.Errorf("recovery: relay IdleEvery %s: want whole seconds from 1s to CheckEvery (%s)", c.IdleEvery, c.CheckEvery)
	}
	return c, nil
}

// MaxRelayCheckEvery is the longest RelayConfig.CheckEvery: an idle relay
// passes at least this often, so the alert on its last successful pass
// (1 minute at the least, deployments/prometheus/alerts.yml) sees two.
const MaxRelayCheckEvery = 30 * time.Second

// The causes of a relay pass (RelayReport.Cause, RelayTotals.Wakes).
const (
	WakeLead  = "lead"  // this relay took the lock: what the last holder missed
	WakeError = "error" // a tick or a pass failed (Redis or SQL unreachable): a full pass, every tick until one succeeds
	WakeLost  = "lost"  // Redis has no mark (first start, or it lost data): a reload
	WakeFull  = "full"  // FullEvery passed
	WakeNote  = "note"  // an enqueuer's note is due: a push lost, skipped or never made
	WakeLoad  = "load"  // the next waiting row beyond the horizon entered it
	WakeCheck = "check" // CheckEvery passed with no other wake (the backstop)
	// WakeRecheck: an enqueuer's commit failed with an unknown outcome and
	// asked for a full pass (now, and queue.Config.UncertainRecheck later).
	WakeRecheck = "recheck"
	WakeOnce    = "once" // RunOnce
)

// WakeCauses lists the causes, for metrics.
var WakeCauses = []string{WakeLead, WakeError, WakeLost, WakeFull, WakeNote, WakeLoad, WakeCheck, WakeRecheck, WakeOnce}

// RelayReport is what one relay pass did. Per topic, Loaded counts the jobs
// the horizon loader pushed (due beyond the horizon when enqueued), Relayed
// those found missing after falling due (their push after the commit was
// lost: the enqueuer died, Redis was down or lost them), Reloaded those
// pushed by a reload (the mark was missing: first start, or Redis lost
// data).
type RelayReport struct {
	Start    time.Time
	Duration time.Duration
	// Cause is what woke the pass (a Wake* constant).
	Cause string
	// Reload: the whole horizon was read, because Redis had no mark (Lost)
	// or FullEvery had passed.
	Reload   bool
	Lost     bool
	Loaded   map[string]int
	Relayed  map[string]int
	Reloaded map[string]int
	// Gone counts rows acked or cancelled while the pass read them: left
	// alone (restore.lua's tombstones).
	Gone int
	Err  error
}

// Pushed is how many jobs the pass put into Redis.
func (r RelayReport) Pushed() int {
	loaded, relayed, reloaded := r.Counts()
	return loaded + relayed + reloaded
}

// Counts are the jobs the pass put into Redis, summed over the topics of
// Loaded, Relayed and Reloaded.
func (r RelayReport) Counts() (loaded, relayed, reloaded int) {
	return sum(r.Loaded), sum(r.Relayed), sum(r.Reloaded)
}

// RelayTotals are a relay's running totals since it was created: the
// passes it made while it held the lock (a relay that never leads makes
// none), and the start of its last pass, last reload, last failed pass and
// last pass without an error (zero: none yet).
type RelayTotals struct {
	Passes, Failed                        int64
	Loaded, Relayed, Reloaded             int64
	LastPass, LastReload, LastErr, LastOK time.Time
	// Wakes counts the passes by cause (a Wake* constant), failed ones
	// and RunOnce's included; ticks that woke nothing count nowhere.
	Wakes map[string]int64
	// IdleWaits counts the waits on the bell (RelayConfig.IdleEvery),
	// counted as each begins.
	IdleWaits int64
	// HandOvers counts the times this process released the relay lock
	// because its passes kept failing (RelayConfig.HandOverAfter).
	HandOvers int64
}

// sum adds the counts of m.
func sum(m map[string]int) int {
	n := 0
	for _, k := range m {
		n += k
	}
	return n
}

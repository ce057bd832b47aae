package periodic

import (
	"time"

	"github.com/sirupsen/logrus"
)

// Result is the outcome of one claim of a tick, for metrics.
type Result string

// The outcomes of a claim.
const (
	ResultEnqueued  Result = "enqueued"  // this process enqueued the tick's job
	ResultDuplicate Result = "duplicate" // another process (or an earlier run) did
	ResultError     Result = "error"     // the claim failed (after its retries)
)

// Observer hears what the schedules do, for metrics. Its methods must be
// quick and safe for concurrent use.
type Observer interface {
	// Tick is told the outcome of each claim of a tick.
	Tick(schedule string, r Result)
	// NextRun is told each schedule's next tick whenever it changes.
	NextRun(schedule string, next time.Time)
}

// Options tune a Scheduler; the zero value is ready to use.
type Options struct {
	// Observer, if set, hears of every claim and next tick.
	Observer Observer
	// Logger receives the scheduler's logs. Default: none.
	Logger logrus.FieldLogger
	// RetryBase is the first pause before a failed claim is tried again
	// (doubling, for as long as the next tick is not due). Default 100ms.
	RetryBase time.Duration
}

// Info is one schedule as List shows it.
type Info struct {
	Name        string `json:"name"`
	Spec        string `json:"spec"`
	Location    string `json:"location"` // the zone of a spec without CRON_TZ=
	Topic       string `json:"topic"`
	Durability  string `json:"durability"` // redis or durable: where the last tick is kept
	Missed      Missed `json:"missed"`
	MaxAttempts int    `json:"max_attempts"`
	Priority    int    `json:"priority"`
	// NextRun is the next tick, Unix ms.
	NextRun int64 `json:"next_run"`
	// LastTick is the last tick enqueued by any process, Unix ms; 0 if none.
	LastTick int64 `json:"last_tick"`
	// LastJobID is the last tick's job id; "" if none.
	LastJobID string `json:"last_job_id"`
	// Running says this process runs the schedule (Run).
	Running bool `json:"running"`
}

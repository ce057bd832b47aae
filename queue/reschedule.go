package queue

import (
	"errors"
	"strconv"
	"time"
)

// WhenKind says how a When names the new due time.
type WhenKind uint8

// The kinds of When.
const (
	// WhenAt: an absolute due time (Unix ms).
	WhenAt WhenKind = iota + 1
	// WhenIn: a delay from now, on Redis's clock.
	WhenIn
	// WhenBy: a shift, earlier (negative) or later, from the job's current
	// due time.
	WhenBy
)

// When is the new due time of a Reschedule; build one with RescheduleAt,
// RescheduleIn or RescheduleBy.
type When struct {
	Kind WhenKind
	At   int64         // WhenAt: Unix ms
	D    time.Duration // WhenIn: the delay; WhenBy: the shift
}

// RescheduleAt moves a job to the absolute due time at (Unix ms); a time in
// the past means now.
func RescheduleAt(at int64) When { return When{Kind: WhenAt, At: at} }

// RescheduleIn moves a job to d from now, on Redis's clock (never the
// caller's).
func RescheduleIn(d time.Duration) When { return When{Kind: WhenIn, D: d} }

// RescheduleBy moves a job by d from its current due time: later when d is
// positive, earlier when it is negative (a result in the past means now).
func RescheduleBy(d time.Duration) When { return When{Kind: WhenBy, D: d} }

// String renders w for logs.
func (w When) String() string {
	switch w.Kind {
	case WhenAt:
		return "at " + strconv.FormatInt(w.At, 10)
	case WhenIn:
		return "in " + w.D.String()
	case WhenBy:
		return "by " + w.D.String()
	}
	return "invalid"
}

// Rescheduled is what Reschedule did.
type Rescheduled struct {
	// Job is the job as it waits now (RunAt is the new due time).
	Job *Job
	// OldRunAt and RunAt are the due times before and after, Unix ms;
	// RunAt is the accepted time: the job runs at it or after it, never
	// before.
	OldRunAt, RunAt int64
	// State is the state the job waits in: waiting, or retrying when it
	// ran before.
	State State
	// Parked: the job waits behind an earlier job of its ordering key,
	// which runs or waits first (docs/design.md §4.24); it runs at its new
	// time or once its key is free, whichever is later.
	Parked bool
}

// RescheduleResult names the outcome of a Reschedule for metrics and logs:
// ok, in_flight, dead, not_found, invalid or error.
func RescheduleResult(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrInFlight):
		return "in_flight"
	case errors.Is(err, ErrDead):
		return "dead"
	case errors.Is(err, ErrNotFound):
		return "not_found"
	case errors.Is(err, ErrInvalid):
		return "invalid"
	}
	return "error"
}

// RescheduleObserver is an EnqueueObserver that also hears of every
// Reschedule and its result (RescheduleResult). Optional.
type RescheduleObserver interface {
	Rescheduled(topic, result string)
}

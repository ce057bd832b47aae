package queue

import (
	"errors"
)

// TickResult says what became of one tick of a periodic schedule
// (EnqueueTick).
type TickResult struct {
	// Duplicate: the tick was enqueued already, by this or another process
	// (the schedule's last tick is at or after it); nothing was written.
	Duplicate bool
	// LastTick is the schedule's last tick enqueued (Unix ms) before this
	// call, for a duplicate.
	LastTick int64
	// Job is the job's outcome when the tick was claimed: its Duplicate is
	// set if the job id was known already (waiting, in flight or dead).
	Job EnqueueResult
}

// ErrTickDurable is what EnqueueTick and LastTicks return for a durable
// topic given no TickStore: its ticks are claimed in SQL, with the job, in
// one transaction.
var ErrTickDurable = errors.New("the ticks of a durable topic are claimed in SQL: give a TickStore")

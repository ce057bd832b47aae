// Package scheduler runs the periodic schedules of package queue/periodic
// for an engine: each tick of a schedule is claimed with its job in one
// atomic step, in Redis for a redis topic and in SQL for a durable one, so
// that however many processes run a schedule, a tick enqueues one job.
// queue/periodic's package documentation walks through the guarantees
// (docs/design.md §4.15).
package scheduler

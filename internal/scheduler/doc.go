// Package periodic enqueues jobs on cron schedules: every tick of a
// schedule enqueues exactly one job, however many processes run the
// schedule (docs/design.md §4.15).
//
// A Schedule has a robfig/cron spec: five fields, six with a leading
// seconds field ("*/5 * * * * *"), or a descriptor (@hourly, @every 10s),
// optionally prefixed with CRON_TZ=<zone> (or TZ=<zone>). A spec without a
// zone is read in Schedule.Location, default UTC, never the host's zone:
// processes on hosts in different zones must agree on the ticks. @every
// ticks are aligned on the Unix epoch (@every 10s ticks at :00, :10, ...),
// so every process computes the same ticks whenever it started.
//
// # Exactly one job per tick
//
// Each tick's job has the id
//
//	<schedule name>:<tick as Unix milliseconds>
//
// (the name has no colon, so the last colon splits the id) and is due at
// the tick. Every process running the schedule wakes at the tick and
// claims it in the topic's store of truth, with the enqueue in the same
// atomic step: on a Redis topic, a script compares the tick with the last
// one in the topic's ticks hash (dataplane.Client.EnqueueTick); on a durable
// topic, a conditional update of dq_periodic in the transaction that writes
// the job's waiting row (the ledger's enqueueTick). The first claim
// enqueues; any other, at the same time or long after (a process paused,
// slow to start), is a duplicate, even when the tick's job already ran and
// is gone. Ticks at or before the last one are never enqueued again. No
// lock is held, so a process killed at any point changes nothing: the
// others claim the ticks it would have.
//
// # Missed ticks
//
// Ticks that pass while no process runs the schedule (every process down,
// or this one stalled for longer than a tick) are missed. On start, and
// after such a stall, a Scheduler reads the schedule's last tick: with
// Missed "once", if at least one tick after it has passed, it enqueues the
// job of the latest missed tick (due now); with "skip" (the default) it
// enqueues nothing for them. A schedule never enqueued before starts at
// its next tick.
package scheduler

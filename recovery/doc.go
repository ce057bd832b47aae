// Package recovery configures and reports delayq's recoverer and relay
// (docs/design.md, §5 Recovery, §4.11 durable topics), which an
// engine.Engine runs. The recoverer is a cron-driven job that puts back
// into Redis the jobs the SQL ledger holds and Redis has lost: it is the
// last step of a job's way through delayq (the engine enqueues it and its
// worker claims it, package ledger records the claim before the handler
// runs, and the recoverer brings back from the ledger whatever a worker
// crash or a Redis data loss dropped). The Relay serves durable
// topics, whose waiting jobs live in SQL from their enqueue on: it pushes
// into Redis the rows that come within the horizon, and the jobs an
// enqueuer committed but could not push (its note, or the full pass that
// is its backstop), and after a Redis loss it loads the horizon again.
//
// # Run it
//
// Engine.Run runs the recoverer and the relay next to the workers (every
// process may run them: a lock lets one at a time work), configured by
// engine.Config's Recovery (a Config) and Relay (a RelayConfig), unless
// engine.Config.NoRecovery leaves them to other processes:
//
//   - runs are scheduled with robfig/cron (Config.Schedule, default every
//     30 s; one at start);
//   - Engine.Recover runs one now and returns its Report (see the engine's
//     ExampleEngine_Recover, where a job Redis lost comes back);
//     Config.DryRun reports what a run would do and changes nothing;
//   - a Redis that came back without its epoch markers is recovered at
//     once, not at the next tick: the engine's worker tells the recoverer
//     when it reconnects.
//
// Config.Grace must exceed the workers' heartbeat, so a worker one beat late
// is not taken for dead. Reports (Engine.RecoveryReports), Counters and
// RelayTotals feed logs, metrics and the API.
//
// # A run
//
// Each run, under a Redis lock that one process at a time holds:
//
//  1. lists the topics (those of the ledger's rows and the queue's topics
//     set) and checks their epoch markers; a missing marker while the ledger
//     holds rows of the topic that Redis has no trace of means Redis lost
//     data: it is logged at error level, counted, and the topic is recovered
//     in this very run, retrying rows included, not only stale ones;
//  2. pages through the stale ledger rows (lease_until more than a grace
//     period ago) in id order; for each page the restore script (dry run)
//     tells the jobs Redis has no trace of, those rows are read again (a row
//     gone or re-claimed meanwhile belongs to a job that finished: left
//     alone), and the restore script re-creates the rest, checking again
//     atomically, so two recoverers never make two copies; jobs Redis still
//     tracks are left to its own lease expiry;
//  3. writes the epoch markers that were missing;
//  4. yields a Report, logged and kept for the API.
//
// What recovery cannot bring back: a job of a redis topic (the default
// durability) that Redis lost before any worker claimed it has no ledger
// row. Redis's persistence (AOF) guards those, or a durable topic, whose
// jobs have their row from the enqueue; docs/design.md, §6, has the whole
// failure table.
package recovery

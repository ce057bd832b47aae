// Package recovery is delayq's recoverer: a cron-driven job that puts back
// into Redis the jobs the SQL ledger holds and Redis has lost (docs/design.md,
// §5 Recovery).
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
// Recoverer.Run schedules runs with robfig/cron; RunOnce runs one on demand;
// Trigger asks Run for one now; RedisReconnected is the worker's
// queue.WorkerConfig.OnRedisReconnect hook.
package recovery

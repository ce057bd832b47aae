// Package engine is delayq inside a Go service, in one value: the data
// plane on Redis, the SQL ledger, and every background part that a
// configuration needs, started and stopped together.
//
// # Build
//
// New takes a go-redis UniversalClient (single node, Sentinel or Cluster),
// the store (a *ledger.Ledger on MySQL/MariaDB or SQLite, its tables
// created by delayq migrate or Ledger.Migrate) and a Config. The store is
// given once: every operation below uses it. A configuration that cannot
// work is refused here, with an error naming the field:
//
//	store, err := ledger.Open(mysql.Open(dsn), ledger.Options{})
//	eng, err := engine.New(rdb, store, engine.Config{
//		Queue: queue.Config{TopicDurability: map[string]queue.Durability{
//			"order_close": queue.DurabilityDurable,
//		}},
//	})
//
// # Handle and Run
//
// Handle gives a topic its handler and settings (concurrency, lease,
// retries, rate limit); Run starts, until its context ends, the worker of
// the handled topics (claims, each claim recorded in the store before its
// handler runs, heartbeats, settling), the recoverer (lost jobs back into
// Redis), the relay (a durable topic's jobs loaded into Redis as they come
// within the horizon, lost pushes redone) and the periodic schedules; then
// it stops them all gracefully. Config.NoRecovery and Config.NoPeriodic
// leave those parts to other processes. See Example.
//
// # Enqueue
//
// Enqueue and EnqueueBatch schedule jobs; on a durable topic the job is
// committed to the store before the call returns. Transaction runs a
// transaction whose jobs commit with the caller's own rows (an order and
// the job that closes it if unpaid), and EnqueueTx joins a transaction the
// caller already runs. See ExampleEngine_Transaction and
// ExampleEngine_EnqueueTx.
//
// # Operate and inspect
//
// Cancel, Reschedule, Pause and Resume, RequeueDead, RequeueAllDead,
// PurgeDead and DeleteDead change jobs and topics; Find (a job in Redis or, for a durable
// job, only in SQL), Stats, List, Topics and Schedules read them; Recover
// runs recovery now, or a dry run. The examples walk through each of them:
// a pause, a reschedule, a cancel, a dead letter requeued, a dry run.
// Inspector (Engine.Inspector, or NewInspector for a reader without an
// engine, such as a dashboard) lists topics across Redis and the store and
// pages through their jobs by state (ExampleInspector_Jobs).
//
// The parts that Run starts (the worker, the recoverer, the relay, the
// scheduler) are internal to the module: a service configures them through
// Config and reads them through the engine, and never builds them.
package engine

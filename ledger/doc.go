// Package ledger is delayq's SQL ledger: the durable record of every job a
// worker has claimed and not yet finished for good, plus the dead-letter
// archive of jobs that died. It runs on MySQL/MariaDB (production) and
// SQLite (tests, local development) through gorm; the few places where the
// two dialects differ are kept in dialect.go.
//
// This page follows a job from the worker's side of the ledger to the
// recoverer's; docs/design.md in the repository has the tables and the
// whole lifecycle across Redis and SQL.
//
// # Set it up
//
// Open gorm on the database, create the ledger, and bring its tables up to
// date with Migrate, which applies the numbered migrations of
// ledger/migrations the database lacks and records them in
// dq_schema_migrations (an empty database may instead get
// deployments/mysql/schema.sql, the same tables with their versions
// recorded). MigrationStatus says where a database stands, MigrationSQL
// gives the statements for a hand-applied upgrade:
//
//	led, err := ledger.New(db, ledger.Options{}) // dq_ledger, dq_dead_letter, dq_periodic, dq_topic_state, dq_history, dq_shard_mark
//	err = led.Migrate(ctx)
//
// On MySQL, give the DSN interpolateParams=true and READ COMMITTED
// isolation: the ledger is on the hot path of every job. Options.TablePrefix
// lets several deployments share one database.
//
// Then give it to engine.New: the engine's worker, recoverer, relay and
// scheduler all work through it, and every operation of the engine uses it.
//
// # The engine's worker writes it
//
// The worker records every claimed batch before any handler runs (a job
// without a row is one the recoverer could not bring back), extends the
// rows' leases on every heartbeat, and, when handlers finish, deletes the
// rows (done), marks them retrying (waiting in Redis for another attempt:
// the row stays, so a Redis loss during the backoff loses nothing) or
// buries them (dead: archived with the last error, and the row deleted, in
// one transaction). Each of these is one statement per call, however many
// jobs it carries, so the ledger's cost grows with the number of batches,
// not jobs. Each is fenced by the claim's attempt: a row that a later claim
// of the same job rewrote is left alone. These steps are the engine's own:
// they are not methods a service calls.
//
// # Durable topics: the ledger from the enqueue on
//
// A *Ledger is also the queue.DurableStore of durable topics: Schedule
// writes a waiting row per job, due times on the SQL server's clock, in
// two round trips per call. Tx and SQLTx bind it to a caller's
// transaction, which is how Engine.EnqueueTx and Engine.Transaction commit
// business rows and their jobs together (TxEnqueuer). ScheduledCounts and
// SQLNow are the relay's reads, and what the inspector counts.
//
// # Exactly once: transactional completion
//
// Transactional wraps a handler so that its business writes and the
// deletion of its job's ledger row commit in one transaction on the
// ledger's database; with a unique key in the business table, the effect
// happens once however often the job is delivered. A claim that was lost
// meanwhile (the job taken over after a lease expiry, or cancelled) gets
// ErrClaimLost and commits nothing. DeleteInTx is the same step for a
// handler that runs its own transaction. See ExampleTransactional.
//
// # Audit
//
// What remains in the ledger is exactly the set of jobs some worker started
// and that have not finished for good (and, for durable topics, every job
// from its enqueue on). List pages through the rows by state, topic and due
// time; InFlight, Row, ByWorker and Count say what is in flight and who
// holds it; Stale and CountStale what is past
// its lease (a dead or stalled worker's jobs); DeadLetters what died and
// why. See ExampleLedger_InFlight.
//
// # Recovery reads it
//
// The engine's recoverer pages through the stale rows, asks Redis which of
// their jobs it no longer has, and re-creates those: the ledger is how a
// job survives a worker crash or a Redis data loss.
//
// # Its SQL
//
// Every statement against the ledger's tables is in this package: the
// worker's writes, the row lookup and fenced delete of a cancel, the
// recoverer's reads, the audit queries, the operators' pauses
// (queue.PauseStore: SetPaused, TopicState, TopicStates on
// dq_topic_state), Migrate and Drop. Other packages get none of the
// tables' SQL; DB is the handle for a caller's own tables in the same
// database (Transactional). The steps that only the engine takes are
// reached through Internal, whose key cannot be made outside delayq's
// module.
package ledger

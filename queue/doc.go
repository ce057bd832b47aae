// Package queue is delayq's Redis data plane and worker runtime: jobs wait
// in Redis until their due time (Unix milliseconds, Redis's clock), a worker
// claims them atomically, records each one in a SQL ledger before its
// handler runs, and settles the outcome. Every change a topic's jobs go
// through in Redis is one Lua script over the keys of that topic, so it is
// atomic; a few reads (a stale claim's check, stats) are plain commands.
//
// This page walks through a job's life; docs/design.md in the repository
// has the keys, the state machine across Redis and SQL, and the failure
// table with the test that proves each row.
//
// # Enqueue
//
// A Client runs the scripts over any go-redis UniversalClient (single node,
// Sentinel or Cluster). Enqueue schedules one job after a Delay or at a
// RunAt; EnqueueBatch up to Config.MaxBatch in one round trip:
//
//	c, err := dataplane.New(rdb, queue.Config{})
//	r, err := c.Enqueue(ctx, "order_close", queue.NewJob{
//		ID:      "order_close:123",
//		Payload: payload,
//		Delay:   30 * time.Minute,
//	})
//
// The job id is the idempotency key: enqueueing an id that is waiting, in
// flight or dead writes nothing and reports Duplicate. Bad input (topic,
// id, payload size, delay, attempts) is refused with a *ValidationError
// naming the field, and nothing is written. See ExampleClient_Enqueue.
//
// # Handle
//
// A Handler runs one job. Its result decides what happens next: nil
// completes the job; an error retries it after a Backoff while attempts are
// left; SkipRetry(err) makes it dead at once; RetryAfter and RetryAt choose
// when it runs again. A panic is recovered as a *PanicError and counts as an
// error. The handler's context ends when the job's lease runs out (cause
// ErrLeaseExpired) or when the worker's shutdown timeout does (cause
// ErrShutdown).
//
// Delivery is at least once: a job whose worker died runs again. A handler
// that writes to the ledger's database gets exactly-once effects from
// ledger.Transactional. A handler that schedules follow-up jobs can take an
// Enqueuer (a *Client in production); package queuetest tests such a
// handler without a worker, a ledger or Redis.
//
// # Run a worker
//
// A service does not build a Worker itself: package queue/engine builds
// one, with the recoverer and the relay it depends on, and runs them all
// (engine.New, Engine.Handle, Engine.Run). What follows is what that
// worker does. A Worker claims jobs of the topics it handles and runs
// their handlers:
//
//	w, err := dataplane.NewWorker(c, led, queue.WorkerConfig{})
//	err = w.Handle("order_close", h, queue.TopicConfig{Concurrency: 50})
//	err = w.Run(ctx) // until ctx ends, then a graceful shutdown
//
// For each topic it claims up to the free handler slots at once (a claim
// moves due jobs to the lease set and bumps their attempt), writes the
// batch to the ledger, and only then hands the jobs to handlers; if the
// ledger cannot be written, the jobs go back unstarted. It sleeps until the
// next due time or a wake message, never polling. A heartbeat renews the
// leases of the jobs it holds (queued, running, and finished but not yet
// settled) in Redis and the ledger. Finished jobs are settled in batches,
// the ledger step before the Redis step, so a crash in between leaves a
// lease that expires and redelivers the job; after a failed step the store
// is pinged and the batch settled as soon as it answers. Every settling step
// names one claim (a Ref: topic, id, attempt) and does nothing for a claim
// that another worker has since taken over. Run stops claiming when ctx
// ends, hands back jobs claimed but not started, waits for running handlers
// up to WorkerConfig.ShutdownTimeout, and settles everything before it
// returns. See ExampleWorker.
//
// TopicConfig.RateLimit caps a topic's handler starts per second across
// every worker of the cluster: the claim script spends a token bucket kept
// in Redis, on Redis's clock, and a fetcher held back sleeps until the next
// token (docs/design.md §4.16).
//
// # The ledger
//
// Ledger is what the worker needs from the SQL ledger; package ledger
// implements it on MySQL/MariaDB or SQLite. A job has a ledger row from its
// claim until it finishes for good (on a durable topic, from its enqueue:
// SQL is the truth and Redis holds the jobs due within the horizon), so
// whatever a worker crash or a Redis data loss drops, the ledger still
// holds.
//
// # Recovery
//
// Package recovery runs the recoverer: on a cron schedule, one process at a
// time, it puts back into Redis the jobs whose ledger rows are past their
// lease and that Redis no longer has, and it notices a Redis data loss
// through each topic's epoch marker (EpochMissing, EnsureEpoch). Its relay
// moves a durable topic's waiting rows into Redis as they come within the
// horizon, and pushes what an enqueuer committed but could not push. Set
// WorkerConfig.OnRedisReconnect to its RedisReconnected so that a Redis that
// came back empty is recovered at once.
//
// # Inspect and operate
//
// Get, List and Stats read a topic; Topics lists them. Cancel removes a job
// that waits to run, from Redis and from the ledger (a job waiting for a
// retry has a row there), in the one order that no recovery run can undo
// (docs/design.md, §4.8); it returns ErrInFlight while a worker holds the
// job and ErrDead once it died. The API, the CLI and the order module all
// cancel through it. Dead jobs stay in Redis with their last error until
// RequeueDead, RequeueAllDead or PurgeDead. Pause stops every worker from
// claiming a topic's jobs until Resume; the state is kept in a PauseStore
// (the SQL ledger) first, so that a Redis data loss cannot lift it, and the
// relay and the recoverer put it back with ApplyPauses (docs/design.md,
// §4.13).
package queue

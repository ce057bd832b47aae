// Package queue is delayq's job model: what a job is, what a handler
// returns, the states a job goes through, and the configuration of the
// data plane and its workers. Package queue/engine runs it: a service
// builds one engine.Engine over its Redis and its SQL ledger, enqueues
// through it and registers handlers with it; it never builds the parts
// (worker, recoverer, relay, scheduler) itself.
//
// This page walks through a job's life; docs/design.md in the repository
// has the keys, the state machine across Redis and SQL, and the failure
// table with the test that proves each row.
//
// # Enqueue
//
// A NewJob is enqueued on a topic after a Delay or at a RunAt
// (Engine.Enqueue; up to Config.MaxBatch in one round trip with
// EnqueueBatch; in the caller's SQL transaction with EnqueueTx):
//
//	r, err := eng.Enqueue(ctx, "order_close", queue.NewJob{
//		ID:      "order_close:123",
//		Payload: payload,
//		Delay:   30 * time.Minute,
//	})
//
// The job id is the idempotency key: enqueueing an id that is waiting, in
// flight or dead writes nothing and reports Duplicate (EnqueueResult). Bad
// input (topic, id, payload size, delay, attempts) is refused with a
// *ValidationError naming the field, and nothing is written; ValidateTopic
// and ValidateID check a name ahead of time.
//
// Due times are Unix milliseconds on Redis's clock. A topic is redis (the
// default: its waiting jobs live in Redis) or durable (Config.
// TopicDurability: SQL holds every job from its enqueue, and Redis the
// ones due within Config.Horizon); see Durability.
//
// # Handle
//
// A Handler runs one Job. Its result decides what happens next: nil
// completes the job; an error retries it after the topic's Backoff while
// attempts are left; SkipRetry(err) makes it dead at once; RetryAfter and
// RetryAt choose when it runs again. A panic is recovered as a *PanicError
// and counts as an error. The handler's context ends when the job's lease
// runs out (cause ErrLeaseExpired) or when the worker's shutdown timeout
// does (cause ErrShutdown).
//
// Delivery is at least once: a job whose worker died runs again. A handler
// that writes to the ledger's database gets exactly-once effects from
// ledger.Transactional. A handler that schedules follow-up jobs takes an
// Enqueuer (the engine in production); package queuetest tests such a
// handler without a worker, a ledger or Redis.
//
// # Run
//
// TopicConfig sets how one topic runs (Engine.Handle): its handlers'
// concurrency, lease and heartbeat, attempts and backoff, a timeout, and a
// rate limit that holds across every worker of the cluster (RateLimit).
// WorkerConfig sets the worker's own: its id in the ledger, the defaults of
// every topic, the shutdown timeout. Zero fields take the defaults written
// next to them.
//
// A worker claims due jobs in batches, records each batch in the ledger
// before any of its handlers starts (if the ledger cannot be written, the
// jobs go back unstarted), renews the leases of the jobs it holds, and
// settles finished jobs in batches, the ledger step before the Redis step.
//
// # Inspect and operate
//
// State names where a job is (waiting, retrying, in_flight, dead), the same
// names in the library, the ledger, the API, the CLI and the dashboard.
// JobInfo is a job as Redis holds it, Stats a topic's counts, Page a
// listing. Engine.Cancel removes a job that waits to run (ErrInFlight while
// a worker holds it, ErrDead once it died); Engine.Reschedule moves its due
// time (a When); dead jobs stay with their last error (DeadJob) until they
// are requeued or purged; Engine.Pause stops every worker from claiming a
// topic's jobs until Resume (PauseState).
//
// Observer and its optional extensions (EnqueueObserver, PushObserver,
// RateLimitObserver, RescheduleObserver, UnsettledObserver) are the hooks
// that metrics are built on.
package queue

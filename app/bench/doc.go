// Package bench is delayq's load tool: the scenarios behind `delayq bench`,
// each a function Run(ctx, Options) (Result, error) that anyone can call
// against a Redis and a SQL ledger of their own.
//
//   - Enqueue: N jobs from C goroutines, one per call or in batches.
//   - Drain: N jobs already due, then a worker starts; jobs/s from its
//     start to the last job handled.
//   - Lateness: N jobs due uniformly over a window starting a few seconds
//     ahead, or each due a fixed delay after its own enqueue; handler start
//     minus due time.
//   - HTTP: the API's enqueue endpoint, served in process on a loopback
//     port, under C connections for D seconds.
//   - Recovery: N ledger rows whose jobs Redis lost; how long one recovery
//     run takes to put them all back.
//   - Idle: a worker with nothing to do (Durable: on a durable topic, with
//     the relay and the recoverer beside it); its CPU use, and Redis's and
//     the SQL server's.
//
// The worker scenarios and the enqueues also count what their jobs cost
// (Costs): the ledger's commits and the SQL server's per 1,000 jobs, Redis
// commands and CPU time per job, figures that hold when the machine's
// speed changes.
//
// Enqueue and HTTP also measure the machine's own round trip right before
// and after their measured phase (Baseline: PING and an empty script's
// EVALSHA on one connection, and that EVALSHA from as many goroutines as
// the run has), and report their calls per second as a Ratio to the empty
// script's rate: on a shared machine whose speed changes by the minute,
// the ratio is what a figure is judged by.
//
// Every scenario counts what the handlers actually saw: jobs handled twice
// (duplicates), jobs accepted but never handled (missing) and jobs whose
// handler started before their due time (early). Jobs the measured phase
// only enqueued are afterwards drained by a worker to count them.
//
// Each run works in a sandbox of its own: a Redis key namespace
// (dqbench_<hex>) and ledger tables with a prefix of their own
// (dqbench_<hex>_ledger), deleted and dropped when the run ends unless
// Env.Keep is set. Nothing else on the Redis or in the database is touched.
package bench

// Package httpapi is delayq's HTTP API: a JSON front for the queue (enqueue,
// inspect, cancel, stats, dead letters), the ledger's audit queries and the
// recoverer, plus the health probes that load balancers and orchestrators
// call.
//
// New builds the handler from its dependencies; NewServer wraps it in an
// http.Server with timeouts and a cap on concurrent requests. The package
// holds no global state: everything hangs off the handler New returns, so a
// test (or a tenant) can run several side by side.
//
// # Routes
//
//	GET    /healthz                               200 while the process is up (no auth, no cap)
//	GET    /readyz                                200, or 503 naming the backend that failed (no auth)
//	GET    /metrics                               Prometheus metrics, when Deps.Metrics is set (no auth)
//	GET    /, /dashboard/...                      the dashboard page and its assets, when Deps.Dashboard is set (no auth)
//	POST   /v1/topics/{topic}/jobs                enqueue one job: 202 created, 200 duplicate (durable topics, uniqueness window: see below)
//	POST   /v1/topics/{topic}/jobs:batch          enqueue up to Config.MaxBatch jobs: 200 with a result per job
//	GET    /v1/topics/{topic}/jobs                a page of jobs (?state=waiting|retrying|in_flight|dead|waiting_sql&offset=&after=&limit=, or ?prefix=&after=&limit=; see below)
//	GET    /v1/topics/{topic}/jobs/{id...}        a job's state, times, attempts, last error, payload, and its ledger row
//	DELETE /v1/topics/{topic}/jobs/{id...}        cancel a job: waiting or retrying, 200 with the job (cancelled); in flight, 202 with the job and cancel_requested_at (see below)
//	PATCH  /v1/topics/{topic}/jobs/{id...}        reschedule a waiting or retrying job: {"run_at"|"delay_ms"|"shift_ms": n}; 200 with the job
//	GET    /v1/topics                             every known topic with its stats, durability and rate limit
//	GET    /v1/topics/{topic}                     one topic's stats, durability, rate limit and uniqueness window
//	GET    /v1/topics/{topic}/dead                dead jobs, newest first (?offset=&limit=)
//	POST   /v1/topics/{topic}/dead/requeue        {"id": "..."} or {"all": true}
//	POST   /v1/topics/{topic}/dead/purge          {"before": <Unix ms>} (default now); the body is optional
//	DELETE /v1/topics/{topic}/dead/jobs/{id...}   delete one dead job for good: 200 {"topic", "id", "deleted": true} (no body; see below)
//	GET    /v1/topics/{topic}/history             finished jobs (?id=|prefix=&outcome=&finished_from=&finished_before=&after=&limit=; see below)
//	POST   /v1/topics/{topic}/pause               pause the topic in every worker: 200 with its state (no body; see below)
//	POST   /v1/topics/{topic}/resume              resume it: 200 with its state (no body)
//	GET    /v1/topics/{topic}/partitions          the topic's partition count and the counts that may still hold jobs
//	PUT    /v1/topics/{topic}/partitions          raise it: {"partitions": n}; 200 with the same (see Partitions)
//	GET    /v1/ledger                             ledger rows (?state=&topic=&due_after=&due_before=&cursor=&limit=; see below)
//	GET    /v1/ledger/inflight                    the same as GET /v1/ledger, its older name
//	GET    /v1/ledger/stale                       rows whose lease ended (?older_than=<Unix ms>&after_id=&after_shard=&limit=)
//	POST   /v1/recovery/run                       run the recoverer now (?dry_run=true|false)
//	GET    /v1/recovery/reports                   the recoverer's last reports
//	GET    /v1/schedules                          the periodic schedules with their next run and last tick (see below)
//	GET    /v1/workers                            the worker processes: host, pid, version, topics, jobs held, heartbeat; live or gone (see below)
//	GET    /v1/schema                             the ledger's schema version and its migrations, applied and pending (see below)
//	GET    /v1/openapi.json                       the API's OpenAPI 3.1 description (see The contract)
//	*      Deps.Modules patterns                  extra /v1 handlers, behind the same auth
//
// The orders module of jobs/orderclose, when the program mounts it, adds
// (delayq mounts it with orders.enabled: off by default in `delayq serve`,
// always on in `delayq demo`, set in configs/delayq.yaml):
//
//	POST   /v1/orders                             create an order: 201 (a retry with its Idempotency-Key: 201, the same order)
//	POST   /v1/orders/{no}/pay                    pay it: 200 (no body)
//	POST   /v1/orders/{no}/extend                 extend its payment window: {"by_ms": n}; 200 with the order
//	GET    /v1/orders/{no}                        the order
//	GET    /v1/orders/summary                     the orders at a glance
//	PUT    /v1/products/{sku...}                  create a product or set its stock and price: {"stock": n, "price_cents": n}; 201 or 200
//	GET    /v1/products/{sku...}                  the product
//	GET    /v1/products                           products by SKU (?after=&limit=)
//
// A create sent with an "Idempotency-Key: <1-64 visible ASCII characters>"
// header is safe to retry: the key is stored with the order (keys are
// global, one order each, kept as long as the order); a create with a key
// that made an order already writes nothing and answers 201 with that order
// as it is now, its Location and "Idempotent-Replayed: true"; the key with
// another user, items or payment window is 422 idempotency_key_reused
// (orderclose.HTTPHandler has the details).
//
// The dashboard (app/dashboard) adds GET /v1/dashboard/series, the data
// of its live charts, and GET /v1/dashboard/minutes, a topic's per-minute
// counts over the last hours (see below). Routes lists the API's own routes; orderclose.Routes the
// orders module's.
//
// PATCH /v1/topics/{topic}/jobs/{id...} moves a waiting or retrying job's due time
// (docs/design.md §4.14), in Redis and in its ledger row alike. The body
// has exactly one of "run_at" (Unix ms), "delay_ms" (from now, on Redis's
// clock, 0 or more) or "shift_ms" (from the due time it has, negative for
// earlier); a time before now means now, one past queue.max_delay is 400
// invalid_run_at naming the field, two fields are 400 conflicting_fields,
// none 400 missing_field. It answers 200 with the job view (run_at the
// accepted due time: the job runs then or after, never before) and
// previous_run_at; 409 job_in_flight when a worker holds the job (a
// claim won the race; a worker claims a job up to worker.claim_ahead,
// 20ms, before its due time), 409 job_dead, 409 job_contended when the job kept
// moving (other reschedules, claims) while it tried (retry; concurrent
// shifts each apply once or fail with it), 404 for no such job, 503
// backend_unavailable naming redis or sql (nothing moved in Redis; repeat
// it: with shift_ms, read the job first). A job moved earlier than the
// topic's head wakes the workers at once. It stays open with
// http.read_only, like cancel: the application moves its own jobs with it.
// A durable job waiting beyond the horizon is moved in its row and put in
// Redis at its new time. Each call counts in
// delayq_reschedules_total{topic,result}.
//
// DELETE /v1/topics/{topic}/dead/jobs/{id...} deletes one dead job from
// Redis (its envelope and its place in the dead set), then turns the id's
// dead history rows to purged (as dead/purge does by time of death). No
// body, no query parameter. 200 {"topic": "<topic>", "id": "<id>",
// "deleted": true}; 404 not_found naming "id" when the job is not dead
// (waiting, retrying, in flight or unknown: nothing is touched); 400
// invalid_topic or invalid_id naming "topic" or "id"; 403 read_only with
// http.read_only; 503 backend_unavailable naming redis (nothing deleted;
// repeat it). History still saying dead after a 200 means SQL failed after
// Redis's delete: the server logs it. The dashboard's dead-letters page
// deletes a selection of jobs with one call each.
//
// GET /v1/dashboard/minutes?topic=<topic>&hours=<1-24> answers a topic's
// counts per minute over the last hours (default 24), oldest first, as
// {"topic", "hours", "every_ms": 60000, "t": [<each minute's start, Unix
// ms>], "enqueued": [n], "done": [n], "retried": [n], "dead": [n],
// "backlog": [n or null]}; every array has hours*60 values, the last one
// the minute under way. enqueued, done (handlers that succeeded),
// retried (failed attempts that retry) and dead are summed over every
// process (each flushes its counts at most every 5 s, so the last seconds
// may be missing); backlog is the jobs due and not claimed, sampled once a
// minute by the processes that serve the API, null for a minute nobody
// sampled. Kept in Redis for 25 hours (docs/design.md §4.20). topic is
// required: absent, 400 missing_field; not a topic name, 400
// invalid_topic; hours outside 1-24, 400 invalid_value; both naming the
// parameter. Redis down: 503 backend_unavailable.
//
// GET /v1/ledger lists the ledger's rows (docs/audit.md has the SQL for
// the questions it does not answer): state is waiting, in_flight or
// retrying (all when left out; the older scheduled, in_progress and
// in-progress are read as waiting and in_flight until the release after
// next), topic one topic, due_after and due_before
// bound run_at in Unix ms, both exclusive (due_before must be after
// due_after), limit 1 to 1000 (default 100). A waiting row holds no lease:
// its lease_until is 0, like its claimed_at. With a state, rows come by
// due time (run_at, then id); without one, by id. A page that is not the
// last carries next_cursor: pass it back as cursor, with the same filters,
// for the next page. A row stays on its place in that order while it keeps
// its state, so paging lists it once however rows come and go.
//
// Over ledger shards (sql.shards, docs/design.md §7.1) the ledger's
// listings read every shard and merge: GET /v1/ledger in the same order
// with the shard as the last key (its next_cursor names the shard of the
// page's last row; a cursor of a shard the ledger does not have is 400
// invalid_value), GET /v1/ledger/stale by shard then id (pass
// next_after_shard back as after_shard, with next_after_id; after_shard
// beyond the last shard is 400 invalid_value), a topic's history and the
// job browser's SQL listings likewise. The ledger rows say their shard
// ("shard", absent for shard 0); history rows do not. A job's ledger row
// (GET of a job) is looked for on every shard (one shard down hides no
// row another holds); its cancel and reschedule go to the shard of its
// partition; a dead job's purge marks its history on every shard; /readyz
// pings every shard; GET /v1/schema is the least migrated shard's. A shard
// down is 503.
//
// GET /v1/schedules lists the periodic schedules of the instance's
// configuration (docs/design.md §4.15), in config order, as
// {"schedules": [{"name", "spec", "location", "topic", "durability",
// "missed", "max_attempts", "next_run", "last_tick", "last_job_id",
// "running"}]}: next_run is the next tick (Unix ms), last_tick the last tick
// any process enqueued (0 if none; read from Redis for a redis topic, from
// SQL for a durable one) and last_job_id its job's id,
// "<name>:<last_tick>"; running says this process enqueues the ticks. No
// schedules configured: an empty list. Redis or SQL down: 503 naming it.
//
// GET /v1/schema says where the ledger's schema stands (docs/design.md §3),
// as `delayq migrate --status --json` does: {"version", "latest",
// "migrations": [{"version", "name", "applied", "how", "applied_at"}],
// "unknown", "untracked", "table", "up_to_date"}. version is the highest
// version up to which every migration is applied, latest the highest this
// build knows; how is "applied", "found" (made by a release before schema
// versions) or "schema.sql"; applied_at is RFC 3339 UTC. It changes nothing:
// `delayq migrate` applies what is pending. SQL down: 503 naming it.
//
// # States
//
// A job's "state" in every answer (GET of a job, a listing, a ledger row's
// "state") is one of queue.State's names: waiting, retrying, in_flight,
// dead; cancelled in a DELETE's answer (docs/design.md §4.1). Answers of
// the release before said "scheduled" for waiting and retrying alike and,
// in ledger rows, "scheduled" and "in_progress": a client that matched
// those reads the new names now. The older names are still read on input
// (?state=) until the release after next, and "retrying": true still marks
// a retrying job.
//
// A DELETE of a job a worker holds cancels its run: 202, the job still
// in_flight with "cancel_requested_at" (Unix ms, the first ask's; asking
// again answers the same). The worker holding it, in whichever process,
// cancels its handler's context (cause queue.ErrCancelRequested), or
// does not start it; a run that then ends in an error ends cancelled,
// never retried (history outcome cancelled), one whose handler returns
// nil anyway ends succeeded. A handler that ignores its context runs on:
// GET shows the job in_flight with cancel_requested_at until it returns.
// A job the ledger says a worker holds but Redis lost is 409
// job_in_flight (docs/design.md §4.8.1). Until this release such a DELETE
// was 409 job_in_flight and did nothing: a client that sent it to test
// whether a job had started now cancels the job's run; GET tells the
// state without changing it.
//
// A DELETE's answer may carry "warning": what the cancel does not do. With
// the orders module on, cancelling an order's close job (order_close)
// warns that the order stays pending and the sweeper enqueues a new close
// job after its deadline; extend or pay the order to change its fate. The
// CLI prints it on stderr, the dashboard after the cancel.
//
// A job's max_attempts is shown capped by its topic's configured limit
// (worker.topics.<t>.max_attempts, or worker.max_attempts), which its next
// claim applies.
//
// An enqueue's "priority" (0, the default, to 3) is the job's priority
// within its topic (docs/design.md §4.23): of the topic's due jobs, those
// of the highest priority are claimed first, each priority in due order;
// one due job in 10 claimed (worker.topics.<t>.oldest_every) is the one
// due longest whatever its priority, so none waits forever. A job keeps
// its priority through retries, a requeue from the dead set, a reschedule
// and, on a durable topic, a Redis data loss; every job view shows it.
// Out of range is 400 invalid_priority naming the field.
//
// An enqueue's "ordering_key" (the characters of an id; "" is none) makes the job one
// of a sequence (docs/design.md §4.24): jobs of the topic with the same
// key run one at a time, in due order (enqueue order among equal due
// times), whatever their priorities, while other keys run beside them. A
// job holds its key from the moment it is the key's earliest until it
// succeeds, is cancelled or dies: a retrying job holds it. A later job of
// a busy key waits parked ("parked": true in its view, "parked" counted in
// the topic's stats); one enqueued due earlier than a holder that has not
// started takes the key. On a topic of several partitions the ordering key
// is the partition key: a "partition_key" that differs is 400
// invalid_ordering_key naming partition_key; a key outside the id's
// characters is 400 invalid_ordering_key naming ordering_key. Every job
// view and ledger row shows "ordering_key".
//
// # Workers
//
// GET /v1/workers lists the workers' registry (docs/design.md §4.19):
// {"workers": [{"id", "host", "pid", "version", "started_at", "heartbeat",
// "every_ms", "ledger_ok", "topics": [{"topic", "concurrency", "in_flight",
// "pool", "weight"}], "pools": [{"name", "concurrency", "in_flight"}],
// "state"}]}, by id. A topic in a shared pool of handlers (worker.pools,
// docs/design.md §4.22) names its pool and its weight there, and shows the
// pool's concurrency; "pools" (absent when none) are the process's pools
// with the jobs their topics hold. Each worker process writes its entry every every_ms
// (5 s by default), idle or not, with ledger_ok: whether its SQL ledger
// answered a ping then; it removes its entry when it stops; state is live, or
// gone once its heartbeat is 1.5 intervals old (killed, or cut off from
// Redis); gone entries are forgotten after 10 minutes. Times are Unix ms on
// Redis's clock. The topic stats (GET /v1/topics, /v1/topics/{topic}) carry
// "consumers", the live workers that handle the topic, and "unconsumed":
// true when it has jobs due now and none (a typo in a producer's topic
// name, a topic no worker is configured for).
//
// # Job history
//
// GET /v1/topics/{topic}/history lists the topic's finished jobs, one row
// each time a job finished (docs/design.md §4.18): {"topic", "history":
// [{"topic", "id", "outcome", "attempts", "max_attempts", "enqueued_at",
// "due_at", "first_claimed_at", "claimed_at", "finished_at", "worker",
// "last_error", "result"}], "next_after"}. outcome is succeeded, dead,
// cancelled or purged; times are Unix ms, first_claimed_at and claimed_at 0
// for a job cancelled before any claim. result, present only when the
// succeeded run's handler recorded one (queue.RecordResult; an HTTP target's
// JSON answer of at most 4096 bytes), is that JSON value as is. Parameters:
//   - id: one job id's rows, newest first; prefix: the ids that start with
//     it (taken literally), by id. Not both (400 conflicting_fields).
//   - outcome: only that outcome.
//   - finished_from, finished_before: finished_at in [from, before), Unix ms;
//     a range with before at or before from is 400 invalid_value.
//   - after: a page's next_after, as it is; one of another listing (by id
//     versus by time) is 400 invalid_value naming after.
//   - limit: 1 to 1000, default 100.
//
// Without id or prefix, rows come newest first by finish time. Rows are
// kept for recovery.history_retention (a week by default; a topic may set
// its own, or turn history off). GET of a job that is no longer waiting,
// running or dead says in its 404 how it finished, from its history.
// Cancelling a job writes its history row first: SQL down, the cancel is
// 503 and the job still waits.
//
// # Job browser
//
// GET /v1/topics/{topic}/jobs lists a topic's jobs a page at a time, each
// page read from an index (docs/design.md §4.17); nothing scans the
// keyspace. Its parameters:
//   - state, the listing: waiting (the default): the due set by due
//     time, which holds the jobs waiting for a retry too; each job carries
//     its own state (waiting, or retrying when it ran before, also still
//     said by "retrying": true for the clients of the release before).
//     in_flight: the lease set by lease end, each
//     job with its ledger row ("ledger": worker, claimed_at, lease_until;
//     when SQL does not answer the page still comes, with "ledger_error").
//     dead: newest first, with the last error. retrying: the ledger's rows
//     waiting for their next attempt, by due time, with the last error.
//     waiting_sql: a durable topic's rows waiting for their first run
//     (those beyond the horizon too, which Redis does not have yet), by due
//     time. A job shows the same state in every listing it is in, in GET
//     of the job, in GET /v1/ledger and on the dashboard (queue.State).
//     scheduled and scheduled_sql, the older names of waiting and
//     waiting_sql, are read as those until the release after next.
//   - offset (waiting, in_flight, dead): where the page starts, 0 to
//     2^31-1; the answer's next_offset is the next page's, absent on the
//     last. total is the state's count.
//   - after (retrying, waiting_sql, prefix): the keyset cursor, a page's
//     next_after passed back as it is (absent on the last page); total is
//     -1 there: SQL listings count nothing per request. offset with these,
//     or after with the others, is 400 conflicting_fields. A cursor names
//     its listing (topic, state or prefix): given to another one it is 400
//     invalid_value naming after.
//   - prefix: the jobs of a durable topic whose id starts with it (1-200 id
//     characters, taken literally: no wildcard), by id, from the ledger's
//     unique (topic, job_id) index: its waiting, retrying and in-flight jobs
//     (dead and finished ones have no row). Not with state or offset. A
//     redis topic has no index by id: 400 invalid_value naming prefix;
//     search it by exact id with GET .../jobs/{id}.
//   - limit: 1 to 1000, default 100.
//
// Listings leave payloads out (payload_size stays); GET
// /v1/topics/{topic}/jobs/{id} has the payload, and beside Redis's view the
// job's ledger row as "ledger" (absent when it has none; "ledger_error"
// when SQL did not answer: the rest of the answer is still Redis's).
//
// # Durable topics
//
// A durable topic (queue.durability, queue.topics.<name>.durability;
// docs/design.md §4.11) commits every job to the SQL ledger before the
// enqueue answers, then pushes it to Redis:
//   - 202 means the job's row is committed: the job exists and survives any
//     loss of Redis. It may not be in Redis yet: with Redis down or slow the
//     push is left to the relay, which pushes it at the latest
//     recovery.relay_every + recovery.relay_grace after it falls due. A 202
//     is therefore possible while Redis is down (a redis topic's enqueue then
//     answers 503 naming redis).
//   - 503 backend_unavailable with the message "sql is unavailable" means
//     SQL did not answer: nothing was written anywhere; retry.
//   - 200 duplicate: the id has a row (waiting, in flight or retrying); its
//     run_at is the waiting job's.
//
// # Traces
//
// With tracing on (tracing.enabled, queue.Config.Trace) every /v1 route
// reads a W3C traceparent header into its request's context: the jobs the
// request enqueues (POST .../jobs, .../jobs:batch, POST /v1/orders) keep
// it, and each of their runs is a span of that trace, the child of the
// header's span (docs/design.md §4.21). A header that is not a valid
// traceparent is ignored. Without tracing the header is ignored. GET of
// one job shows the trace it keeps as "trace_parent".
//
// # Uniqueness window
//
// A topic with queue.topics.<name>.unique_for keeps a finished job's id
// taken that long after the job finished, whatever its outcome
// (docs/design.md §4.2.1). An enqueue of it inside the window answers 200
// duplicate and writes nothing, with how the job ended and when the id is
// free again:
//
//	{"id": "pay:42", "topic": "pay", "duplicate": true,
//	 "finished": {"outcome": "succeeded", "taken_until": 1796660000000}}
//
// outcome is succeeded, cancelled, dead (a durable topic's, from its
// history) or purged (a dead job deleted from the dead set); a batch's
// result carries the same "finished" per job. A durable topic reads the
// window from its job history in SQL, so a Redis data loss changes
// nothing. GET /v1/topics/{topic} gives the window as "unique_for_ms"
// (absent for none).
//
// A job due beyond queue.horizon waits in SQL only until the relay loads it;
// GET /v1/topics/{topic}/jobs/{id} shows it from its row, state waiting,
// with "sql_only": true (and so does a job Redis lost, until the relay puts
// it back). GET .../jobs?state=waiting_sql lists them (the Redis states
// leave them out), as does GET /v1/ledger?state=waiting&topic=.
//
// Topic stats (GET /v1/topics, GET /v1/topics/{topic}) say every topic's
// "durability" (redis or durable); due, due_now and in_flight are Redis's
// counts. A durable topic also has "sql": {"waiting", "beyond_horizon",
// "counted_at"}: its waiting jobs in SQL, all and those due beyond the
// horizon, as the relay of this process last counted them (every 30 s,
// never per request; absent where the process runs no relay, or before
// its first count). GET /v1/topics lists durable topics whose jobs all wait
// in SQL only, too.
//
// # Partitions
//
// A topic of several partitions spreads its keys over a Redis Cluster
// (docs/design.md §7.1). PUT /v1/topics/{topic}/partitions with
// {"partitions": n} raises the count: new enqueues go to the n partitions,
// every worker claims from them within queue.layout_refresh (2 s), and the
// jobs already enqueued drain where they are. It answers 200 with
// {"topic", "partitions", "layouts"}: the count enqueues use and every
// count whose partitions may still hold jobs, ascending. A count lower
// than the current one, outside 1-256, or whose partition names (topic~n.p~m)
// would be over 64 characters is refused 400 (field partitions); the
// current count again changes nothing. Each change is logged at info
// (topic, partitions, actor, remote); refused 403 read_only in read-only
// mode. An enqueue's "partition_key" (the characters of an id) puts jobs
// with the same key on the same partition; without it the id chooses.
// Every route by topic and id finds a job in whichever partition it is,
// and a topic's stats and listings cover all of them: Redis's, and the
// ledger's (GET /v1/ledger?topic=, the SQL listings of the job browser,
// history). A job view, a ledger row and a history row of such a topic
// name the topic in "topic" and its partition (topic~n.p~m) in
// "partition"; "partition" is absent for a topic of one.
//
// # Pause and resume
//
// POST /v1/topics/{topic}/pause stops every worker process from claiming the
// topic's jobs from the instant it answers (docs/design.md §4.13): handlers
// already running finish, and jobs keep falling due and wait. POST
// /v1/topics/{topic}/resume lets the workers claim again at once, each no
// more than its free handler slots. Both answer 200 with {"topic", "paused",
// "changed_at", "changed_by", "changed"}: pausing a paused topic (or
// resuming a running one) changes nothing, answers 200 with the state in
// force and changed false; resuming a topic never paused writes nothing
// either (changed_at 0). changed_by is "token:" and the first 8 hex digits
// of the SHA-256 of the caller's bearer token, or "anonymous" with auth off;
// each call is logged at info (topic, action, actor, remote, at). The state
// is written to SQL first, then Redis: 503 backend_unavailable naming sql
// means nothing changed; 503 naming redis means the state is saved in SQL
// and reaches Redis when it answers (the relay or the recoverer applies it);
// either way, retry. Both are refused 403 read_only in read-only mode.
// Topic stats show "paused" and, while paused, "paused_at" (Unix ms) and
// "paused_by".
//
// # Rate limits
//
// A topic with a rate limit (worker.topics.<name>.rate_limit and
// rate_burst; docs/design.md §4.16) has in its stats (GET /v1/topics, GET
// /v1/topics/{topic}) "rate_limit": {"per_second": n, "burst": n}: at most
// per_second handler starts a second across every worker of the cluster,
// burst at once after an idle spell. It is this process's configuration
// (every process handling the topic must set the same); the workers enforce
// it in the claim, the API only shows it. Jobs held back stay due (due_now
// counts them) and run in order. A topic without a limit has no rate_limit.
//
// Job ids may contain '/', so {id...} takes the rest of the path; the
// slashes may be sent as they are or percent-encoded (%2F). An id with an
// empty, "." or ".." segment ("a//b", "a/../b") must be sent encoded: a path
// that is not in its clean form gets 404 not_found (it is never redirected
// to its cleaned form, which would be another job's path).
//
// # The contract
//
// openapi.json, embedded in the binary (OpenAPI returns it) and served at
// GET /v1/openapi.json behind the same token as the rest of /v1, is the
// API's machine-readable description in OpenAPI 3.1: every route the
// program serves (the routes above, the orders module's, the dashboard's
// series and the probes), their path and query parameters with types,
// enums and limits, request bodies, every answer each route gives with its
// JSON schema (errors in the shape below), and the bearer auth. Schemas
// list every field and refuse others, so a client generated from it (the
// tests generate one with openapi-typescript) gets exact types;
// a field added to an answer is a change to the contract. What holds for
// every route is said once, in its info: 405 with Allow for a method the
// path does not take, 503 overloaded beyond http.max_concurrent, 500 on a
// bug, 400 for two Authorization headers.
//
// It is written by hand, one file with its keys and paths sorted
// (TestOpenAPIFormat; DELAYQ_OPENAPI_FORMAT=1 sorts it after an edit), and
// its tests keep it true: TestOpenAPIRoutes fails when a route is served without a
// description or described without a route (the routes come from the code:
// Routes, ProbeRoutes, orderclose.Routes, dashboard.SeriesPattern);
// TestOpenAPIParameters and TestOpenAPIQueryParameters compare the
// parameters with the patterns and the handlers'; TestOpenAPIAnswers calls
// every route against Redis and MariaDB, read-only and with both down,
// validates every answer against the schema of its status, and fails when
// an answer the contract documents was never given;
// TestOpenAPIClientTypeScript generates a TypeScript client from the served
// document and enqueues and reads a job with it. A new route, parameter,
// field or answer goes into openapi.json in the same change.
//
// # Errors
//
// Every error is {"error": {"code": "...", "message": "...", "field": "..."}}
// with a stable code and, for bad input, the name of the offending JSON field
// (a path such as "items[1].sku" when nested), query parameter, path value
// or header (Idempotency-Key).
// Every /v1 route answers with the same codes, the orders module's included:
//
//	400 malformed_json          not JSON, truncated, trailing data, not an object (null, [], 1, "x"), or a key given twice (field: the key)
//	400 unknown_field           a JSON field (spelt exactly, case included) or a query parameter the route does not take
//	400 invalid_value           wrong JSON type, a value out of range, text with control characters, a bad query value
//	400 missing_field           a required field is absent
//	400 unexpected_body         a body sent to a route that takes none
//	400 conflicting_fields      two fields that exclude each other
//	400 invalid_topic           a topic outside [A-Za-z0-9_.-]{1,64}
//	400 invalid_id              a job id outside [A-Za-z0-9_.:@/-]{1,200}
//	400 invalid_payload         payload_base64 is not base64
//	400 payload_too_large       a payload over the queue's limit
//	400 invalid_run_at          delay_ms or run_at out of range
//	400 invalid_max_attempts    max_attempts out of range
//	400 invalid_priority        priority out of range (0-3)
//	400 invalid_ordering_key    ordering_key outside [A-Za-z0-9_.:@/-]{1,200}, or a partition_key that differs
//	400 batch_too_large         more jobs than the batch limit
//	400 unknown_sku             orders: an item names a SKU that does not exist
//	401 unauthorized            missing or wrong bearer token
//	403 read_only               the API runs read-only
//	404 not_found               no such job, dead job, order or route
//	405 method_not_allowed      the path takes other methods, listed in the Allow header
//	409 job_in_flight           a worker holds the job (running, or claimed up to worker.claim_ahead before it is due); for DELETE, one Redis lost while the ledger says a worker holds it
//	409 job_dead                the job is dead: requeue or purge it
//	409 job_contended           a reschedule lost to other moves of the job too often: retry
//	409 insufficient_stock      orders: not enough stock for an item
//	409 order_closed            orders: paying or extending an order whose window ended
//	409 order_paid              orders: extending an order already paid
//	413 body_too_large          a body over Deps.MaxBodyBytes (orders: orderclose.Config.MaxBodyBytes)
//	415 unsupported_media_type  a body that is not application/json
//	422 idempotency_key_reused  orders: an Idempotency-Key that made an order with another request
//	500 internal                a bug; the log has the details
//	503 backend_unavailable     Redis or SQL could not be reached or did not answer, or another server answers on Redis's address (with Retry-After)
//	503 not_configured          this process runs no recoverer
//	503 not_ready               /readyz: a backend failed
//	503 overloaded              too many requests in flight
//
// The orders routes used other codes before they shared this decoder:
// invalid_json is now malformed_json, invalid_type and invalid_<field>
// (invalid_quantity, invalid_items, invalid_user, invalid_order_no, ...) are
// invalid_value with the same field, and order_not_found is not_found. Their
// answers now also say Content-Type "application/json; charset=utf-8" and
// Cache-Control "no-store", and a body now needs its Content-Type.
//
// # Bad input
//
// Every /v1 route reads requests through one decoder (internal/httpjson),
// so bad input gets the same answer everywhere, and a refused request writes
// nothing:
//   - A JSON body is one object: null, an array or a scalar is
//     malformed_json (so `null` is not an empty purge: it is refused). Its
//     Content-Type is application/json (415 otherwise). Every field is one
//     the route takes, spelt exactly; values have their field's JSON type.
//     Only the routes marked optional above (dead/purge) take an empty body
//     as "no options".
//   - Text fields (ids, topics, users, SKUs: every JSON string field but
//     payloads and base64) are UTF-8 without control characters (U+0000 to
//     U+001F, U+007F to U+009F) and without U+FFFD, which is what invalid
//     UTF-8 decodes to: 400 invalid_value naming the field otherwise.
//     Topics, job ids and order numbers are further held to their own
//     character sets.
//   - Millisecond durations (delay_ms, payment_window_ms) are refused when
//     negative or over their limit, and a count too large for a duration
//     (over about 292 years either way) is refused as out of range, never
//     wrapped. Unix-millisecond times (run_at, before, older_than,
//     due_after, due_before) are checked against their documented range.
//   - A body over the limit gets 413 body_too_large, without being read when
//     Content-Length announces it. Before any error answer the server reads
//     and discards what is left of the body, up to 8 MiB
//     (httpjson.DiscardLimit), so that a client that sends its whole body
//     before reading gets the answer rather than a connection reset; a
//     larger body's connection is closed after the answer. A client that
//     sends "Expect: 100-continue" gets the 413 (or any other refusal)
//     before it sends the body.
//   - Routes that take no body (every GET, HEAD and DELETE, and POST
//     /v1/recovery/run, /v1/topics/{topic}/pause and /resume, and
//     /v1/orders/{no}/pay) refuse one: a
//     Content-Length above 0 or a chunked body is 400 unexpected_body.
//   - Query parameters are the ones listed for the route, each given once
//     with a value: an unknown parameter is 400 unknown_field (a typo such
//     as ?dryrun=true must not run the real thing), a repeated or empty one
//     (?dry_run=) is 400 invalid_value; leave a parameter out for its
//     default. Booleans are exactly true or false, integers decimal within
//     their range.
//   - A path the API has with a method it does not take is 405
//     method_not_allowed with an Allow header; no route answers with a
//     redirect.
//
// # Auth
//
// When Deps.Token is set, every /v1 route (modules included, unknown /v1
// paths too, so route existence does not leak) wants "Authorization: Bearer
// <token>", compared in constant time; a request with two Authorization
// headers is refused 400 invalid_value (field "Authorization"), since
// which one counts would differ from one reader to the next. The probes
// stay open: an orchestrator has no token.
package httpapi

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
//	POST   /v1/topics/{topic}/jobs                enqueue one job: 202 created, 200 duplicate
//	POST   /v1/topics/{topic}/jobs:batch          enqueue up to Config.MaxBatch jobs: 200 with a result per job
//	GET    /v1/topics/{topic}/jobs                a page of jobs (?state=scheduled|in_flight|dead&offset=&limit=)
//	GET    /v1/topics/{topic}/jobs/{id...}        a job's state, times, attempts, last error, payload
//	DELETE /v1/topics/{topic}/jobs/{id...}        cancel a waiting job: 200 with the job
//	GET    /v1/topics                             every known topic with its stats
//	GET    /v1/topics/{topic}                     one topic's stats
//	GET    /v1/topics/{topic}/dead                dead jobs, newest first (?offset=&limit=)
//	POST   /v1/topics/{topic}/dead/requeue        {"id": "..."} or {"all": true}
//	POST   /v1/topics/{topic}/dead/purge          {"before": <Unix ms>} (default now)
//	GET    /v1/ledger/inflight                    ledger rows (?topic=&limit=)
//	GET    /v1/ledger/stale                       rows whose lease ended (?older_than=<Unix ms>&after_id=&limit=)
//	POST   /v1/recovery/run                       run the recoverer now (?dry_run=true|false)
//	GET    /v1/recovery/reports                   the recoverer's last reports
//	*      Deps.Modules patterns                  extra /v1 handlers, behind the same auth
//
// Job ids may contain '/', so {id...} takes the rest of the path; the
// slashes may be sent as they are or percent-encoded (%2F). An id with an
// empty, "." or ".." segment ("a//b", "a/../b") must be sent encoded:
// ServeMux redirects paths that are not clean to their cleaned form.
//
// # Errors
//
// Every error is {"error": {"code": "...", "message": "...", "field": "..."}}
// with a stable code (the Code* constants) and, for bad input, the name of
// the offending JSON field or query parameter. ServeMux's own 404 and 405
// answers are rewritten into the same shape.
//
// # Auth
//
// When Deps.Token is set, every /v1 route (modules included, unknown /v1
// paths too, so route existence does not leak) wants "Authorization: Bearer
// <token>", compared in constant time. The probes stay open: an orchestrator
// has no token.
package httpapi

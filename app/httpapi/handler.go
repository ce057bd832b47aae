package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/httpjson"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/queue/engine"
)

// DefaultMaxBodyBytes is the body limit when Deps.MaxBodyBytes is 0: room
// for the queue's default 1 MiB payload sent as base64 (1.34 MiB) plus the
// rest of the request.
const DefaultMaxBodyBytes = 2 << 20

// Recovery is what the API needs of the recoverer (package recovery): run it
// now, and show what its last runs found. Declared here, where it is used,
// so this package does not depend on the recoverer's.
type Recovery interface {
	// Run runs one recovery pass now; with dryRun it reports what it would
	// re-enqueue without writing. The report is sent as JSON as is.
	Run(ctx context.Context, dryRun bool) (any, error)
	// Reports returns the last runs' reports, JSON-serialisable.
	Reports() any
}

// Module is an extra handler mounted under /v1, behind the same token (for
// example the orders module of jobs/orderclose).
type Module struct {
	// Pattern is a ServeMux pattern whose path starts with /v1/, with or
	// without a method: "/v1/orders/", "POST /v1/orders/{no}/pay".
	Pattern string
	Handler http.Handler
}

// Deps is what the API is built from.
type Deps struct {
	// Queue is the Redis data plane. Required.
	Queue *dataplane.Client
	// Ledger is the SQL ledger: the audit routes read it, and cancelling a
	// job that waits for a retry deletes its row (or the recoverer would
	// bring the job back). Required.
	Ledger *ledger.Ledger
	// Shards are the ledger's shards, Ledger first (docs/design.md §7.1):
	// the listings, a job's row and the health check read them all, and a
	// job's cancel and reschedule go to its shard. Nil: Ledger alone.
	Shards *ledger.Shards
	// Recovery runs the recoverer; nil means its routes answer 503
	// not_configured (a process that runs no recoverer).
	Recovery Recovery
	// SQLCounts gives the durable topics' waiting jobs in SQL for the
	// topic stats, cached (the relay's Counts); nil leaves them out (a
	// process that runs no relay). The API never counts them itself.
	SQLCounts SQLCounter
	// RateLimits are the topics' rate limits of the configuration, shown
	// in the topic stats; the workers enforce them, the API only shows
	// them. nil: none shown.
	RateLimits map[string]queue.RateLimit
	// AttemptLimit is a topic's configured attempt limit (0: none), which
	// a job's claim applies (queue.TopicConfig.MaxAttempts); the views
	// show a job's max_attempts capped by it, as its next claim will.
	// nil: none.
	AttemptLimit func(topic string) int
	// CancelWarning, given a cancelled job's topic and id, says what the
	// cancel does not do (a module that enqueues the job again), in the
	// answer's warning; "" or nil: nothing.
	CancelWarning func(topic, id string) string
	// Modules are extra /v1 handlers, behind auth like the rest of /v1.
	Modules []Module
	// Token is the bearer token every /v1 route wants; "" turns auth off
	// (fine on 127.0.0.1, the default address, and nowhere else).
	Token string
	// ReadOnly refuses the operator's state-changing routes (dead requeue
	// and purge, recovery runs that are not dry runs) with 403 read_only.
	// Enqueue, cancel and reschedule stay open: they are the application's
	// data path.
	ReadOnly bool
	// MaxBodyBytes caps request bodies; larger ones get 413. 0 means
	// DefaultMaxBodyBytes. It should exceed the queue's MaxPayloadBytes
	// times 4/3 (base64), or big payloads get 413 instead of the clearer
	// 400 payload_too_large. Batches share the limit.
	MaxBodyBytes int64
	// Ready answers /readyz; its error message is shown to unauthenticated
	// callers, so it should name the backend and hold no secrets. nil
	// means: Redis answers PING and the SQL pool answers a ping.
	Ready func(ctx context.Context) error
	// Logger gets the API's logs; nil means a new logrus logger on stderr.
	Logger logrus.FieldLogger
	// Metrics, if set, serves GET /metrics (Prometheus), outside auth
	// like the probes: scrapers are configured without the API token.
	Metrics http.Handler
	// Dashboard, if set, serves the dashboard page at GET / and its assets
	// under GET /dashboard/, outside auth: the page holds no data, and asks
	// the operator for the token its /v1 calls need.
	Dashboard http.Handler
	// Schedules lists the periodic schedules for GET /v1/schedules; nil
	// answers an empty list (no schedules configured).
	Schedules Schedules
}

// api is the handler's state: its dependencies, nothing mutable.
type api struct {
	q        *dataplane.Client
	l        *ledger.Ledger   // the home shard: the schema's version
	sh       *ledger.Shards   // every shard: the listings, a row, the health check
	ops      ledgerops.Router // each job's steps on its shard: find, cancel, reschedule
	rec      Recovery
	inspect  *engine.Inspector
	readOnly bool
	maxBody  int64
	ready    func(ctx context.Context) error
	log      logrus.FieldLogger
	auth     *bearerAuth // nil when auth is off

	rateLimits   map[string]queue.RateLimit    // Deps.RateLimits, read only
	attemptLimit func(topic string) int        // Deps.AttemptLimit, may be nil
	cancelWarn   func(topic, id string) string // Deps.CancelWarning, may be nil
	schedules    Schedules                     // nil without periodic schedules
}

// New builds the API handler: the /v1 routes behind auth, the probes in
// front of it, panics turned into 500s and every request logged at debug.
// It fails on missing dependencies and bad module patterns, so a wiring
// mistake stops the program at start instead of at the first request.
func New(d Deps) (http.Handler, error) {
	if d.Queue == nil {
		return nil, errors.New("httpapi: Deps.Queue is required")
	}
	if d.Ledger == nil {
		return nil, errors.New("httpapi: Deps.Ledger is required")
	}
	if d.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("httpapi: Deps.MaxBodyBytes %d: must not be negative", d.MaxBodyBytes)
	}
	var counts engine.Counter = noCounts{} // never a SQL count per request
	if d.SQLCounts != nil {
		counts = d.SQLCounts
	}
	shards := d.Shards
	if shards == nil {
		var err error
		if shards, err = ledger.NewShards(d.Ledger); err != nil {
			return nil, err
		}
	} else if shards.Home() != d.Ledger {
		return nil, errors.New("httpapi: Deps.Shards must start with Deps.Ledger")
	}
	var ops ledgerops.Router = ledgerops.Of(d.Ledger)
	if shards.Len() > 1 {
		var err error
		if ops, err = ledgerops.NewShards(shards.All()...); err != nil {
			return nil, fmt.Errorf("httpapi: %w", err)
		}
	}
	inspect, err := engine.NewShardsInspector(d.Queue.Redis(), shards, d.Queue.Config(), counts)
	if err != nil {
		return nil, err
	}
	a := &api{
		q:         d.Queue,
		l:         d.Ledger,
		sh:        shards,
		ops:       ops,
		rec:       d.Recovery,
		inspect:   inspect,
		readOnly:  d.ReadOnly,
		maxBody:   d.MaxBodyBytes,
		ready:     d.Ready,
		log:       d.Logger,
		schedules: d.Schedules,

		rateLimits:   d.RateLimits,
		attemptLimit: d.AttemptLimit,
		cancelWarn:   d.CancelWarning,
	}
	if a.maxBody == 0 {
		a.maxBody = DefaultMaxBodyBytes
	}
	if a.log == nil {
		a.log = logrus.New()
	}
	if a.ready == nil {
		a.ready = a.pingBackends
	}
	if d.Token != "" {
		auth, err := newBearerAuth(d.Token, a.log)
		if err != nil {
			return nil, err
		}
		a.auth = auth
	}
	if need := int64(a.q.Config().MaxPayloadBytes)*4/3 + 1024; a.maxBody < need {
		a.log.WithFields(logrus.Fields{"max_body_bytes": a.maxBody, "max_payload_bytes": a.q.Config().MaxPayloadBytes}).
			Warn("httpapi: MaxBodyBytes is below the queue's payload limit in base64: large payloads get 413")
	}

	v1 := newJSONMux()
	var patterns []string
	for _, rt := range a.routes() {
		p := rt.method + " " + rt.path
		v1.Handle(p, a.handle(rt))
		patterns = append(patterns, p)
	}
	for i, m := range d.Modules {
		if err := mount(v1, m); err != nil {
			return nil, fmt.Errorf("httpapi: Deps.Modules[%d]: %w", i, err)
		}
		patterns = append(patterns, m.Pattern)
	}
	methodFallbacks(v1, patterns)
	root := newJSONMux()
	for _, p := range a.probes() {
		root.Handle(p.pattern, p.handle)
	}
	var api http.Handler = a.authenticate(bodylessMethods(v1))
	if a.q.Config().Trace {
		api = withTraceParent(api)
	}
	root.Handle("/v1/", api)
	// "/v1" itself is no route; without this ServeMux would redirect it to
	// "/v1/".
	root.Handle("/v1", newJSONMux())
	mountObservability(root, d.Metrics, d.Dashboard)
	return a.recoverPanics(a.accessLog(root)), nil
}

// route is one of the API's own /v1 routes: its method and path, the query
// parameters it takes (any other is refused), and whether its handler reads
// a body (if not, a body is refused).
type route struct {
	method, path string
	params       []string
	body         bool
	handle       func(w http.ResponseWriter, r *http.Request) error
}

// routes lists the API's own /v1 routes; the package doc's table is this
// list.
func (a *api) routes() []route {
	return []route{
		{"POST", "/v1/topics/{topic}/jobs", nil, true, a.enqueue},
		{"POST", "/v1/topics/{topic}/jobs:batch", nil, true, a.enqueueBatch},
		{"GET", "/v1/topics/{topic}/jobs", []string{"state", "offset", "limit", "prefix", "after"}, false, a.listJobs},
		{"GET", "/v1/topics/{topic}/jobs/{id...}", nil, false, a.getJob},
		{"DELETE", "/v1/topics/{topic}/jobs/{id...}", nil, false, a.cancelJob},
		{"PATCH", "/v1/topics/{topic}/jobs/{id...}", nil, true, a.rescheduleJob},
		{"GET", "/v1/topics", nil, false, a.listTopics},
		{"GET", "/v1/topics/{topic}", nil, false, a.topicStats},
		{"GET", "/v1/topics/{topic}/dead", []string{"offset", "limit"}, false, a.listDead},
		{"POST", "/v1/topics/{topic}/dead/requeue", nil, true, a.requeueDead},
		{"POST", "/v1/topics/{topic}/dead/purge", nil, true, a.purgeDead},
		{"DELETE", "/v1/topics/{topic}/dead/jobs/{id...}", nil, false, a.deleteDead},
		{"GET", "/v1/topics/{topic}/history", historyParams, false, a.listHistory},
		{"POST", "/v1/topics/{topic}/pause", nil, false, a.pauseTopic},
		{"POST", "/v1/topics/{topic}/resume", nil, false, a.resumeTopic},
		{"GET", "/v1/topics/{topic}/partitions", nil, false, a.getPartitions},
		{"PUT", "/v1/topics/{topic}/partitions", nil, true, a.setPartitions},
		{"GET", "/v1/ledger", ledgerListParams, false, a.ledgerList},
		{"GET", "/v1/ledger/inflight", ledgerListParams, false, a.ledgerList}, // the older name
		{"GET", "/v1/ledger/stale", []string{"older_than", "after_id", "after_shard", "limit"}, false, a.ledgerStale},
		{"POST", "/v1/recovery/run", []string{"dry_run"}, false, a.runRecovery},
		{"GET", "/v1/recovery/reports", nil, false, a.recoveryReports},
		{"GET", "/v1/schedules", nil, false, a.listSchedules},
		{"GET", "/v1/workers", nil, false, a.listWorkers},
		{"GET", "/v1/schema", nil, false, a.schema},
		{"GET", "/v1/openapi.json", nil, false, a.openapi},
	}
}

// Routes lists the API's own /v1 routes as ServeMux patterns ("GET
// /v1/topics"), modules not included: for documentation and for tests that
// must cover every route.
func Routes() []string {
	var a api
	var out []string
	for _, rt := range a.routes() {
		out = append(out, rt.method+" "+rt.path)
	}
	return out
}

// probe is one of the probes, served outside /v1 and without auth.
type probe struct {
	pattern string
	handle  http.HandlerFunc
}

// probes lists the health probes an orchestrator calls.
func (a *api) probes() []probe {
	return []probe{
		{"GET /healthz", a.healthz},
		{"GET /readyz", a.readyz},
	}
}

// ProbeRoutes lists the probes as ServeMux patterns ("GET /healthz"): with
// Routes, the JSON routes the API serves itself (the contract's tests
// compare them with openapi.json).
func ProbeRoutes() []string {
	var a api
	var out []string
	for _, p := range a.probes() {
		out = append(out, p.pattern)
	}
	return out
}

// handle adapts a route's handler: the query string and the absence of a
// body are checked first, and every error is answered the same way through
// fail.
func (a *api) handle(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := httpjson.Query(r, rt.params...)
		if err == nil && !rt.body {
			err = httpjson.NoBody(r)
		}
		if err == nil {
			err = rt.handle(w, r)
		}
		if err != nil {
			a.fail(w, r, err)
		}
	})
}

// methodFallbacks registers, for each path of patterns that carries a
// method, a method-less pattern that answers 405 with the path's methods in
// Allow. Without it, ServeMux answers a path one slash short of a
// {id...} route with a redirect (DELETE /v1/topics/t/jobs went to
// .../jobs/), and a method the path does not take elsewhere with a plain
// 405. Paths that already have a method-less pattern (a module's own
// fallbacks) are left alone.
func methodFallbacks(mux jsonMux, patterns []string) {
	methods := map[string][]string{}
	var paths []string
	methodless := map[string]bool{}
	for _, p := range patterns {
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			methodless[p] = true
			continue
		}
		path = strings.TrimLeft(path, " \t")
		if methods[path] == nil {
			paths = append(paths, path)
		}
		methods[path] = append(methods[path], method)
		if method == http.MethodGet {
			methods[path] = append(methods[path], http.MethodHead)
		}
	}
	for _, path := range paths {
		if methodless[path] {
			continue
		}
		allow := methods[path]
		slices.Sort(allow)
		allow = slices.Compact(allow)
		header := strings.Join(allow, ", ")
		mux.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			httpjson.WriteError(w, r, httpjson.MethodNotAllowed(w, r, header))
		}))
	}
}

// bodylessMethods refuses a body on a request whose method takes none (GET,
// HEAD, DELETE, OPTIONS) on every /v1 route, modules included: such a body
// would be ignored, and what it asks would silently not happen.
func bodylessMethods(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodDelete, http.MethodOptions:
			if err := httpjson.NoBody(r); err != nil {
				httpjson.WriteError(w, r, err)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// mount registers a module, refusing patterns outside /v1 (they would
// escape auth) and turning ServeMux's panic on a conflicting pattern into an
// error.
func mount(mux jsonMux, m Module) (err error) {
	if m.Handler == nil {
		return fmt.Errorf("pattern %q: nil Handler", m.Pattern)
	}
	path := m.Pattern
	if i := strings.IndexAny(path, " \t"); i >= 0 { // "METHOD /path"
		path = strings.TrimLeft(path[i:], " \t")
	}
	if !strings.HasPrefix(path, "/v1/") {
		return fmt.Errorf("pattern %q: the path must start with /v1/ (no host), so it is behind auth", m.Pattern)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("pattern %q: %v", m.Pattern, p)
		}
	}()
	mux.Handle(m.Pattern, m.Handler)
	return nil
}

// jsonMux is a ServeMux whose own 404 and 405 answers (no route, or a route
// without this method) are the API's JSON errors. Answers of matched
// routes, modules included, pass untouched: every handler is registered
// wrapped in matched, which hands it the connection's own writer back.
// Routing a request once is the point: asking ServeMux.Handler for the
// pattern first, then ServeMux.ServeHTTP, matched every path twice.
type jsonMux struct{ mux *http.ServeMux }

func newJSONMux() jsonMux { return jsonMux{http.NewServeMux()} }

// Handle registers h for pattern; it panics as ServeMux.Handle does.
func (j jsonMux) Handle(pattern string, h http.Handler) { j.mux.Handle(pattern, matched{h}) }

func (j jsonMux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p := r.URL.EscapedPath(); r.Method != http.MethodConnect && p != cleanPath(p) {
		// ServeMux would redirect to the cleaned path, which for a job id
		// with an empty or dot segment is another job's.
		writeError(w, r, newError(http.StatusNotFound, CodeNotFound, "",
			fmt.Sprintf("no route for %s %s: the path has empty or dot segments (percent-encode '/' inside an id as %%2F)", r.Method, p)))
		return
	}
	j.mux.ServeHTTP(&muxErrorWriter{ResponseWriter: w, r: r}, r)
}

// matched is a handler of a jsonMux: what reaches it is a matched route,
// whose answer is its own, so it gets the writer muxErrorWriter wraps.
type matched struct{ h http.Handler }

func (m matched) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if mw, ok := w.(*muxErrorWriter); ok {
		w = mw.ResponseWriter
	}
	m.h.ServeHTTP(w, r)
}

// cleanPath is the path ServeMux matches: p with its dot segments and
// doubled slashes resolved, a trailing slash kept.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// muxErrorWriter replaces ServeMux's plain-text 404 and 405 bodies with JSON
// errors; anything else (a redirect) passes through.
type muxErrorWriter struct {
	http.ResponseWriter
	r       *http.Request
	swallow bool
}

func (m *muxErrorWriter) WriteHeader(status int) {
	var e *apiError
	switch status {
	case http.StatusNotFound:
		e = newError(status, CodeNotFound, "", fmt.Sprintf("no route for %s %s", m.r.Method, m.r.URL.Path))
	case http.StatusMethodNotAllowed:
		e = newError(status, CodeMethodNotAllowed, "",
			fmt.Sprintf("method %s not allowed on %s; allowed: %s", m.r.Method, m.r.URL.Path, m.Header().Get("Allow")))
	default:
		m.ResponseWriter.WriteHeader(status)
		return
	}
	m.Header().Del("Content-Length")
	m.swallow = true
	writeError(m.ResponseWriter, m.r, e)
}

func (m *muxErrorWriter) Write(p []byte) (int, error) {
	if m.swallow {
		return len(p), nil
	}
	return m.ResponseWriter.Write(p)
}

func (m *muxErrorWriter) Unwrap() http.ResponseWriter { return m.ResponseWriter }

// capped shows v's max_attempts as its topic's configured limit caps it
// (JobView.CapAttempts).
func (a *api) capped(v *JobView) {
	if a.attemptLimit != nil {
		v.CapAttempts(a.attemptLimit(v.Topic))
	}
}

package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
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
	Queue *queue.Client
	// Ledger is the SQL ledger: the audit routes read it, and cancelling a
	// job that waits for a retry deletes its row (or the recoverer would
	// bring the job back). Required.
	Ledger *ledger.Ledger
	// Recovery runs the recoverer; nil means its routes answer 503
	// not_configured (a process that runs no recoverer).
	Recovery Recovery
	// Modules are extra /v1 handlers, behind auth like the rest of /v1.
	Modules []Module
	// Token is the bearer token every /v1 route wants; "" turns auth off
	// (fine on 127.0.0.1, the default address, and nowhere else).
	Token string
	// ReadOnly refuses the operator's state-changing routes (dead requeue
	// and purge, recovery runs that are not dry runs) with 403 read_only.
	// Enqueue and cancel stay open: they are the application's data path.
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
}

// api is the handler's state: its dependencies, nothing mutable.
type api struct {
	q        *queue.Client
	l        *ledger.Ledger
	rec      Recovery
	readOnly bool
	maxBody  int64
	ready    func(ctx context.Context) error
	log      logrus.FieldLogger
	auth     *bearerAuth // nil when auth is off
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
	a := &api{
		q:        d.Queue,
		l:        d.Ledger,
		rec:      d.Recovery,
		readOnly: d.ReadOnly,
		maxBody:  d.MaxBodyBytes,
		ready:    d.Ready,
		log:      d.Logger,
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

	v1 := http.NewServeMux()
	a.routes(v1)
	for i, m := range d.Modules {
		if err := mount(v1, m); err != nil {
			return nil, fmt.Errorf("httpapi: Deps.Modules[%d]: %w", i, err)
		}
	}
	root := http.NewServeMux()
	root.HandleFunc("GET /healthz", a.healthz)
	root.HandleFunc("GET /readyz", a.readyz)
	root.Handle("/v1/", a.authenticate(jsonErrors{v1}))
	mountObservability(root, d.Metrics, d.Dashboard)
	return a.recoverPanics(a.accessLog(jsonErrors{root})), nil
}

// routes registers the API's own /v1 routes.
func (a *api) routes(mux *http.ServeMux) {
	mux.Handle("POST /v1/topics/{topic}/jobs", a.handle(a.enqueue))
	mux.Handle("POST /v1/topics/{topic}/jobs:batch", a.handle(a.enqueueBatch))
	mux.Handle("GET /v1/topics/{topic}/jobs", a.handle(a.listJobs))
	mux.Handle("GET /v1/topics/{topic}/jobs/{id...}", a.handle(a.getJob))
	mux.Handle("DELETE /v1/topics/{topic}/jobs/{id...}", a.handle(a.cancelJob))
	mux.Handle("GET /v1/topics", a.handle(a.listTopics))
	mux.Handle("GET /v1/topics/{topic}", a.handle(a.topicStats))
	mux.Handle("GET /v1/topics/{topic}/dead", a.handle(a.listDead))
	mux.Handle("POST /v1/topics/{topic}/dead/requeue", a.handle(a.requeueDead))
	mux.Handle("POST /v1/topics/{topic}/dead/purge", a.handle(a.purgeDead))
	mux.Handle("GET /v1/ledger/inflight", a.handle(a.ledgerInFlight))
	mux.Handle("GET /v1/ledger/stale", a.handle(a.ledgerStale))
	mux.Handle("POST /v1/recovery/run", a.handle(a.runRecovery))
	mux.Handle("GET /v1/recovery/reports", a.handle(a.recoveryReports))
}

// handle adapts a handler that returns its error, so every route answers
// errors the same way through fail.
func (a *api) handle(f func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := f(w, r); err != nil {
			a.fail(w, r, err)
		}
	})
}

// mount registers a module, refusing patterns outside /v1 (they would
// escape auth) and turning ServeMux's panic on a conflicting pattern into an
// error.
func mount(mux *http.ServeMux, m Module) (err error) {
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

// jsonErrors serves mux, and rewrites the 404 and 405 answers ServeMux makes
// itself (no route, or a route without this method) into the API's JSON
// error shape. Answers of matched routes, modules included, pass untouched.
type jsonErrors struct{ mux *http.ServeMux }

func (j jsonErrors) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, pattern := j.mux.Handler(r)
	if pattern != "" {
		j.mux.ServeHTTP(w, r)
		return
	}
	h.ServeHTTP(&muxErrorWriter{ResponseWriter: w, r: r}, r)
}

// muxErrorWriter replaces ServeMux's plain-text 404 and 405 bodies with JSON
// errors; anything else (a redirect to a cleaned path) passes through.
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
	writeError(m.ResponseWriter, e)
}

func (m *muxErrorWriter) Write(p []byte) (int, error) {
	if m.swallow {
		return len(p), nil
	}
	return m.ResponseWriter.Write(p)
}

func (m *muxErrorWriter) Unwrap() http.ResponseWriter { return m.ResponseWriter }

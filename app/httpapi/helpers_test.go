package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"
	"gorm.io/gorm"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// backend is one pair of stores the API runs on: production's (real Redis
// and MariaDB) and the embedded mode's (miniredis and SQLite).
type backend struct {
	name  string
	redis func(testing.TB) (redis.UniversalClient, string)
	sql   func(testing.TB) *gorm.DB
}

var backends = []backend{
	{"redis+mariadb", testenv.Redis, testenv.MySQL},
	{"miniredis+sqlite", testenv.MiniRedis, testenv.SQLite},
}

// embedded is the cheap backend, for tests about HTTP rather than storage.
var embedded = backends[1]

// env is one API over a real listener, on its own Redis namespace and its
// own database.
type env struct {
	q     *dataplane.Client
	l     *ledger.Ledger
	rdb   redis.UniversalClient
	ns    string
	srv   *httptest.Server
	token string
	logs  *testenv.SyncBuffer
}

// setup configures an env before its handler is built.
type setup struct {
	qcfg queue.Config
	deps httpapi.Deps
}

// newEnv builds the API on b, applying opts to its config and deps.
func newEnv(t *testing.T, b backend, opts ...func(*setup)) *env {
	t.Helper()
	rdb, ns := b.redis(t)
	db := b.sql(t)
	var s setup
	for _, o := range opts {
		o(&s)
	}
	s.qcfg.Namespace = ns
	l, err := ledger.New(db, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Migrate(testenv.Context(t)); err != nil {
		t.Fatal(err)
	}
	if len(s.qcfg.TopicDurability) > 0 || s.qcfg.Durability == queue.DurabilityDurable {
		s.qcfg.Store = l // durable topics commit to the ledger
	}
	q, err := dataplane.New(rdb, s.qcfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{q: q, l: l, rdb: rdb, ns: ns, token: s.deps.Token, logs: &testenv.SyncBuffer{}}
	s.deps.Queue, s.deps.Ledger = q, l
	s.deps.Logger = testLogger(e.logs)
	h, err := httpapi.New(s.deps)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	return e
}

// forEachBackend runs f as a parallel subtest on a fresh env of every
// backend.
func forEachBackend(t *testing.T, f func(t *testing.T, e *env), opts ...func(*setup)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, newEnv(t, b, opts...))
		})
	}
}

// withDurable makes topics durable, with the given horizon.
func withDurable(horizon time.Duration, topics ...string) func(*setup) {
	return func(s *setup) {
		s.qcfg.Horizon = horizon
		s.qcfg.TopicDurability = map[string]queue.Durability{}
		for _, t := range topics {
			s.qcfg.TopicDurability[t] = queue.DurabilityDurable
		}
	}
}

func withSQLCounts(c httpapi.SQLCounter) func(*setup) { return func(s *setup) { s.deps.SQLCounts = c } }

func withToken(tok string) func(*setup) { return func(s *setup) { s.deps.Token = tok } }
func withReadOnly() func(*setup)        { return func(s *setup) { s.deps.ReadOnly = true } }
func withRecovery(r httpapi.Recovery) func(*setup) {
	return func(s *setup) { s.deps.Recovery = r }
}

// testLogger logs everything, debug included (so those paths run), into
// buf, where a test can look for what must never be logged.
func testLogger(buf *testenv.SyncBuffer) logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(buf)
	l.SetLevel(logrus.DebugLevel)
	return l
}

// req is one request to send. A body is sent as application/json unless
// ctype says otherwise; the env's token goes along unless auth is set.
type req struct {
	method, path string
	body         string
	ctype        *string
	auth         *string
	chunked      bool // hide the length, so the body goes chunked
	header       http.Header
}

// resp is what came back.
type resp struct {
	status int
	header http.Header
	body   []byte
}

func (e *env) send(t testing.TB, rq req) resp {
	t.Helper()
	var body io.Reader
	if rq.body != "" {
		body = strings.NewReader(rq.body)
		if rq.chunked {
			body = io.MultiReader(body)
		}
	}
	r, err := http.NewRequestWithContext(testenv.Context(t), rq.method, e.srv.URL+rq.path, body)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case rq.ctype != nil:
		if *rq.ctype != "" {
			r.Header.Set("Content-Type", *rq.ctype)
		}
	case rq.body != "":
		r.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range rq.header {
		r.Header[k] = vs
	}
	switch {
	case rq.auth != nil:
		if *rq.auth != "" {
			r.Header.Set("Authorization", *rq.auth)
		}
	case e.token != "":
		r.Header.Set("Authorization", "Bearer "+e.token)
	}
	res, err := e.srv.Client().Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v", rq.method, rq.path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", rq.method, rq.path, err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

func (e *env) get(t testing.TB, path string) resp {
	t.Helper()
	return e.send(t, req{method: "GET", path: path})
}
func (e *env) del(t testing.TB, path string) resp {
	t.Helper()
	return e.send(t, req{method: "DELETE", path: path})
}
func (e *env) post(t testing.TB, path, body string) resp {
	t.Helper()
	return e.send(t, req{method: "POST", path: path, body: body})
}

func ptr[T any](v T) *T { return &v }

// decode reads a JSON answer into a T, failing on unknown fields so the
// tests notice when the API's shape drifts from its exported types.
func decode[T any](t testing.TB, r resp) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %s into %T: %v", r.body, v, err)
	}
	return v
}

// expect fails unless r has status.
func expect(t testing.TB, r resp, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
}

// expectError fails unless r is an error answer with status, code and
// field.
func expectError(t testing.TB, r resp, status int, code, field string) httpapi.ErrorDetail {
	t.Helper()
	expect(t, r, status)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("error with Content-Type %q, want JSON; body %s", ct, r.body)
	}
	e := decode[httpapi.ErrorResponse](t, r).Error
	if e.Code != code || e.Field != field || e.Message == "" {
		t.Fatalf("error %+v, want code %q field %q and a message", e, code, field)
	}
	return e
}

// keys lists the Redis keys in the env's namespace, sorted.
func (e *env) keys(t testing.TB) []string {
	t.Helper()
	ks, err := e.rdb.Keys(testenv.Context(t), e.ns+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ks)
	return ks
}

// claimAll claims every due job of topic through the queue, as a worker
// would.
func (e *env) claimAll(t testing.TB, topic string) []*queue.Job {
	t.Helper()
	c, err := e.q.Claim(testenv.Context(t), topic, 1000, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return c.Jobs
}

// bury claims every due job of topic and buries it with reason.
func (e *env) bury(t testing.TB, topic, reason string) int {
	t.Helper()
	jobs := e.claimAll(t, topic)
	reqs := make([]queue.DeadJob, len(jobs))
	for i, j := range jobs {
		reqs[i] = queue.DeadJob{Job: j, Error: reason}
	}
	n, _, err := e.q.Bury(testenv.Context(t), reqs)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

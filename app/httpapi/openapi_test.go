package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"gorm.io/gorm"

	"github.com/delayq/delayq/app/dashboard"
	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/app/metrics"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/scheduler"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/jobs/orderclose"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/queue/periodic"
	"github.com/delayq/delayq/recovery"
)

// spec is the part of openapi.json the tests read.
type spec struct {
	Paths map[string]map[string]*specOp `json:"paths"`
	// Components' responses, by name, for the $refs of operations.
	Components struct {
		Responses  map[string]*specResponse `json:"responses"`
		Parameters map[string]*specParam    `json:"parameters"`
	} `json:"components"`
}

type specOp struct {
	OperationID string                   `json:"operationId"`
	Parameters  []*specParam             `json:"parameters"`
	RequestBody *json.RawMessage         `json:"requestBody"`
	Responses   map[string]*specResponse `json:"responses"`
	Security    *[]any                   `json:"security"`
}

type specParam struct {
	Ref    string          `json:"$ref"`
	Name   string          `json:"name"`
	In     string          `json:"in"`
	Schema json.RawMessage `json:"schema"`
}

type specResponse struct {
	Ref     string `json:"$ref"`
	Content map[string]struct {
		Schema struct {
			Ref string `json:"$ref"`
		} `json:"schema"`
	} `json:"content"`
}

func loadSpec(t testing.TB) *spec {
	t.Helper()
	var s spec
	if err := json.Unmarshal(httpapi.OpenAPI(), &s); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return &s
}

// params returns op's parameters with their $refs resolved.
func (s *spec) params(op *specOp) []*specParam {
	var out []*specParam
	for _, p := range op.Parameters {
		if name, ok := strings.CutPrefix(p.Ref, "#/components/parameters/"); ok {
			p = s.Components.Parameters[name]
		}
		out = append(out, p)
	}
	return out
}

// schemaOf returns the $ref of the JSON schema of op's answer with status.
func (s *spec) schemaOf(op *specOp, status string) string {
	r := op.Responses[status]
	if name, ok := strings.CutPrefix(r.Ref, "#/components/responses/"); ok {
		r = s.Components.Responses[name]
	}
	if r == nil {
		return ""
	}
	return r.Content["application/json"].Schema.Ref
}

// servedRoutes lists what the program serves, from the code: the API's own
// routes and probes, the orders module's and the dashboard's, as "METHOD
// /path" with OpenAPI's path templates ({id...} is {id}).
func servedRoutes() []string {
	all := slices.Concat(httpapi.Routes(), httpapi.ProbeRoutes(), orderclose.Routes(), []string{dashboard.SeriesPattern, dashboard.MinutesPattern})
	for i, r := range all {
		all[i] = strings.ReplaceAll(r, "...}", "}")
	}
	slices.Sort(all)
	return all
}

// specRoutes lists the spec's operations the same way.
func (s *spec) routes() []string {
	var out []string
	for path, ops := range s.Paths {
		for method := range ops {
			out = append(out, strings.ToUpper(method)+" "+path)
		}
	}
	slices.Sort(out)
	return out
}

func (s *spec) op(route string) *specOp {
	method, path, _ := strings.Cut(route, " ")
	return s.Paths[path][strings.ToLower(method)]
}

// TestOpenAPIRoutes: the spec describes exactly the routes the code
// registers, no more, no less.
func TestOpenAPIRoutes(t *testing.T) {
	t.Parallel()
	s := loadSpec(t)
	served, described := servedRoutes(), s.routes()
	for _, r := range served {
		if !slices.Contains(described, r) {
			t.Errorf("%s is served but openapi.json does not describe it", r)
		}
	}
	for _, r := range described {
		if !slices.Contains(served, r) {
			t.Errorf("openapi.json describes %s, which nothing serves", r)
		}
	}
	if !slices.Contains(served, "GET /v1/openapi.json") {
		t.Error("the spec itself is not served")
	}
}

var pathParam = regexp.MustCompile(`\{([^}]+)\}`)

// TestOpenAPIParameters: each operation's path parameters are its
// pattern's; every query parameter the spec gives is one the handler takes
// (the API's own routes are compared both ways in
// TestOpenAPIQueryParameters, inside the package).
func TestOpenAPIParameters(t *testing.T) {
	t.Parallel()
	s := loadSpec(t)
	for _, route := range servedRoutes() {
		op := s.op(route)
		if op == nil {
			continue // TestOpenAPIRoutes says so
		}
		var want, got []string
		for _, m := range pathParam.FindAllStringSubmatch(route, -1) {
			want = append(want, m[1])
		}
		for _, p := range s.params(op) {
			if p.In == "path" {
				got = append(got, p.Name)
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(want, got) {
			t.Errorf("%s: path parameters %q in openapi.json, %q in the pattern", route, got, want)
		}
	}
	// Every documented query parameter is taken: sent alone, it is never
	// refused as unknown.
	e := newContractEnv(t, contractUp)
	for _, route := range servedRoutes() {
		op := s.op(route)
		if op == nil {
			continue
		}
		method, path, _ := strings.Cut(route, " ")
		for _, p := range s.params(op) {
			if p.In != "query" {
				continue
			}
			r := e.raw(t, method, fillPath(path)+"?"+p.Name+"="+url.QueryEscape(sampleValue(t, p.Schema)), "", nil)
			if r.status == http.StatusBadRequest && strings.Contains(string(r.body), `"unknown_field"`) {
				t.Errorf("%s: the documented query parameter %s is refused: %s", route, p.Name, r.body)
			}
		}
	}
}

// sampleValue is a value of a parameter's schema, for a query string.
func sampleValue(t testing.TB, raw json.RawMessage) string {
	var sch struct {
		Type    string `json:"type"`
		Enum    []any  `json:"enum"`
		Minimum *int64 `json:"minimum"`
	}
	if err := json.Unmarshal(raw, &sch); err != nil {
		t.Fatal(err)
	}
	switch {
	case len(sch.Enum) > 0:
		return fmt.Sprint(sch.Enum[0])
	case sch.Type == "integer" && sch.Minimum != nil:
		return fmt.Sprint(*sch.Minimum)
	case sch.Type == "integer":
		return "1"
	case sch.Type == "boolean":
		return "true"
	}
	return "a"
}

// fillPath puts sample values in a path template.
func fillPath(p string) string {
	return strings.NewReplacer("{topic}", "t", "{id}", "nope", "{no}", "nope", "{sku}", "nope").Replace(p)
}

// contractToken is the token of the contract's servers.
const contractToken = "openapi-test-token-0123456789"

// contractEnv is the program's API as `delayq serve` assembles it: the
// API's own routes, the orders module and the dashboard's series, behind a
// token.
type contractEnv struct {
	srv    *httptest.Server
	q      *dataplane.Client
	l      *ledger.Ledger
	rdb    redis.UniversalClient
	ns     string
	orders *orderclose.Service
}

// contractMode says which backends the env has and how it runs.
type contractMode int

const (
	contractUp       contractMode = iota // real Redis and MariaDB
	contractReadOnly                     // the same, http.read_only
	contractDown                         // Redis and SQL refuse connections, no recoverer
)

// stubSource feeds the dashboard's series nothing: its shape is what is
// checked, not its numbers.
type stubSource struct{}

func (stubSource) SampleLive() map[string]metrics.TopicSample   { return nil }
func (stubSource) State(context.Context) (metrics.State, error) { return metrics.State{}, nil }
func (stubSource) RelayState() (metrics.RelayState, bool)       { return metrics.RelayState{}, false }
func (stubSource) Targets() map[string]metrics.TargetState      { return nil }

// reportRecovery answers runs with a recovery.Report, the type the
// program's recoverer answers with; failWith makes runs fail with it,
// returning the report of how far they got.
type reportRecovery struct {
	mu       sync.Mutex
	reports  []recovery.Report
	failWith error
}

func (r *reportRecovery) Run(_ context.Context, dryRun bool) (any, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := recovery.Report{Start: time.Now().UTC(), Duration: time.Millisecond, Trigger: "manual", Recoverer: "test:1",
		DryRun: dryRun, Topics: 1, Scanned: 2, StillTracked: 1, Reenqueued: 1,
		ByTopic: map[string]recovery.TopicCounts{"t": {Scanned: 2, StillTracked: 1, Reenqueued: 1}}, Sample: []string{"t/a"}}
	r.reports = append([]recovery.Report{rep}, r.reports...)
	return rep, r.failWith
}

func (r *reportRecovery) Reports() any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reports)
}

func newContractEnv(t *testing.T, mode contractMode) *contractEnv {
	t.Helper()
	var (
		rdb redis.UniversalClient
		ns  string
		db  *gorm.DB
	)
	if mode == contractDown {
		c := redis.NewClient(&redis.Options{Addr: testenv.RefusedAddr(t), MaxRetries: -1, DialerRetries: 1})
		t.Cleanup(func() { _ = c.Close() })
		rdb, ns, db = c, "down", unreachableSQL(t)
	} else {
		rdb, ns = testenv.Redis(t)
		db = testenv.MySQL(t)
	}
	ctx := testenv.Context(t)
	l, err := ledger.New(db, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns, Store: l, Horizon: time.Hour,
		TopicDurability: map[string]queue.Durability{"dur": queue.DurabilityDurable, orderclose.Topic: queue.DurabilityDurable},
		TopicUniqueFor:  map[string]time.Duration{"uq": time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	if mode != contractDown {
		if err := l.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if err := orderclose.Migrate(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	e := &contractEnv{q: q, l: l, rdb: rdb, ns: ns}
	e.orders, err = orderclose.New(l, q, orderclose.Config{Logger: testenv.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	dash, err := dashboard.New(dashboard.Config{Source: stubSource{}, Minutes: q, Auth: true, Logger: testenv.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	orders := orderclose.NewHTTPHandler(e.orders)
	modules := []httpapi.Module{{Pattern: dashboard.SeriesPattern, Handler: dash.SeriesHandler()},
		{Pattern: dashboard.MinutesPattern, Handler: dash.MinutesHandler()}}
	for _, p := range orders.Patterns() {
		modules = append(modules, httpapi.Module{Pattern: p, Handler: orders})
	}
	deps := httpapi.Deps{Queue: q, Ledger: l, Modules: modules, Token: contractToken, Logger: testenv.QuietLogger(),
		ReadOnly: mode == contractReadOnly}
	switch mode {
	case contractDown:
		deps.Schedules = failingSchedules{}
	default:
		deps.Recovery = &reportRecovery{}
		sched, err := scheduler.New(q, ledgerops.Of(l), []periodic.Schedule{
			{Name: "hourly", Spec: "0 0 * * * *", Topic: "t"},
			{Name: "daily", Spec: "@daily", Topic: "dur", Missed: periodic.MissedOnce},
		}, periodic.Options{})
		if err != nil {
			t.Fatal(err)
		}
		deps.Schedules = sched
	}
	h, err := httpapi.New(deps)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	return e
}

// raw sends a request with the token (unless header sets Authorization,
// "" for none) and a JSON body when body is not "".
func (e *contractEnv) raw(t testing.TB, method, path, body string, header map[string]string) resp {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequestWithContext(testenv.Context(t), method, e.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	r.Header.Set("Authorization", "Bearer "+contractToken)
	for k, v := range header {
		if v == "" {
			r.Header.Del(k)
			continue
		}
		r.Header.Set(k, v)
	}
	res, err := e.srv.Client().Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

// contract validates answers against openapi.json and counts which
// documented answers were seen.
type contract struct {
	s       *spec
	schemas map[string]*jsonschema.Schema
	seen    map[string]bool // "METHOD /path STATUS"
}

func newContract(t *testing.T) *contract {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(httpapi.OpenAPI()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	const base = "https://delayq.invalid/openapi.json"
	if err := c.AddResource(base, doc); err != nil {
		t.Fatal(err)
	}
	k := &contract{s: loadSpec(t), schemas: map[string]*jsonschema.Schema{}, seen: map[string]bool{}}
	for _, route := range k.s.routes() {
		op := k.s.op(route)
		for status := range op.Responses {
			ref := k.s.schemaOf(op, status)
			if !strings.HasPrefix(ref, "#/components/schemas/") {
				t.Fatalf("%s %s: the answer's schema is %q, want a $ref to #/components/schemas/", route, status, ref)
			}
			if k.schemas[ref] == nil {
				sch, err := c.Compile(base + ref)
				if err != nil {
					t.Fatalf("compiling %s: %v", ref, err)
				}
				k.schemas[ref] = sch
			}
		}
	}
	return k
}

// check validates r, the answer of route (its spec form, "GET
// /v1/topics/{topic}"): its status must be documented and its body match
// the status's schema.
func (k *contract) check(t testing.TB, route string, r resp) {
	t.Helper()
	op := k.s.op(route)
	if op == nil {
		t.Fatalf("%s: not in openapi.json", route)
	}
	status := fmt.Sprint(r.status)
	if op.Responses[status] == nil {
		t.Errorf("%s answered %s, which openapi.json does not document: %s", route, status, r.body)
		return
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s %s: Content-Type %q", route, status, ct)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.body))
	if err != nil {
		t.Errorf("%s %s: not JSON: %v: %s", route, status, err, r.body)
		return
	}
	if err := k.schemas[k.s.schemaOf(op, status)].Validate(v); err != nil {
		t.Errorf("%s %s: the answer does not match openapi.json: %v\nbody: %s", route, status, err, r.body)
	}
	k.seen[route+" "+status] = true
}

// call sends a request for route on e and checks its answer, which must
// have status want (0: any documented one).
func (k *contract) call(t testing.TB, e *contractEnv, route, path, body string, want int, header ...string) resp {
	t.Helper()
	method, _, _ := strings.Cut(route, " ")
	h := map[string]string{}
	for i := 0; i+1 < len(header); i += 2 {
		h[header[i]] = header[i+1]
	}
	r := e.raw(t, method, path, body, h)
	if want != 0 && r.status != want {
		t.Errorf("%s %s: status %d, want %d: %s", method, path, r.status, want, r.body)
	}
	k.check(t, route, r)
	return r
}

// TestOpenAPIAnswers calls every route with good and bad input, on real
// Redis and MariaDB, read-only, and with both backends down; every answer
// must match openapi.json, and every answer openapi.json documents must
// have been given.
func TestOpenAPIAnswers(t *testing.T) {
	t.Parallel()
	k := newContract(t)
	up := newContractEnv(t, contractUp)
	ctx := testenv.Context(t)

	// Answers every route gives: no token (401) and an unknown query
	// parameter (400); a body route's body too large (413) or not JSON
	// (415). The probes take no token.
	for _, route := range servedRoutes() {
		_, path, _ := strings.Cut(route, " ")
		path = fillPath(path)
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		k.call(t, up, route, path, "", http.StatusUnauthorized, "Authorization", "")
		k.call(t, up, route, path+"?openapi_unknown=1", "", http.StatusBadRequest)
		if k.s.op(route).RequestBody != nil {
			k.call(t, up, route, path, `{"x":"`+strings.Repeat("x", httpapi.DefaultMaxBodyBytes)+`"}`, http.StatusRequestEntityTooLarge)
			k.call(t, up, route, path, `{}`, http.StatusUnsupportedMediaType, "Content-Type", "text/plain")
		}
	}

	// Jobs.
	const (
		enqueue    = "POST /v1/topics/{topic}/jobs"
		batch      = "POST /v1/topics/{topic}/jobs:batch"
		list       = "GET /v1/topics/{topic}/jobs"
		get        = "GET /v1/topics/{topic}/jobs/{id}"
		cancel     = "DELETE /v1/topics/{topic}/jobs/{id}"
		reschedule = "PATCH /v1/topics/{topic}/jobs/{id}"
	)
	k.call(t, up, enqueue, "/v1/topics/t/jobs", `{"id":"j1","payload":{"a":1},"delay_ms":60000}`, http.StatusAccepted)
	k.call(t, up, enqueue, "/v1/topics/t/jobs", `{"id":"j1","payload":{"a":1},"delay_ms":60000}`, http.StatusOK)
	k.call(t, up, enqueue, "/v1/topics/t/jobs", fmt.Sprintf(`{"id":"bin","payload_base64":"AAE=","run_at":%d}`, time.Now().Add(time.Hour).UnixMilli()), http.StatusAccepted)
	k.call(t, up, enqueue, "/v1/topics/dur/jobs", `{"id":"d1","delay_ms":7200000,"max_attempts":3}`, http.StatusAccepted)
	k.call(t, up, enqueue, "/v1/topics/t/jobs", `{"id":"a b"}`, http.StatusBadRequest)
	k.call(t, up, batch, "/v1/topics/t/jobs:batch", `{"jobs":[{"id":"b1"},{"id":"j1"},{"id":"a b"}]}`, http.StatusOK)
	k.call(t, up, batch, "/v1/topics/t/jobs:batch", `{"jobs":[]}`, 0)
	// A finished job's id inside the topic's uniqueness window.
	k.call(t, up, enqueue, "/v1/topics/uq/jobs", `{"id":"u1"}`, http.StatusAccepted)
	if c, err := up.q.Claim(ctx, "uq", 1, time.Minute); err != nil || len(c.Jobs) != 1 {
		t.Fatalf("claim uq: %v", err)
	} else if _, err := up.q.Ack(ctx, []queue.Ref{c.Jobs[0].Ref()}); err != nil {
		t.Fatal(err)
	}
	k.call(t, up, enqueue, "/v1/topics/uq/jobs", `{"id":"u1"}`, http.StatusOK)
	k.call(t, up, batch, "/v1/topics/uq/jobs:batch", `{"jobs":[{"id":"u1"}]}`, http.StatusOK)
	k.call(t, up, "GET /v1/topics/{topic}", "/v1/topics/uq", "", http.StatusOK)
	for _, state := range []string{"waiting", "retrying", "in_flight", "dead", "waiting_sql"} {
		topic := "t"
		if state == "waiting_sql" || state == "retrying" {
			topic = "dur"
		}
		k.call(t, up, list, "/v1/topics/"+topic+"/jobs?state="+state, "", http.StatusOK)
	}
	k.call(t, up, list, "/v1/topics/dur/jobs?prefix=d", "", http.StatusOK)
	k.call(t, up, list, "/v1/topics/t/jobs?state=nope", "", http.StatusBadRequest)
	k.call(t, up, get, "/v1/topics/t/jobs/j1", "", http.StatusOK)
	k.call(t, up, get, "/v1/topics/t/jobs/bin", "", http.StatusOK)
	k.call(t, up, get, "/v1/topics/dur/jobs/d1", "", http.StatusOK)
	k.call(t, up, get, "/v1/topics/t/jobs/nope", "", http.StatusNotFound)
	k.call(t, up, get, "/v1/topics/t/jobs/a%20b", "", http.StatusBadRequest)
	k.call(t, up, reschedule, "/v1/topics/t/jobs/j1", `{"delay_ms":120000}`, http.StatusOK)
	k.call(t, up, reschedule, "/v1/topics/t/jobs/nope", `{"delay_ms":1}`, http.StatusNotFound)
	k.call(t, up, reschedule, "/v1/topics/t/jobs/j1", `{}`, http.StatusBadRequest)
	// A job a worker holds.
	k.call(t, up, enqueue, "/v1/topics/busy/jobs", `{"id":"h1"}`, http.StatusAccepted)
	if c, err := up.q.Claim(ctx, "busy", 10, time.Hour); err != nil || len(c.Jobs) != 1 {
		t.Fatalf("claim: %v %+v", err, c)
	}
	k.call(t, up, list, "/v1/topics/busy/jobs?state=in_flight", "", http.StatusOK)
	k.call(t, up, get, "/v1/topics/busy/jobs/h1", "", http.StatusOK)
	k.call(t, up, reschedule, "/v1/topics/busy/jobs/h1", `{"shift_ms":1000}`, http.StatusConflict)
	k.call(t, up, cancel, "/v1/topics/busy/jobs/h1", "", http.StatusAccepted) // its run's cancel asked
	k.call(t, up, cancel, "/v1/topics/t/jobs/j1", "", http.StatusOK)
	k.call(t, up, cancel, "/v1/topics/t/jobs/nope", "", http.StatusNotFound)
	k.call(t, up, cancel, "/v1/topics/t/jobs/a%20b", "", http.StatusBadRequest)

	// Topics, pause.
	k.call(t, up, "GET /v1/topics", "/v1/topics", "", http.StatusOK)
	k.call(t, up, "GET /v1/topics/{topic}", "/v1/topics/dur", "", http.StatusOK)
	k.call(t, up, "GET /v1/topics/{topic}", "/v1/topics/a%20b", "", http.StatusBadRequest)
	k.call(t, up, "POST /v1/topics/{topic}/pause", "/v1/topics/t/pause", "", http.StatusOK)
	k.call(t, up, "GET /v1/topics/{topic}/partitions", "/v1/topics/parts/partitions", "", http.StatusOK)
	k.call(t, up, "PUT /v1/topics/{topic}/partitions", "/v1/topics/parts/partitions", `{"partitions":4}`, http.StatusOK)
	k.call(t, up, "PUT /v1/topics/{topic}/partitions", "/v1/topics/parts/partitions", `{"partitions":2}`, http.StatusBadRequest)
	k.call(t, up, "PUT /v1/topics/{topic}/partitions", "/v1/topics/parts/partitions", `{}`, http.StatusBadRequest)
	k.call(t, up, "GET /v1/topics/{topic}", "/v1/topics/t", "", http.StatusOK)
	k.call(t, up, "POST /v1/topics/{topic}/resume", "/v1/topics/t/resume", "", http.StatusOK)
	k.call(t, up, "POST /v1/topics/{topic}/pause", "/v1/topics/a%20b/pause", "", http.StatusBadRequest)
	k.call(t, up, "POST /v1/topics/{topic}/resume", "/v1/topics/a%20b/resume", "", http.StatusBadRequest)

	// Dead letters: bury what is due in "dead".
	k.call(t, up, enqueue, "/v1/topics/dead/jobs", `{"id":"x1"}`, http.StatusAccepted)
	k.call(t, up, enqueue, "/v1/topics/dead/jobs", `{"id":"x2"}`, http.StatusAccepted)
	c, err := up.q.Claim(ctx, "dead", 10, time.Hour)
	if err != nil || len(c.Jobs) != 2 {
		t.Fatalf("claim: %v %+v", err, c)
	}
	for _, j := range c.Jobs {
		if _, _, err := up.q.Bury(ctx, []queue.DeadJob{{Job: j, Error: "boom"}}); err != nil {
			t.Fatal(err)
		}
	}
	k.call(t, up, "GET /v1/topics/{topic}/dead", "/v1/topics/dead/dead?limit=10", "", http.StatusOK)
	k.call(t, up, get, "/v1/topics/dead/jobs/x1", "", http.StatusOK)
	k.call(t, up, reschedule, "/v1/topics/dead/jobs/x1", `{"delay_ms":1}`, http.StatusConflict)
	k.call(t, up, cancel, "/v1/topics/dead/jobs/x1", "", http.StatusConflict)
	k.call(t, up, "GET /v1/topics/{topic}/dead", "/v1/topics/dead/dead?limit=0", "", http.StatusBadRequest)
	k.call(t, up, "POST /v1/topics/{topic}/dead/requeue", "/v1/topics/dead/dead/requeue", `{"id":"nope"}`, http.StatusNotFound)
	k.call(t, up, "POST /v1/topics/{topic}/dead/requeue", "/v1/topics/dead/dead/requeue", `{"id":"x1"}`, http.StatusOK)
	k.call(t, up, "POST /v1/topics/{topic}/dead/requeue", "/v1/topics/dead/dead/requeue", `{}`, http.StatusBadRequest)
	// x2 deleted for good; then it is no longer dead, so it is a 404.
	const deleteDead = "DELETE /v1/topics/{topic}/dead/jobs/{id}"
	if r := k.call(t, up, deleteDead, "/v1/topics/dead/dead/jobs/x2", "", http.StatusOK); !bytes.Contains(r.body, []byte(`"deleted":true`)) {
		t.Errorf("deleting x2: %s", r.body)
	}
	k.call(t, up, deleteDead, "/v1/topics/dead/dead/jobs/x2", "", http.StatusNotFound)
	k.call(t, up, deleteDead, "/v1/topics/dead/dead/jobs/x1", "", http.StatusNotFound) // requeued: waiting, not dead
	k.call(t, up, deleteDead, "/v1/topics/dead/dead/jobs/a%20b", "", http.StatusBadRequest)
	k.call(t, up, deleteDead, "/v1/topics/a%20b/dead/jobs/x1", "", http.StatusBadRequest)
	k.call(t, up, "POST /v1/topics/{topic}/dead/purge", "/v1/topics/dead/dead/purge", `{}`, http.StatusOK)
	k.call(t, up, "POST /v1/topics/{topic}/dead/purge", "/v1/topics/dead/dead/purge", ``, http.StatusOK)
	k.call(t, up, "POST /v1/topics/{topic}/dead/purge", "/v1/topics/dead/dead/purge", `{"before":-1}`, http.StatusBadRequest)

	// History: j1 was cancelled, x2 purged.
	const history = "GET /v1/topics/{topic}/history"
	k.call(t, up, history, "/v1/topics/t/history", "", http.StatusOK)
	k.call(t, up, history, "/v1/topics/t/history?id=j1", "", http.StatusOK)
	k.call(t, up, history, "/v1/topics/dead/history?outcome=purged&limit=5", "", http.StatusOK)
	k.call(t, up, history, "/v1/topics/t/history?outcome=nope", "", http.StatusBadRequest)

	// The ledger: d1 waits in SQL; h1 is in flight in "busy", which is a
	// redis topic, so its row is not there.
	for _, route := range []string{"GET /v1/ledger", "GET /v1/ledger/inflight"} {
		_, path, _ := strings.Cut(route, " ")
		k.call(t, up, route, path, "", http.StatusOK)
		k.call(t, up, route, path+"?state=waiting&topic=dur&limit=1", "", http.StatusOK)
		k.call(t, up, route, path+"?state=nope", "", http.StatusBadRequest)
	}
	k.call(t, up, "GET /v1/ledger/stale", "/v1/ledger/stale", "", http.StatusOK)
	k.call(t, up, "GET /v1/ledger/stale", "/v1/ledger/stale?older_than=0", "", http.StatusBadRequest)

	// Recovery, schedules, workers, schema, the spec, the series, probes.
	k.call(t, up, "POST /v1/recovery/run", "/v1/recovery/run?dry_run=true", "", http.StatusOK)
	k.call(t, up, "POST /v1/recovery/run", "/v1/recovery/run", "", http.StatusOK)
	k.call(t, up, "POST /v1/recovery/run", "/v1/recovery/run?dry_run=yes", "", http.StatusBadRequest)
	k.call(t, up, "GET /v1/recovery/reports", "/v1/recovery/reports", "", http.StatusOK)
	k.call(t, up, "GET /v1/schedules", "/v1/schedules", "", http.StatusOK)
	registerWorker(t, up)
	k.call(t, up, "GET /v1/workers", "/v1/workers", "", http.StatusOK)
	k.call(t, up, "GET /v1/schema", "/v1/schema", "", http.StatusOK)
	if r := k.call(t, up, "GET /v1/openapi.json", "/v1/openapi.json", "", http.StatusOK); !bytes.Equal(r.body, httpapi.OpenAPI()) {
		t.Error("GET /v1/openapi.json is not OpenAPI()")
	}
	k.call(t, up, "GET /v1/dashboard/series", "/v1/dashboard/series", "", http.StatusOK)
	const minutes = "GET /v1/dashboard/minutes"
	if r := k.call(t, up, minutes, "/v1/dashboard/minutes?topic=t&hours=1", "", http.StatusOK); !bytes.Contains(r.body, []byte(`"hours":1`)) {
		t.Errorf("minutes: %s", r.body)
	}
	k.call(t, up, minutes, "/v1/dashboard/minutes?topic=t", "", http.StatusOK)
	k.call(t, up, minutes, "/v1/dashboard/minutes", "", http.StatusBadRequest)
	k.call(t, up, minutes, "/v1/dashboard/minutes?topic=a%20b", "", http.StatusBadRequest)
	k.call(t, up, minutes, "/v1/dashboard/minutes?topic=t&hours=25", "", http.StatusBadRequest)
	k.call(t, up, "GET /healthz", "/healthz", "", http.StatusOK, "Authorization", "")
	k.call(t, up, "GET /readyz", "/readyz", "", http.StatusOK, "Authorization", "")

	// Products and orders.
	const (
		putProduct  = "PUT /v1/products/{sku}"
		getProduct  = "GET /v1/products/{sku}"
		createOrder = "POST /v1/orders"
		getOrder    = "GET /v1/orders/{no}"
		pay         = "POST /v1/orders/{no}/pay"
		extend      = "POST /v1/orders/{no}/extend"
	)
	k.call(t, up, putProduct, "/v1/products/A", `{"stock":100,"price_cents":250}`, http.StatusCreated)
	k.call(t, up, putProduct, "/v1/products/A", `{"stock":100,"price_cents":250}`, http.StatusOK)
	k.call(t, up, putProduct, "/v1/products/B", `{"stock":1}`, http.StatusBadRequest)
	k.call(t, up, getProduct, "/v1/products/A", "", http.StatusOK)
	k.call(t, up, getProduct, "/v1/products/nope", "", http.StatusNotFound)
	k.call(t, up, "GET /v1/products", "/v1/products?limit=10", "", http.StatusOK)
	k.call(t, up, "GET /v1/products", "/v1/products?limit=0", "", http.StatusBadRequest)
	order := struct {
		OrderNo string `json:"order_no"`
	}{}
	r := k.call(t, up, createOrder, "/v1/orders", `{"user":"u1","items":[{"sku":"A","quantity":2}]}`, http.StatusCreated, "Idempotency-Key", "k1")
	if err := json.Unmarshal(r.body, &order); err != nil || order.OrderNo == "" {
		t.Fatalf("order: %s", r.body)
	}
	k.call(t, up, createOrder, "/v1/orders", `{"user":"u1","items":[{"sku":"A","quantity":3}]}`, http.StatusUnprocessableEntity, "Idempotency-Key", "k1")
	k.call(t, up, createOrder, "/v1/orders", `{"user":"u1","items":[{"sku":"A","quantity":1000}]}`, http.StatusConflict)
	k.call(t, up, createOrder, "/v1/orders", `{"user":"u1","items":[{"sku":"nope","quantity":1}]}`, http.StatusBadRequest)
	k.call(t, up, getOrder, "/v1/orders/"+order.OrderNo, "", http.StatusOK)
	k.call(t, up, getOrder, "/v1/orders/nope", "", http.StatusNotFound)
	k.call(t, up, "GET /v1/orders/summary", "/v1/orders/summary", "", http.StatusOK)
	k.call(t, up, extend, "/v1/orders/"+order.OrderNo+"/extend", `{"by_ms":60000}`, http.StatusOK)
	k.call(t, up, extend, "/v1/orders/"+order.OrderNo+"/extend", `{}`, http.StatusBadRequest)
	k.call(t, up, extend, "/v1/orders/nope/extend", `{"by_ms":60000}`, http.StatusNotFound)
	k.call(t, up, pay, "/v1/orders/"+order.OrderNo+"/pay", "", http.StatusOK)
	k.call(t, up, pay, "/v1/orders/nope/pay", "", http.StatusNotFound)
	k.call(t, up, extend, "/v1/orders/"+order.OrderNo+"/extend", `{"by_ms":60000}`, http.StatusConflict)
	k.call(t, up, getOrder, "/v1/orders/"+order.OrderNo, "", http.StatusOK)
	// An order closed (as its close job closes one: written here, the
	// close itself is orderclose's to test): paying it is refused.
	r = k.call(t, up, createOrder, "/v1/orders", `{"user":"u2","items":[{"sku":"A","quantity":1}],"payment_window_ms":1000}`, http.StatusCreated)
	if err := json.Unmarshal(r.body, &order); err != nil {
		t.Fatal(err)
	}
	if err := up.l.DB().Model(&orderclose.Order{}).Where("order_no = ?", order.OrderNo).
		Updates(map[string]any{"status": orderclose.StatusClosed, "closed_at": time.Now().UnixMilli(), "close_reason": orderclose.CloseReasonTimeout}).Error; err != nil {
		t.Fatal(err)
	}
	k.call(t, up, pay, "/v1/orders/"+order.OrderNo+"/pay", "", http.StatusConflict)
	k.call(t, up, getOrder, "/v1/orders/"+order.OrderNo, "", http.StatusOK)
	k.call(t, up, "GET /v1/orders/summary", "/v1/orders/summary", "", http.StatusOK)

	// Read-only: the operator's changes are refused.
	ro := newContractEnv(t, contractReadOnly)
	k.call(t, ro, "POST /v1/topics/{topic}/dead/requeue", "/v1/topics/t/dead/requeue", `{"all":true}`, http.StatusForbidden)
	k.call(t, ro, "POST /v1/topics/{topic}/dead/purge", "/v1/topics/t/dead/purge", `{}`, http.StatusForbidden)
	k.call(t, ro, "DELETE /v1/topics/{topic}/dead/jobs/{id}", "/v1/topics/t/dead/jobs/x1", "", http.StatusForbidden)
	k.call(t, ro, "POST /v1/topics/{topic}/pause", "/v1/topics/t/pause", "", http.StatusForbidden)
	k.call(t, ro, "PUT /v1/topics/{topic}/partitions", "/v1/topics/t/partitions", `{"partitions":2}`, http.StatusForbidden)
	k.call(t, ro, "POST /v1/topics/{topic}/resume", "/v1/topics/t/resume", "", http.StatusForbidden)
	k.call(t, ro, "POST /v1/recovery/run", "/v1/recovery/run?dry_run=false", "", http.StatusForbidden)
	k.call(t, ro, "POST /v1/recovery/run", "/v1/recovery/run?dry_run=true", "", http.StatusOK)

	// Both backends down: every route that needs one is 503, the others
	// answer.
	down := newContractEnv(t, contractDown)
	for _, route := range servedRoutes() {
		op := k.s.op(route)
		_, path, _ := strings.Cut(route, " ")
		path = fillPath(path)
		if route == "GET /v1/dashboard/minutes" {
			path += "?topic=t" // without it, 400 before Redis is asked
		}
		body := map[string]string{
			enqueue: `{"id":"a"}`, batch: `{"jobs":[{"id":"a"}]}`, reschedule: `{"delay_ms":1}`,
			"POST /v1/topics/{topic}/dead/requeue": `{"all":true}`, "POST /v1/topics/{topic}/dead/purge": `{}`,
			createOrder: `{"user":"u1","items":[{"sku":"A","quantity":1}]}`, extend: `{"by_ms":1000}`,
			putProduct: `{"stock":1,"price_cents":1}`, "PUT /v1/topics/{topic}/partitions": `{"partitions":2}`,
		}[route]
		if op.RequestBody != nil && body == "" {
			t.Fatalf("%s: no body to send", route)
		}
		want := http.StatusServiceUnavailable
		if op.Responses["503"] == nil {
			want = http.StatusOK
		}
		r := k.call(t, down, route, path, body, want)
		if want == http.StatusServiceUnavailable && r.header.Get("Retry-After") == "" {
			t.Errorf("%s: 503 without Retry-After", route)
		}
	}
	// A recovery run that fails part way answers its error with the report
	// of how far it got.
	failing := newContractEnv(t, contractUp)
	failing.srv.Close()
	rec := &reportRecovery{failWith: fmt.Errorf("recovery: reading the ledger: %w", syscall.ECONNREFUSED)}
	h, err := httpapi.New(httpapi.Deps{Queue: failing.q, Ledger: failing.l, Recovery: rec, Token: contractToken, Logger: testenv.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	failing.srv = httptest.NewServer(h)
	t.Cleanup(failing.srv.Close)
	k.call(t, failing, "POST /v1/recovery/run", "/v1/recovery/run", "", http.StatusServiceUnavailable)

	// Every answer openapi.json documents was given.
	for _, route := range k.s.routes() {
		for status := range k.s.op(route).Responses {
			if !k.seen[route+" "+status] {
				t.Errorf("openapi.json documents %s answering %s, which no request of this test got", route, status)
			}
		}
	}
}

// registerWorker writes a worker's registry entry as a running worker's
// heartbeat does, so GET /v1/workers lists one.
func registerWorker(t *testing.T, e *contractEnv) {
	t.Helper()
	now := time.Now().UnixMilli()
	w := queue.WorkerInfo{ID: "w1", Host: "h", PID: 1, Version: "test", StartedAt: now, Heartbeat: now, EveryMs: 5000,
		Topics: []queue.WorkerTopic{{Topic: "t", Concurrency: 2, InFlight: 1}, {Topic: "u", Concurrency: 8, InFlight: 3, Pool: "shared", Weight: 3}},
		Pools:  []queue.WorkerPool{{Name: "shared", Concurrency: 8, InFlight: 3}}}
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.HSet(testenv.Context(t), e.ns+":workers", w.ID, b).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenAPIFormat keeps openapi.json in one form, its keys (paths
// included) sorted and indented by two spaces, so that additions land in
// one place and diffs stay small. DELAYQ_OPENAPI_FORMAT=1 rewrites it in
// that form (after a hand edit that put a path out of order).
func TestOpenAPIFormat(t *testing.T) {
	t.Parallel()
	const file = "openapi.json"
	have, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(have))
	dec.UseNumber() // numbers as written: 978307200000 stays itself
	var doc any
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var want bytes.Buffer
	enc := json.NewEncoder(&want) // encoding/json writes map keys sorted
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(have, want.Bytes()) {
		return
	}
	if os.Getenv("DELAYQ_OPENAPI_FORMAT") == "1" {
		if err := os.WriteFile(file, want.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s rewritten in its canonical form", file)
		return
	}
	t.Errorf("%s is not in its canonical form (keys sorted, two-space indent); run DELAYQ_OPENAPI_FORMAT=1 go test -run TestOpenAPIFormat ./app/httpapi", file)
}

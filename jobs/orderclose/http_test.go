package orderclose_test

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/jobs/orderclose"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// api is an HTTP server with the orders module mounted on a mux the way
// the program mounts it, next to an endpoint of its own.
type api struct {
	t   *testing.T
	url string
}

func newAPI(t *testing.T, w *world) *api {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	orderclose.NewHTTPHandler(w.svc).Mount(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &api{t: t, url: srv.URL}
}

// response is an answer: status, headers and the decoded JSON body.
type response struct {
	status int
	header http.Header
	order  orderJSON
	err    errorJSON
	raw    string
}

type orderJSON struct {
	OrderNo     string  `json:"order_no"`
	User        string  `json:"user"`
	Status      string  `json:"status"`
	AmountCents int64   `json:"amount_cents"`
	CreatedAt   string  `json:"created_at"`
	PayDeadline string  `json:"pay_deadline"`
	PaidAt      *string `json:"paid_at"`
	ClosedAt    *string `json:"closed_at"`
	CloseReason string  `json:"close_reason"`
	Version     int     `json:"version"`
	Items       []struct {
		SKU      string `json:"sku"`
		Quantity int64  `json:"quantity"`
	} `json:"items"`
}

type errorJSON struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
	} `json:"error"`
}

func (a *api) do(method, path, contentType, body string) response {
	a.t.Helper()
	req, err := http.NewRequestWithContext(testenv.Context(a.t), method, a.url+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return a.send(req)
}

// send sends req and decodes the answer.
func (a *api) send(req *http.Request) response {
	a.t.Helper()
	method, path := req.Method, req.URL.Path
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	r := response{status: resp.StatusCode, header: resp.Header, raw: string(b)}
	if method == http.MethodHead {
		return r
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		a.t.Fatalf("%s %s: Content-Type %q, body %s", method, path, resp.Header.Get("Content-Type"), b)
	}
	if resp.StatusCode < 300 {
		err = json.Unmarshal(b, &r.order)
	} else {
		err = json.Unmarshal(b, &r.err)
	}
	if err != nil {
		a.t.Fatalf("%s %s: body %s: %v", method, path, b, err)
	}
	return r
}

func (a *api) post(path, body string) response {
	return a.do(http.MethodPost, path, "application/json", body)
}
func (a *api) get(path string) response { return a.do(http.MethodGet, path, "", "") }

// wantError checks an error answer: status, code and field.
func (r response) wantError(t *testing.T, what string, status int, code, field string) {
	t.Helper()
	e := r.err.Error
	if r.status != status || e.Code != code || e.Field != field || e.Message == "" {
		t.Errorf("%s: %d %s; want %d with code %q and field %q", what, r.status, r.raw, status, code, field)
	}
}

func TestHTTPCreateGetPay(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil, orderclose.Config{})
	w.seed(map[string]int64{"A": 10, "B": 10})
	a := newAPI(t, w)

	r := a.post("/v1/orders", `{"user":"u1","items":[{"sku":"B","quantity":2},{"sku":"A","quantity":1}],"payment_window_ms":60000}`)
	o := r.order
	if r.status != http.StatusCreated || r.header.Get("Location") != "/v1/orders/"+o.OrderNo {
		t.Fatalf("create: %d %s (Location %q)", r.status, r.raw, r.header.Get("Location"))
	}
	if o.Status != orderclose.StatusPending || o.User != "u1" || o.AmountCents != 300 || o.Version != 1 ||
		o.PaidAt != nil || o.ClosedAt != nil || len(o.Items) != 2 {
		t.Fatalf("created order %s", r.raw)
	}
	created, err1 := time.Parse(time.RFC3339, o.CreatedAt)
	deadline, err2 := time.Parse(time.RFC3339, o.PayDeadline)
	if err1 != nil || err2 != nil || deadline.Sub(created) != time.Minute {
		t.Fatalf("created_at %s, pay_deadline %s: want a 60 s window", o.CreatedAt, o.PayDeadline)
	}
	if got := w.stock(); got["A"] != 9 || got["B"] != 8 {
		t.Fatalf("stock %v", got)
	}
	if info, err := w.q.Get(testenv.Context(t), orderclose.Topic, orderclose.JobID(o.OrderNo)); err != nil || info.State != queue.StateWaiting {
		t.Fatalf("close job %+v, %v", info, err)
	}

	g := a.get("/v1/orders/" + o.OrderNo)
	if g.status != http.StatusOK || g.order.OrderNo != o.OrderNo || g.order.PayDeadline != o.PayDeadline ||
		g.order.Status != orderclose.StatusPending || len(g.order.Items) != 2 || g.order.Items[0].SKU != "A" {
		t.Fatalf("get: %d %s", g.status, g.raw)
	}
	if h := a.do(http.MethodHead, "/v1/orders/"+o.OrderNo, "", ""); h.status != http.StatusOK {
		t.Fatalf("HEAD: %d", h.status)
	}

	p := a.post("/v1/orders/"+o.OrderNo+"/pay", "")
	if p.status != http.StatusOK || p.order.Status != orderclose.StatusPaid || p.order.PaidAt == nil || p.order.Version != 2 {
		t.Fatalf("pay: %d %s", p.status, p.raw)
	}
	if again := a.post("/v1/orders/"+o.OrderNo+"/pay", ""); again.status != http.StatusOK || again.order.Version != 2 {
		t.Fatalf("second pay: %d %s", again.status, again.raw)
	}
	if info, err := w.q.Get(testenv.Context(t), orderclose.Topic, orderclose.JobID(o.OrderNo)); err != nil || info.State != queue.StateUnknown {
		t.Fatalf("close job after payment %+v, %v: want it cancelled", info, err)
	}

	// The default window.
	d := a.post("/v1/orders", `{"items":[{"sku":"A","quantity":1}]}`)
	created, _ = time.Parse(time.RFC3339, d.order.CreatedAt)
	deadline, _ = time.Parse(time.RFC3339, d.order.PayDeadline)
	if d.status != http.StatusCreated || deadline.Sub(created) != 30*time.Minute {
		t.Fatalf("create with the default window: %d %s", d.status, d.raw)
	}
}

// Every kind of bad input gets a 4xx JSON error naming the problem, and
// nothing is written: no order, no item, no stock taken, no close job.
func TestHTTPBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil, orderclose.Config{})
	w.seed(map[string]int64{"A": 10, "B": 5})
	a := newAPI(t, w)
	one := `"items":[{"sku":"A","quantity":1}]`
	cases := []struct {
		name, contentType, body string
		status                  int
		code, field             string
	}{
		{"malformed JSON", "", `{"items":[{"sku":"A","quantity":1}`, 400, "malformed_json", ""},
		{"not JSON", "", `hello`, 400, "malformed_json", ""},
		{"empty body", "", ``, 400, "malformed_json", ""},
		{"an array", "", `[]`, 400, "malformed_json", ""},
		{"trailing data", "", `{` + one + `} {}`, 400, "malformed_json", ""},
		{"unknown field", "", `{` + one + `,"coupon":"FREE"}`, 400, "unknown_field", "coupon"},
		{"unknown item field", "", `{"items":[{"sku":"A","quantity":1,"color":"red"}]}`, 400, "unknown_field", "color"},
		{"quantity as a string", "", `{"items":[{"sku":"A","quantity":"1"}]}`, 400, "invalid_value", "items.quantity"},
		{"fractional quantity", "", `{"items":[{"sku":"A","quantity":1.5}]}`, 400, "invalid_value", "items.quantity"},
		{"items an object", "", `{"items":{}}`, 400, "invalid_value", "items"},
		{"unknown SKU", "", `{"items":[{"sku":"A","quantity":1},{"sku":"ZZZ","quantity":1}]}`, 400, "unknown_sku", "items[1].sku"},
		{"zero quantity", "", `{"items":[{"sku":"A","quantity":0}]}`, 400, "invalid_value", "items[0].quantity"},
		{"negative quantity", "", `{"items":[{"sku":"A","quantity":1},{"sku":"B","quantity":-2}]}`, 400, "invalid_value", "items[1].quantity"},
		{"missing quantity", "", `{"items":[{"sku":"A"}]}`, 400, "invalid_value", "items[0].quantity"},
		{"missing sku", "", `{"items":[{"quantity":1}]}`, 400, "invalid_value", "items[0].sku"},
		{"duplicate sku", "", `{"items":[{"sku":"A","quantity":1},{"sku":"A","quantity":2}]}`, 400, "invalid_value", "items[1].sku"},
		{"no items", "", `{}`, 400, "invalid_value", "items"},
		{"null items", "", `{"items":null}`, 400, "invalid_value", "items"},
		{"empty items", "", `{"items":[]}`, 400, "invalid_value", "items"},
		{"zero window", "", `{` + one + `,"payment_window_ms":0}`, 400, "invalid_value", "payment_window_ms"},
		{"negative window", "", `{` + one + `,"payment_window_ms":-5}`, 400, "invalid_value", "payment_window_ms"},
		{"window too long", "", `{` + one + `,"payment_window_ms":604800001}`, 400, "invalid_value", "payment_window_ms"},
		{"long user", "", `{` + one + `,"user":"` + strings.Repeat("u", 65) + `"}`, 400, "invalid_value", "user"},
		{"short stock", "", `{"items":[{"sku":"A","quantity":1},{"sku":"B","quantity":6}]}`, 409, "insufficient_stock", "items[1].quantity"},
		{"null", "", `null`, 400, "malformed_json", ""},
		{"NUL in the user", "", `{` + one + `,"user":"u\u0000"}`, 400, "invalid_value", "user"},
		{"escape in a SKU", "", `{"items":[{"sku":"A\u001b","quantity":1}]}`, 400, "invalid_value", "items[0].sku"},
		{"field name in another case", "", `{` + one + `,"User":"u1"}`, 400, "unknown_field", "User"},
		{"item field name in another case", "", `{"items":[{"SKU":"A","quantity":1}]}`, 400, "unknown_field", "SKU"},
		{"not JSON content", "text/plain", `{` + one + `}`, 415, "unsupported_media_type", ""},
		{"body too large", "", `{` + one + `,"user":"` + strings.Repeat("u", 70<<10) + `"}`, 413, "body_too_large", ""},
	}
	before := w.snapshot()
	for _, tc := range cases {
		ct := tc.contentType
		if ct == "" {
			ct = "application/json; charset=utf-8"
		}
		a.do(http.MethodPost, "/v1/orders", ct, tc.body).wantError(t, tc.name, tc.status, tc.code, tc.field)
	}
	w.assertUnchanged(before, "refused orders")
}

// Paying or reading an order that does not exist, paying a closed one,
// and the wrong method or path: 4xx, nothing written.
func TestHTTPOrderErrors(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil, orderclose.Config{})
	w.seed(map[string]int64{"A": 10})
	a := newAPI(t, w)

	r := a.post("/v1/orders", `{"items":[{"sku":"A","quantity":4}],"payment_window_ms":1}`)
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	no := r.order.OrderNo
	if err := w.svc.CloseHandler().Handle(testenv.Context(t), w.claim(no, time.Minute)); err != nil {
		t.Fatal(err)
	}
	g := a.get("/v1/orders/" + no)
	if g.order.Status != orderclose.StatusClosed || g.order.ClosedAt == nil || g.order.CloseReason != orderclose.CloseReasonTimeout {
		t.Fatalf("closed order: %s", g.raw)
	}

	before := w.snapshot()
	a.post("/v1/orders/"+no+"/pay", "").wantError(t, "pay a closed order", 409, "order_closed", "order_no")
	a.post("/v1/orders/20990101000000ffffffffff/pay", "").wantError(t, "pay an unknown order", 404, "not_found", "order_no")
	a.get("/v1/orders/20990101000000ffffffffff").wantError(t, "get an unknown order", 404, "not_found", "order_no")
	a.get("/v1/orders/bad.no").wantError(t, "get a malformed order number", 400, "invalid_value", "order_no")
	a.post("/v1/orders/bad.no/pay", "").wantError(t, "pay a malformed order number", 400, "invalid_value", "order_no")
	for _, m := range []struct{ method, path, allow string }{
		{http.MethodGet, "/v1/orders", "POST"},
		{http.MethodDelete, "/v1/orders/" + no, "GET, HEAD"},
		{http.MethodPut, "/v1/orders/" + no, "GET, HEAD"},
		{http.MethodGet, "/v1/orders/" + no + "/pay", "POST"},
	} {
		r := a.do(m.method, m.path, "", "")
		r.wantError(t, m.method+" "+m.path, 405, "method_not_allowed", "")
		if got := r.header.Get("Allow"); got != m.allow {
			t.Errorf("%s %s: Allow %q, want %q", m.method, m.path, got, m.allow)
		}
	}
	a.post("/v1/orders/"+no+"/refund", "").wantError(t, "unknown endpoint", 404, "not_found", "")
	a.post("/v1/orders/"+no+"/pay", "{}").wantError(t, "pay with a body", 400, "unexpected_body", "")
	a.get("/v1/orders/"+no+"?fields=all").wantError(t, "get with a query parameter", 400, "unknown_field", "fields")
	a.get("/v1/orders/summary?window=1h").wantError(t, "summary with a query parameter", 400, "unknown_field", "window")
	a.do(http.MethodPost, "/v1/orders?dry_run=true", "application/json", `{"items":[{"sku":"A","quantity":1}]}`).
		wantError(t, "create with a query parameter", 400, "unknown_field", "dry_run")
	w.assertUnchanged(before, "refused requests")
	if o := w.order(no); o.Status != orderclose.StatusClosed || o.PaidAt != nil {
		t.Fatalf("order after a refused payment: %+v", o)
	}
	// The program's own endpoints are untouched by the module.
	resp, err := http.Get(a.url + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
}

// With Redis down an order is still created (201), with its close job: the
// job is a committed row of the durable topic, pushed by the relay once
// Redis is back.
func TestHTTPCreateWithRedisDown(t *testing.T) {
	t.Parallel()
	// Every Redis call is refused.
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RefusedAddr(t),
		MaxRetries: -1, DialerRetries: 1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	w := newWorld(t, rdb, orderclose.Config{})
	w.seed(map[string]int64{"A": 10})
	a := newAPI(t, w)

	r := a.post("/v1/orders", `{"items":[{"sku":"A","quantity":2}]}`)
	if r.status != http.StatusCreated {
		t.Fatalf("create with Redis down: %d %s; want 201", r.status, r.raw)
	}
	if w.count(&orderclose.Order{}) != 1 || w.stock()["A"] != 8 {
		t.Fatalf("orders %d, stock %v", w.count(&orderclose.Order{}), w.stock())
	}
	if row, err := w.led.Row(testenv.Context(t), orderclose.Topic, orderclose.JobID(r.order.OrderNo)); err != nil || row.State != queue.StateWaiting {
		t.Fatalf("close job row with Redis down: %+v, %v", row, err)
	}
	// Paying works too: the cancel of the close job fails, quietly.
	if p := a.post("/v1/orders/"+r.order.OrderNo+"/pay", ""); p.status != http.StatusOK || p.order.Status != orderclose.StatusPaid {
		t.Fatalf("pay with Redis down: %d %s", p.status, p.raw)
	}
}

// With SQL down every route that reads or writes the orders answers 503
// backend_unavailable with Retry-After, the rule of every /v1 route (it
// was a 500 internal: the caller was told it hit a bug, not to retry).
func TestHTTPWithSQLDown(t *testing.T) {
	t.Parallel()
	dsn := fmt.Sprintf("root:@tcp(%s)/x?timeout=2s", testenv.RefusedAddr(t))
	db, err := gorm.Open(mysql.New(mysql.Config{DSN: dsn, SkipInitializeWithVersion: true}),
		&gorm.Config{DisableAutomaticPing: true, Logger: logger.Default.LogMode(logger.Silent)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
	})
	rdb, ns := testenv.Redis(t)
	led, err := ledger.New(db, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns, Store: led,
		TopicDurability: map[string]queue.Durability{orderclose.Topic: queue.DurabilityDurable}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := orderclose.New(led, q, orderclose.Config{Logger: testenv.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	a := newAPI(t, &world{t: t, svc: svc})
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/orders", `{"user":"u1","items":[{"sku":"A","quantity":1}]}`},
		{"GET", "/v1/orders/o1", ""},
		{"POST", "/v1/orders/o1/pay", ""},
		{"POST", "/v1/orders/o1/extend", `{"by_ms":1000}`},
		{"GET", "/v1/orders/summary", ""},
		{"GET", "/v1/products", ""},
		{"GET", "/v1/products/A", ""},
		{"PUT", "/v1/products/A", `{"stock":1,"price_cents":1}`},
	} {
		ct := ""
		if r.body != "" {
			ct = "application/json"
		}
		got := a.do(r.method, r.path, ct, r.body)
		got.wantError(t, r.method+" "+r.path, http.StatusServiceUnavailable, "backend_unavailable", "")
		if got.header.Get("Retry-After") == "" {
			t.Errorf("%s %s: 503 without Retry-After", r.method, r.path)
		}
	}
}

package main_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/app/dashboard"
	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/jobs/orderclose"
)

// envProbeBinary names an already built delayq binary for TestProbeBadInput
// to test instead of building one from this tree (an older release, say).
const envProbeBinary = "DELAYQ_PROBE_BINARY"

// probeRoute is one route of the running API with a concrete path: the
// query parameters it takes and, when it takes a body, a good one and the
// text field that bad text goes into.
type probeRoute struct {
	pattern string // as registered: "GET /v1/topics/{topic}"
	path    string
	params  map[string]string // name: a good value
	body    string            // "" for a route that takes none
	text    func(s string) string
	field   string // the field text goes into
}

// TestProbeBadInput is a black-box probe of every /v1 route of a running
// `delayq serve` on real Redis and MariaDB: each kind of bad input the API
// documents gets a complete JSON 4xx with its documented code, and nothing
// is written, neither to the namespace's Redis keys nor to any table.
func TestProbeBadInput(t *testing.T) {
	bin := os.Getenv(envProbeBinary)
	if bin == "" {
		bin = buildBinary(t)
	}
	rdb, ns := testenv.Redis(t)
	dsn := testenv.MySQLDSN(t)
	port := testenv.FreePort(t)
	const token = "probe-token-0123456789abcdef"
	const maxBody = 64 << 10 // the API's limit here; orders have their own 64 KiB
	env := serveEnv(ns, dsn, port,
		"DELAYQ_HTTP_TOKEN="+token,
		fmt.Sprintf("DELAYQ_HTTP_MAX_BODY_BYTES=%d", maxBody),
		"DELAYQ_QUEUE_MAX_PAYLOAD_BYTES=4096",
		// No scheduled pass may write while the probe runs.
		"DELAYQ_RECOVERY_SPEC=@every 1h",
		"DELAYQ_ORDERS_ENABLED=true", // the orders routes are probed too
		"DELAYQ_ORDERS_SWEEPER_SPEC=@every 1h",
	)
	began := time.Now()
	start(t, bin, env, "serve")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHTTP(t, base+"/readyz")
	c := &probeClient{t: t, base: base, addr: fmt.Sprintf("127.0.0.1:%d", port), token: token}

	// Something for a wrong write to change: a waiting job, a dead one, an
	// order with its close job.
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec("INSERT INTO skus (sku, stock, price_cents) VALUES ('A', 10, 100)"); err != nil {
		t.Fatal(err)
	}
	c.want(c.do("POST", "/v1/topics/probe/jobs", "application/json", `{"id":"seed:1","payload":{"x":1},"delay_ms":3600000}`), 202, "")
	c.want(c.do("POST", "/v1/topics/order_close/jobs", "application/json", `{"id":"order_close:not.an.order"}`), 202, "")
	var order struct {
		OrderNo string `json:"order_no"`
	}
	r := c.do("POST", "/v1/orders", "application/json", `{"user":"u1","items":[{"sku":"A","quantity":1}]}`)
	c.want(r, 201, "")
	if err := json.Unmarshal(r.body, &order); err != nil || order.OrderNo == "" {
		t.Fatalf("order: %s", r.body)
	}
	testenv.WaitFor(testenv.ContextTimeout(t, time.Minute), t, "the close job of a missing order to die", func() bool {
		return strings.Contains(string(c.do("GET", "/v1/topics/order_close/jobs/order_close:not.an.order", "", "").body), `"state":"dead"`)
	})

	t.Logf("serve up and seeded after %s", time.Since(began).Round(time.Millisecond))
	ledgerParams := map[string]string{"state": "scheduled", "topic": "probe", "due_after": "1", "due_before": "2",
		"cursor": "1_1", "limit": "10"}
	routes := []probeRoute{
		{pattern: "POST /v1/topics/{topic}/jobs", path: "/v1/topics/probe/jobs", body: `{"id":"p1"}`,
			text: func(s string) string { return `{"id":` + s + `}` }, field: "id"},
		{pattern: "POST /v1/topics/{topic}/jobs:batch", path: "/v1/topics/probe/jobs:batch", body: `{"jobs":[{"id":"p1"}]}`},
		{pattern: "GET /v1/topics/{topic}/jobs", path: "/v1/topics/probe/jobs", params: map[string]string{"state": "dead", "offset": "0", "limit": "10"}},
		{pattern: "GET /v1/topics/{topic}/jobs/{id...}", path: "/v1/topics/probe/jobs/seed:1"},
		{pattern: "DELETE /v1/topics/{topic}/jobs/{id...}", path: "/v1/topics/probe/jobs/seed:1"},
		{pattern: "PATCH /v1/topics/{topic}/jobs/{id...}", path: "/v1/topics/probe/jobs/seed:1", body: `{"delay_ms":1000}`},
		{pattern: "POST /v1/topics/{topic}/pause", path: "/v1/topics/probe/pause"},
		{pattern: "POST /v1/topics/{topic}/resume", path: "/v1/topics/probe/resume"},
		{pattern: "GET /v1/topics/{topic}/partitions", path: "/v1/topics/probe/partitions"},
		{pattern: "PUT /v1/topics/{topic}/partitions", path: "/v1/topics/probe/partitions", body: `{"partitions":1}`},
		{pattern: "GET /v1/topics", path: "/v1/topics"},
		{pattern: "GET /v1/topics/{topic}", path: "/v1/topics/probe"},
		{pattern: "GET /v1/topics/{topic}/dead", path: "/v1/topics/order_close/dead", params: map[string]string{"offset": "0", "limit": "10"}},
		{pattern: "POST /v1/topics/{topic}/dead/requeue", path: "/v1/topics/order_close/dead/requeue", body: `{"all":true}`,
			text: func(s string) string { return `{"id":` + s + `}` }, field: "id"},
		{pattern: "POST /v1/topics/{topic}/dead/purge", path: "/v1/topics/order_close/dead/purge", body: `{}`},
		{pattern: "GET /v1/topics/{topic}/history", path: "/v1/topics/probe/history",
			params: map[string]string{"prefix": "seed", "outcome": "succeeded", "finished_from": "1", "finished_before": "2", "limit": "10"}},
		{pattern: "GET /v1/ledger", path: "/v1/ledger", params: ledgerParams},
		{pattern: "GET /v1/ledger/inflight", path: "/v1/ledger/inflight", params: ledgerParams},
		{pattern: "GET /v1/ledger/stale", path: "/v1/ledger/stale", params: map[string]string{"older_than": "1", "after_id": "0", "limit": "10"}},
		{pattern: "POST /v1/recovery/run", path: "/v1/recovery/run", params: map[string]string{"dry_run": "true"}},
		{pattern: "GET /v1/recovery/reports", path: "/v1/recovery/reports"},
		{pattern: "GET /v1/schedules", path: "/v1/schedules"},
		{pattern: "GET /v1/workers", path: "/v1/workers"},
		{pattern: "GET /v1/schema", path: "/v1/schema"},
		{pattern: "GET /v1/openapi.json", path: "/v1/openapi.json"},
		{pattern: "POST /v1/orders", path: "/v1/orders", body: `{"items":[{"sku":"A","quantity":1}]}`,
			text: func(s string) string { return `{"user":` + s + `,"items":[{"sku":"A","quantity":1}]}` }, field: "user"},
		{pattern: "POST /v1/orders/{no}/pay", path: "/v1/orders/" + order.OrderNo + "/pay"},
		{pattern: "POST /v1/orders/{no}/extend", path: "/v1/orders/" + order.OrderNo + "/extend", body: `{"by_ms":60000}`},
		{pattern: "GET /v1/orders/{no}", path: "/v1/orders/" + order.OrderNo},
		{pattern: "GET /v1/orders/summary", path: "/v1/orders/summary"},
		{pattern: "GET /v1/products", path: "/v1/products", params: map[string]string{"after": "A", "limit": "10"}},
		{pattern: "GET /v1/products/{sku...}", path: "/v1/products/A"},
		{pattern: "PUT /v1/products/{sku...}", path: "/v1/products/A", body: `{"stock":10,"price_cents":100}`},
		{pattern: dashboard.SeriesPattern, path: "/v1/dashboard/series"},
		{pattern: dashboard.MinutesPattern, path: "/v1/dashboard/minutes", params: map[string]string{"topic": "probe", "hours": "24"}},
		{pattern: "DELETE /v1/topics/{topic}/dead/jobs/{id...}", path: "/v1/topics/order_close/dead/jobs/seed:1"},
	}
	// The probe covers every route the program serves.
	all := append(append(httpapi.Routes(), orderclose.Routes()...), dashboard.SeriesPattern, dashboard.MinutesPattern)
	var probed []string
	for _, rt := range routes {
		probed = append(probed, rt.pattern)
	}
	slices.Sort(all)
	slices.Sort(probed)
	if !slices.Equal(all, probed) {
		t.Fatalf("routes served %q, probed %q", all, probed)
	}

	before := snapshot(t, rdb, ns, db)
	t.Logf("snapshot after %s", time.Since(began).Round(time.Millisecond))
	methodsOf := map[string][]string{} // path: the methods its routes take
	for _, rt := range routes {
		m, _, _ := strings.Cut(rt.pattern, " ")
		methodsOf[rt.path] = append(methodsOf[rt.path], m)
	}
	for _, rt := range routes {
		method, _, _ := strings.Cut(rt.pattern, " ")
		name := rt.pattern
		ct := ""
		if rt.body != "" {
			ct = "application/json"
		}
		send := func(what, query, ctype, body string) probeResp {
			t.Helper()
			r := c.do(method, rt.path+query, ctype, body)
			r.what = name + ": " + what
			return r
		}
		// Query parameters: unknown, empty, repeated.
		c.want(send("unknown query parameter", "?probe_unknown=1", ct, rt.body), 400, "unknown_field", "probe_unknown")
		for p, good := range rt.params {
			c.want(send(p+" empty", "?"+p+"=", ct, rt.body), 400, "invalid_value", p)
			c.want(send(p+" twice", "?"+p+"="+good+"&"+p+"="+good, ct, rt.body), 400, "invalid_value", p)
			c.want(send(p+" with a control character", "?"+p+"="+url.QueryEscape(good+"\x01"), ct, rt.body), 400, "invalid_value", p)
		}
		if rt.body == "" {
			// A body where none is taken, small or too large to buffer.
			c.want(send("a body", "", "application/json", `{}`), 400, "unexpected_body")
			for i := 0; i < 2; i++ {
				c.want(c.raw(name+": a large body sent whole", method, rt.path, strings.Repeat(" ", 4<<20)), 400, "unexpected_body")
			}
		} else {
			c.want(send("null", "", ct, `null`), 400, "malformed_json")
			c.want(send("an array", "", ct, `[]`), 400, "malformed_json")
			c.want(send("truncated", "", ct, rt.body[:len(rt.body)-1]), 400, "malformed_json")
			c.want(send("unknown field", "", ct, `{"probe_unknown":1}`), 400, "unknown_field", "probe_unknown")
			c.want(send("text/plain", "", "text/plain", rt.body), 415, "unsupported_media_type")
			for i := 0; i < 5; i++ {
				c.want(c.raw(name+": an oversized body sent whole", method, rt.path, `{"id":"`+strings.Repeat("p", 4<<20)+`"}`), 413, "body_too_large")
			}
			if rt.text != nil {
				for _, s := range []string{`"a\u0000b"`, `"a\u001b[2Jb"`, `"a\u0085b"`, "\"a\xffb\""} {
					c.want(send("text "+s, "", ct, rt.text(s)), 400, "invalid_value", rt.field)
				}
			}
		}
		// Methods the path does not take.
		for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			if slices.Contains(methodsOf[rt.path], m) {
				continue
			}
			r := c.do(m, rt.path, "", "")
			r.what = name + ": " + m
			c.want(r, 405, "method_not_allowed")
			if r.header.Get("Allow") == "" {
				t.Errorf("%s %s: 405 without Allow", m, rt.path)
			}
		}
	}
	t.Logf("routes probed after %s", time.Since(began).Round(time.Millisecond))
	// Values out of range, those that used to wrap included.
	for _, b := range []struct{ path, body, code, field string }{
		{"/v1/topics/probe/jobs", `{"id":"p2","delay_ms":-9223372036854775808}`, "invalid_run_at", "delay_ms"},
		{"/v1/topics/probe/jobs", `{"id":"p2","delay_ms":-288230376148111744}`, "invalid_run_at", "delay_ms"},
		{"/v1/topics/probe/jobs", `{"id":"p2","delay_ms":9223372036854775807}`, "invalid_run_at", "delay_ms"},
		{"/v1/topics/probe/jobs", `{"id":"p2","run_at":-9223372036854775808}`, "invalid_run_at", "run_at"},
		{"/v1/topics/order_close/dead/purge", `{"before":-9223372036854775808}`, "invalid_value", "before"},
		{"/v1/orders", `{"items":[{"sku":"A","quantity":1}],"payment_window_ms":-9223372036854775808}`, "invalid_value", "payment_window_ms"},
		{"/v1/orders", `{"items":[{"sku":"A\u0000","quantity":1}]}`, "invalid_value", "items[0].sku"},
		{"PUT /v1/products/A", `{"stock":-1,"price_cents":100}`, "invalid_value", "stock"},
		{"PUT /v1/products/A", `{"stock":1,"price_cents":-9223372036854775808}`, "invalid_value", "price_cents"},
		{"PUT /v1/products/A", `{"price_cents":100}`, "missing_field", "stock"},
		{"PUT /v1/products/" + strings.Repeat("s", 65), `{"stock":1,"price_cents":1}`, "invalid_value", "sku"},
	} {
		method, path, ok := strings.Cut(b.path, " ")
		if !ok {
			method, path = "POST", b.path
		}
		r := c.do(method, path, "application/json", b.body)
		r.what = method + " " + path + " " + b.body
		c.want(r, 400, b.code, b.field)
	}
	// The same for a reschedule and an order's extension: wrapping values,
	// and more than one way to say the new time.
	for _, b := range []struct{ method, path, body, field string }{
		{"PATCH", "/v1/topics/probe/jobs/seed:1", `{"run_at":-9223372036854775808}`, "run_at"},
		{"PATCH", "/v1/topics/probe/jobs/seed:1", `{"delay_ms":9223372036854775807}`, "delay_ms"},
		{"PATCH", "/v1/topics/probe/jobs/seed:1", `{"shift_ms":-9223372036854775808}`, "shift_ms"},
		{"PATCH", "/v1/topics/probe/jobs/seed:1", `{"delay_ms":1,"shift_ms":1}`, ""},
		{"PATCH", "/v1/topics/probe/jobs/seed:1", `{}`, ""},
		{"POST", "/v1/orders/" + order.OrderNo + "/extend", `{"by_ms":-9223372036854775808}`, "by_ms"},
		{"POST", "/v1/orders/" + order.OrderNo + "/extend", `{"by_ms":0}`, "by_ms"},
	} {
		r := c.do(b.method, b.path, "application/json", b.body)
		r.what = b.method + " " + b.path + " " + b.body
		if r.status != 400 || !strings.Contains(string(r.body), `"field":"`+b.field) {
			t.Errorf("%s: %d %s; want 400 naming %q", r.what, r.status, r.body, b.field)
		}
	}
	// A batch refuses a bad job alone (200, the job invalid), and writes
	// nothing for it.
	r = c.do("POST", "/v1/topics/probe/jobs:batch", "application/json", `{"jobs":[{"id":"a\u0000b"},{"id":"c","delay_ms":-9223372036854775808}]}`)
	if r.status != 200 || !strings.Contains(string(r.body), `"invalid":2`) {
		t.Errorf("batch of bad jobs: %d %s", r.status, r.body)
	}
	// No redirect anywhere.
	for _, p := range []string{"/v1", "/v1/topics/probe/jobs/a//b", "/v1/topics/probe/jobs/../jobs"} {
		r := c.do("GET", p, "", "")
		if r.status/100 == 3 || r.status < 400 {
			t.Errorf("GET %s: %d", p, r.status)
		}
	}
	if after := snapshot(t, rdb, ns, db); after != before {
		t.Fatalf("the refused requests wrote:\n%s", diffLines(before, after))
	}
}

type probeClient struct {
	t                 *testing.T
	base, addr, token string
}

type probeResp struct {
	what   string
	status int
	header http.Header
	body   []byte
}

var noRedirect = &http.Client{
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func (c *probeClient) do(method, path, ctype, body string) probeResp {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	res, err := noRedirect.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return probeResp{what: method + " " + path, status: res.StatusCode, header: res.Header, body: b}
}

// raw sends a request over a connection of its own, writing the whole body
// before reading anything, as a simple client does.
func (c *probeClient) raw(what, method, path, body string) probeResp {
	c.t.Helper()
	conn, err := net.DialTimeout("tcp", c.addr, 5*time.Second)
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	msg := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		method, path, c.token, len(body), body)
	if _, err := io.WriteString(conn, msg); err != nil {
		return probeResp{what: what + " (writing: " + err.Error() + ")"}
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return probeResp{what: what + " (reading: " + err.Error() + ")"}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return probeResp{what: what + " (reading the body: " + err.Error() + ")"}
	}
	return probeResp{what: what, status: res.StatusCode, header: res.Header, body: b}
}

// want fails unless r is status with a JSON error of code (and field).
func (c *probeClient) want(r probeResp, status int, code string, field ...string) {
	c.t.Helper()
	if status < 300 {
		if r.status != status {
			c.t.Fatalf("%s: %d %s, want %d", r.what, r.status, r.body, status)
		}
		return
	}
	var e struct {
		Error struct{ Code, Message, Field string } `json:"error"`
	}
	mt, _, _ := mime.ParseMediaType(r.header.Get("Content-Type"))
	switch {
	case r.status != status:
	case mt != "application/json":
	case json.Unmarshal(r.body, &e) != nil:
	case e.Error.Code != code || e.Error.Message == "":
	case len(field) > 0 && e.Error.Field != field[0]:
	default:
		return
	}
	c.t.Errorf("%s: %d %q %s; want %d %s %v", r.what, r.status, r.header.Get("Content-Type"), r.body, status, code, field)
}

// snapshot describes everything the program stores: each Redis key of the
// namespace with a digest of its value, and each table with its row count
// and checksum.
func snapshot(t *testing.T, rdb redis.UniversalClient, ns string, db *sql.DB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var lines []string
	keys, err := rdb.Keys(ctx, ns+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k == ns+":relay" || k == ns+":{relay}:bell" || k == ns+":workers" || strings.Contains(k, "}:min:") {
			// The relay's mark moves with the clock, not with requests; its
			// bell, rung by the seeding's enqueues, is taken by the relay
			// whenever it next waits on it; the workers' registry is each
			// worker's heartbeat; the per-minute counts are each process's
			// flush of its counters every few seconds. The inbox of notes counts: a refused
			// enqueue must leave none.
			continue
		}
		v, err := rdb.Dump(ctx, k).Result()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("redis %s %x", k, sha256.Sum256([]byte(v))))
	}
	rows, err := db.QueryContext(ctx, "SHOW TABLES")
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	rows.Close()
	for _, tb := range tables {
		var name string
		var sum sql.NullInt64
		if err := db.QueryRowContext(ctx, "CHECKSUM TABLE `"+tb+"` EXTENDED").Scan(&name, &sum); err != nil {
			t.Fatal(err)
		}
		var n int64
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+tb+"`").Scan(&n); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("table %s rows %d checksum %d", tb, n, sum.Int64))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// diffLines shows the lines of a and b that differ.
func diffLines(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for _, l := range al {
		if !slices.Contains(bl, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range bl {
		if !slices.Contains(al, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

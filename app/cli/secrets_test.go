package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/internal/testenv"
)

// redisACL are the ACL rules of delayq's Redis user that
// deployments/README.md gives, for namespace dq.
const redisACL = "resetkeys ~dq:* resetchannels &dq:* -@all +@connection +@read +@write +@scripting +@pubsub +time -@dangerous"

// TestServeLogsNoSecrets runs `delayq serve` as production runs it: Redis
// over TLS with an ACL user of the least rights delayq needs, MySQL over TLS with a password, the secrets
// and the token from DELAYQ_* variables, logs at info in JSON. It sends
// authorized (and unauthorized, malformed) requests whose payloads and
// order data carry a marker, makes a job die (and be requeued and die
// again), a job find no order, an order close, and a recovery run, so the
// error paths log too; then the log must hold neither the token, nor the
// marker, nor either password.
//
// Not parallel: it sets environment variables.
func TestServeLogsNoSecrets(t *testing.T) {
	const (
		token     = "api-token-5d0e7c2a91b4f8e3"
		redisPass = "redis-pass-a17c93e5"
		mysqlPass = "mysql-pass-3e8b0d62"
		marker    = "PII-marker-6f2ad4c8e1" // stands for personal data in payloads
	)
	pki := testenv.NewPKI(t)
	// delayq logs in as an ACL user with the rules deployments/README.md
	// gives (namespace dq); the default user has a password of its own.
	rs := testenv.StartRedis(t, testenv.RedisOptions{TLS: pki, Password: "default-" + redisPass,
		Users: []string{"delayq on >" + redisPass + " " + redisACL}})
	m := testenv.StartMariaDB(t, testenv.MariaDBOptions{PKI: pki})
	m.Exec(t,
		"CREATE DATABASE delayq",
		"CREATE USER 'delayq'@'127.0.0.1' IDENTIFIED BY '"+mysqlPass+"'",
		"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX ON delayq.* TO 'delayq'@'127.0.0.1'",
	)
	t.Setenv("DELAYQ_REDIS_PASSWORD", redisPass)
	t.Setenv("DELAYQ_SQL_DSN", m.DSN("delayq", mysqlPass, "delayq",
		"parseTime=true&interpolateParams=true&tx_isolation=%27READ-COMMITTED%27"))
	t.Setenv("DELAYQ_HTTP_TOKEN", token)
	port := testenv.FreePort(t)
	logs := startCommand(t, fmt.Sprintf(`log: {level: info, format: json}
redis: {mode: single, addrs: [%q], username: delayq, tls: true, tls_ca_file: %q}
sql: {driver: mysql, tls_ca_file: %q}
http: {listen: "127.0.0.1:%d"}
worker: {max_idle: 100ms, lease: 3s, backoff_base: 50ms, backoff_cap: 100ms}
recovery: {spec: "@every 1s", grace: 2s}
orders: {enabled: true}
`, rs.Addr, pki.CAFile, pki.CAFile, port), "serve")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	client := &http.Client{Timeout: 30 * time.Second}
	send := func(method, path, auth, body string) (int, string) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, base+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v\nlog:\n%s", method, path, err, logs())
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	bearer := "Bearer " + token
	expect := func(want int, method, path, auth, body string) string {
		t.Helper()
		code, got := send(method, path, auth, body)
		if code != want {
			t.Fatalf("%s %s: %d, want %d: %s\nlog:\n%s", method, path, code, want, got, logs())
		}
		return got
	}
	// serve runs in this process but answers only over HTTP: poll.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		testenv.WaitFor(testenv.Context(t), t, what, cond, func() string { return "log:\n" + logs() })
	}
	waitFor("/readyz", func() bool { code, _, err := httpGet(base + "/readyz"); return err == nil && code == 200 })

	payload := fmt.Sprintf(`{"email":%q}`, marker)
	// A close job whose id names no valid order number: permanent failure,
	// dead at once (logged at error with the handler's error).
	expect(202, "POST", "/v1/topics/order_close/jobs", bearer, `{"id":"order_close:not.an.order","payload":`+payload+`}`)
	// A close job for an order that does not exist: logged at warn.
	expect(202, "POST", "/v1/topics/order_close/jobs", bearer, `{"id":"order_close:NOORDER1","payload":`+payload+`}`)
	// A topic no handler serves, by batch; read back with its payload.
	expect(200, "POST", "/v1/topics/unserved/jobs:batch", bearer, `{"jobs":[{"id":"b1","payload":`+payload+`}]}`)
	if got := expect(200, "GET", "/v1/topics/unserved/jobs/b1", bearer, ""); !strings.Contains(got, marker) {
		t.Fatalf("GET b1 did not return the payload: %s", got)
	}
	// Refused requests: wrong token, a token in the wrong scheme, malformed
	// JSON around the marker, an unknown field named after it.
	expect(401, "POST", "/v1/topics/unserved/jobs", "Bearer "+token+"x", `{"id":"x1","payload":`+payload+`}`)
	expect(401, "POST", "/v1/topics/unserved/jobs", "Basic "+token, `{"id":"x1","payload":`+payload+`}`)
	expect(400, "POST", "/v1/topics/unserved/jobs", bearer, `{"id":"x2","payload":{"email":"`+marker+`"`)
	expect(400, "POST", "/v1/topics/unserved/jobs", bearer, `{"id":"x3",`+fmt.Sprintf("%q", marker)+`:1}`)

	// An order whose user is the marker, with a payment window of a few
	// milliseconds: its close job runs and closes it (logged at info).
	m.Exec(t, "INSERT INTO delayq.skus (sku, stock, price_cents) VALUES ('SKU-1', 10, 100)")
	var order struct {
		OrderNo string `json:"order_no"`
		Status  string `json:"status"`
	}
	created := expect(201, "POST", "/v1/orders", bearer, `{"user":"`+marker+`","items":[{"sku":"SKU-1","quantity":1}],"payment_window_ms":10}`)
	if err := json.Unmarshal([]byte(created), &order); err != nil || order.OrderNo == "" {
		t.Fatalf("create order: %s (%v)", created, err)
	}

	dead := func() bool {
		_, got := send("GET", "/v1/topics/order_close/jobs/order_close:not.an.order", bearer, "")
		return strings.Contains(got, `"state":"dead"`)
	}
	waitFor("the bad close job dies", dead)
	expect(200, "POST", "/v1/topics/order_close/dead/requeue", bearer, `{"id":"order_close:not.an.order"}`)
	waitFor("the requeued job dies again", dead)
	waitFor("the order closes", func() bool {
		_, got := send("GET", "/v1/orders/"+order.OrderNo, bearer, "")
		return json.Unmarshal([]byte(got), &order) == nil && order.Status == "closed"
	})
	expect(200, "POST", "/v1/recovery/run", bearer, "")
	// The ACL user's rights are enough for the scrape's reads too.
	if code, body, err := httpGet(base + "/metrics"); err != nil || code != 200 || !strings.Contains(body, "delayq_redis_up 1") {
		t.Errorf("GET /metrics: %d %v, delayq_redis_up 1 missing", code, err)
	}
	if code, body, err := httpGet(base + "/v1/dashboard/series"); err != nil || code != http.StatusUnauthorized {
		t.Errorf("GET /v1/dashboard/series without the token: %d %v %s", code, err, body)
	}

	// What the ACL user may not do: admin and dangerous commands, keys and
	// channels outside its namespace.
	acl := redis.NewClient(&redis.Options{Addr: rs.Addr, Username: "delayq", Password: redisPass, TLSConfig: pki.ClientTLS()})
	defer acl.Close()
	ctx := context.Background()
	for name, err := range map[string]error{
		"FLUSHALL":         acl.FlushAll(ctx).Err(),
		"CONFIG SET":       acl.ConfigSet(ctx, "dir", "/tmp").Err(),
		"KEYS":             acl.Keys(ctx, "*").Err(),
		"SET outside":      acl.Set(ctx, "other:key", "x", 0).Err(),
		"PUBLISH outside":  acl.Publish(ctx, "other", "x").Err(),
		"EVAL outside key": acl.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{"other:key"}).Err(),
	} {
		if err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%s as the delayq ACL user: %v, want NOPERM", name, err)
		}
	}
	if err := acl.Set(ctx, "dq:acl-check", "x", time.Minute).Err(); err != nil {
		t.Errorf("SET in the namespace as the delayq ACL user: %v", err)
	}

	// Redis dies: the unauthenticated readiness probe says which backend
	// is down and nothing more (no address, no TLS detail).
	rs.Kill(t)
	waitFor("/readyz fails", func() bool {
		code, body, err := httpGet(base + "/readyz")
		if err != nil || code != http.StatusServiceUnavailable {
			return false
		}
		if !strings.Contains(body, "redis") || strings.Contains(body, rs.Addr) || strings.Contains(body, "127.0.0.1") {
			t.Fatalf("/readyz: %s", body)
		}
		return true
	})

	out := logs()
	// The error paths did log: the proof that the check below looked at
	// something.
	for _, want := range []string{"job failed for good: dead", "request refused", "order closed", "recovery run"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q (the path it proves did not run, or logs elsewhere)", want)
		}
	}
	if strings.Contains(out, "NOPERM") {
		t.Error("Redis refused a command to delayq's ACL user (NOPERM in the log)")
	}
	for name, secret := range map[string]string{"the API token": token, "the Redis password": redisPass,
		"the MySQL password": mysqlPass, "the payload marker": marker} {
		if strings.Contains(out, secret) {
			t.Errorf("%s appears in the log", name)
		}
	}
	if t.Failed() {
		t.Logf("log:\n%s", out)
	}
}

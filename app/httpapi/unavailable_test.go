package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// unreachableSQL returns a MySQL handle on an address that refuses connections:
// every statement fails to connect.
func unreachableSQL(t *testing.T) *gorm.DB {
	t.Helper()
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
	return db
}

// apiOn serves the API over rdb and db.
func apiOn(t *testing.T, rdb redis.UniversalClient, db *gorm.DB) *env {
	t.Helper()
	q, err := dataplane.New(rdb, queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(db, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{q: q, l: l, rdb: rdb, logs: &testenv.SyncBuffer{}}
	h, err := httpapi.New(httpapi.Deps{Queue: q, Ledger: l, Logger: testLogger(e.logs)})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	return e
}

// expectUnavailable checks a 503 that names the backend.
func expectUnavailable(t *testing.T, r resp, backend string) {
	t.Helper()
	d := expectError(t, r, http.StatusServiceUnavailable, httpapi.CodeBackendUnavailable, "")
	if !strings.HasPrefix(d.Message, backend) || r.header.Get("Retry-After") == "" {
		t.Fatalf("503 %+v (Retry-After %q), want it to name %s", d, r.header.Get("Retry-After"), backend)
	}
}

// TestRedisUnavailable points the API at a port nothing listens on: every
// route that needs Redis answers 503, the liveness probe stays up and the
// readiness probe says which backend failed.
func TestRedisUnavailable(t *testing.T) {
	t.Parallel()
	// No retries: each refused dial fails the request at once.
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RefusedAddr(t), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	e := apiOn(t, rdb, testenv.SQLite(t))
	if err := e.l.Migrate(testenv.Context(t)); err != nil {
		t.Fatal(err)
	}

	expectUnavailable(t, e.post(t, "/v1/topics/t/jobs", `{"id":"a"}`), "redis")
	expectUnavailable(t, e.post(t, "/v1/topics/t/jobs:batch", `{"jobs":[{"id":"a"}]}`), "redis")
	expectUnavailable(t, e.get(t, "/v1/topics/t/jobs/a"), "redis")
	expectUnavailable(t, e.del(t, "/v1/topics/t/jobs/a"), "redis")
	expectUnavailable(t, e.send(t, req{method: "PATCH", path: "/v1/topics/t/jobs/a", body: `{"delay_ms":1000}`}), "redis")
	expectUnavailable(t, e.get(t, "/v1/topics"), "redis")
	expectUnavailable(t, e.get(t, "/v1/topics/t"), "redis")
	expectUnavailable(t, e.get(t, "/v1/topics/t/dead"), "redis")
	expectUnavailable(t, e.post(t, "/v1/topics/t/dead/requeue", `{"all":true}`), "redis")
	// Bad input is still bad input: no backend needed to say so.
	expectError(t, e.post(t, "/v1/topics/t/jobs", `{"id":"a b"}`), http.StatusBadRequest, httpapi.CodeInvalidID, "id")
	// The ledger answers; only Redis is down.
	expect(t, e.get(t, "/v1/ledger/inflight"), http.StatusOK)

	expect(t, e.get(t, "/healthz"), http.StatusOK)
	d := expectError(t, e.get(t, "/readyz"), http.StatusServiceUnavailable, httpapi.CodeNotReady, "")
	if d.Message != "unavailable: redis" {
		t.Fatalf("readyz message %q, want it to name redis alone", d.Message)
	}
}

// TestRedisKilled runs the API on a redis-server that is then SIGKILLed:
// the pool's connections die under it, and enqueue answers 503.
func TestRedisKilled(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t, testenv.RedisOptions{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	e := apiOn(t, rdb, testenv.SQLite(t))
	expect(t, e.post(t, "/v1/topics/t/jobs", `{"id":"before"}`), http.StatusAccepted)
	srv.Kill(t)
	expectUnavailable(t, e.post(t, "/v1/topics/t/jobs", `{"id":"after"}`), "redis")
	expectUnavailable(t, e.get(t, "/v1/topics/t/jobs/before"), "redis")
}

// TestRedisAddressTakenByAnotherServer: Redis is down and another server
// (here an HTTP one) has taken its port, as a freed port is taken on a
// busy host: what answers is not Redis, and the API says Redis is
// unavailable (503), not that it has a bug (500).
func TestRedisAddressTakenByAnotherServer(t *testing.T) {
	t.Parallel()
	other := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(other.Close)
	rdb := redis.NewClient(&redis.Options{Addr: other.Listener.Addr().String(), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	e := apiOn(t, rdb, testenv.SQLite(t))
	if err := e.l.Migrate(testenv.Context(t)); err != nil {
		t.Fatal(err)
	}
	expectUnavailable(t, e.post(t, "/v1/topics/t/jobs", `{"id":"a"}`), "redis")
	expectUnavailable(t, e.post(t, "/v1/topics/t/jobs:batch", `{"jobs":[{"id":"a"}]}`), "redis")
	expectUnavailable(t, e.get(t, "/v1/topics/t/jobs/a"), "redis")
	expectUnavailable(t, e.del(t, "/v1/topics/t/jobs/a"), "redis")
}

// TestSQLUnavailable points the ledger at a port nothing listens on.
func TestSQLUnavailable(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.MiniRedis(t)
	db := unreachableSQL(t)
	e := apiOn(t, rdb, db)

	expectUnavailable(t, e.get(t, "/v1/ledger/inflight"), "sql")
	expectUnavailable(t, e.get(t, "/v1/ledger/stale"), "sql")
	// Enqueue needs Redis only.
	expect(t, e.post(t, "/v1/topics/t/jobs", `{"id":"a"}`), http.StatusAccepted)
	// Cancelling a fresh job writes its history row, before Redis's step:
	// SQL down, it is refused whole (the job still waits); telling whether
	// an unknown one waits in the ledger needs SQL too.
	expectUnavailable(t, e.del(t, "/v1/topics/t/jobs/a"), "sql")
	if v := decode[httpapi.JobView](t, e.get(t, "/v1/topics/t/jobs/a")); v.State != "waiting" {
		t.Fatalf("a refused cancel changed the job: %+v", v)
	}
	expectUnavailable(t, e.del(t, "/v1/topics/t/jobs/nope"), "sql")
	// Rescheduling a fresh job of a redis topic needs no ledger either;
	// an unknown one is looked up there.
	expect(t, e.post(t, "/v1/topics/t/jobs", `{"id":"b","delay_ms":60000}`), http.StatusAccepted)
	expect(t, e.send(t, req{method: "PATCH", path: "/v1/topics/t/jobs/b", body: `{"shift_ms":1000}`}), http.StatusOK)
	expectUnavailable(t, e.send(t, req{method: "PATCH", path: "/v1/topics/t/jobs/c", body: `{"shift_ms":1000}`}), "sql")
	d := expectError(t, e.get(t, "/readyz"), http.StatusServiceUnavailable, httpapi.CodeNotReady, "")
	if d.Message != "unavailable: sql" {
		t.Fatalf("readyz message %q, want it to name sql alone", d.Message)
	}
	if strings.Contains(d.Message, "127.0.0.1") {
		t.Fatalf("readyz shows an address: %q", d.Message)
	}
}

package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// fixedCounts is an httpapi.SQLCounter whose counts the test sets.
type fixedCounts struct {
	mu     sync.Mutex
	counts map[string]ledger.ScheduledCount
	at     time.Time
}

func (f *fixedCounts) Counts() (map[string]ledger.ScheduledCount, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts, f.at
}

// countNow counts the ledger's scheduled rows as the relay does, beyond
// the horizon of SQL's clock now.
func countNow(t *testing.T, e *env, horizon time.Duration) map[string]ledger.ScheduledCount {
	t.Helper()
	ctx := testenv.Context(t)
	now, err := e.l.SQLNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.l.ScheduledCounts(ctx, now+horizon.Milliseconds())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Topic stats say each topic's durability and, for a durable topic, its
// waiting jobs in SQL as the relay last counted them (never counted per
// request); a durable topic whose jobs all wait beyond the horizon is
// listed though Redis has never heard of it.
func TestDurableTopicStats(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			counter := &fixedCounts{}
			testDurableTopicStats(t, newEnv(t, b, withDurable(time.Hour, "dur", "far", "idle"), withSQLCounts(counter)), counter)
		})
	}
}

func testDurableTopicStats(t *testing.T, e *env, counter *fixedCounts) {
	expect(t, e.post(t, "/v1/topics/dur/jobs", `{"id":"soon","delay_ms":60000}`), http.StatusAccepted)
	expect(t, e.post(t, "/v1/topics/dur/jobs", `{"id":"later","delay_ms":10800000}`), http.StatusAccepted)
	expect(t, e.post(t, "/v1/topics/far/jobs", `{"id":"later","delay_ms":10800000}`), http.StatusAccepted)
	expect(t, e.post(t, "/v1/topics/plain/jobs", `{"id":"1"}`), http.StatusAccepted)

	// Before the relay's first count: the durability, no SQL counts.
	s := decode[httpapi.TopicStats](t, e.get(t, "/v1/topics/dur"))
	if s.Durability != "durable" || s.SQL != nil || s.Due != 1 {
		t.Fatalf("stats of dur before a count: %+v", s)
	}
	at := time.Now().Truncate(time.Millisecond)
	counter.mu.Lock()
	counter.counts, counter.at = countNow(t, e, time.Hour), at
	counter.mu.Unlock()

	s = decode[httpapi.TopicStats](t, e.get(t, "/v1/topics/dur"))
	want := httpapi.SQLCounts{Waiting: 2, BeyondHorizon: 1, CountedAt: at.UnixMilli()}
	if s.Durability != "durable" || s.SQL == nil || *s.SQL != want || s.Due != 1 {
		t.Fatalf("stats of dur: %+v (sql %+v), want durable, sql %+v and 1 job in Redis", s, s.SQL, want)
	}
	if s := decode[httpapi.TopicStats](t, e.get(t, "/v1/topics/plain")); s.Durability != "redis" || s.SQL != nil {
		t.Fatalf("stats of a redis topic: %+v", s)
	}
	// A durable topic with nothing waiting: zero counts, not none.
	if s := decode[httpapi.TopicStats](t, e.get(t, "/v1/topics/idle")); s.Durability != "durable" || s.SQL == nil || s.SQL.Waiting != 0 {
		t.Fatalf("stats of an idle durable topic: %+v", s)
	}
	r := e.get(t, "/v1/topics")
	if !strings.Contains(string(r.body), `"durability":"durable","sql":{"waiting":1,"beyond_horizon":1,`) {
		t.Errorf("GET /v1/topics JSON lacks far's SQL counts: %s", r.body)
	}
	list := decode[httpapi.TopicList](t, r)
	var names []string
	for _, ts := range list.Topics {
		names = append(names, ts.Topic+"/"+ts.Durability)
	}
	if got := strings.Join(names, " "); got != "dur/durable far/durable plain/redis" {
		t.Fatalf("topics %s, want dur, far (in SQL only) and plain", got)
	}
}

// Without a relay in the process (no counter) the stats say the
// durability only.
func TestDurableTopicStatsWithoutRelay(t *testing.T) {
	e := newEnv(t, embedded, withDurable(time.Hour, "dur"))
	expect(t, e.post(t, "/v1/topics/dur/jobs", `{"id":"later","delay_ms":10800000}`), http.StatusAccepted)
	if s := decode[httpapi.TopicStats](t, e.get(t, "/v1/topics/dur")); s.Durability != "durable" || s.SQL != nil {
		t.Fatalf("stats without a relay: %+v", s)
	}
	if r := e.get(t, "/v1/topics"); strings.Contains(string(r.body), `"sql"`) || strings.Contains(string(r.body), `"dur"`) {
		t.Fatalf("topics without a relay, while dur's job waits in SQL only: %s", r.body)
	}
	// Once a job of dur is in Redis, the topics set lists dur.
	expect(t, e.post(t, "/v1/topics/dur/jobs", `{"id":"soon","delay_ms":60000}`), http.StatusAccepted)
	if list := decode[httpapi.TopicList](t, e.get(t, "/v1/topics")); len(list.Topics) != 1 || list.Topics[0].Topic != "dur" ||
		list.Topics[0].Durability != "durable" || list.Topics[0].Due != 1 {
		t.Fatalf("topics without a relay: %+v", list)
	}
	// Only new query parameters would need checks: the routes take none.
	expectError(t, e.get(t, "/v1/topics/dur?sql=true"), http.StatusBadRequest, httpapi.CodeUnknownField, "sql")
}

// A durable job due beyond the horizon waits in SQL only: GET shows it
// from its row with sql_only; once in Redis it is an ordinary job view.
// What Redis gets is the relay's: the time the job enters the horizon
// ({relay}:next) and the ring of its bell.
func TestDurableJobBeyondTheHorizonIsSQLOnly(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		r := e.post(t, "/v1/topics/dur/jobs", `{"id":"later","delay_ms":10800000,"payload":{"order":7},"max_attempts":3}`)
		expect(t, r, http.StatusAccepted)
		enq := decode[httpapi.EnqueueResponse](t, r)
		var other []string
		for _, k := range e.keys(t) {
			if !strings.HasSuffix(k, ":{relay}:next") && !strings.HasSuffix(k, ":{relay}:bell") {
				other = append(other, k)
			}
		}
		if len(other) != 0 {
			t.Fatalf("a job beyond the horizon reached Redis: %v", other)
		}
		v := decode[httpapi.JobView](t, e.get(t, "/v1/topics/dur/jobs/later"))
		if !v.SQLOnly || v.State != "waiting" || v.RunAt != enq.RunAt || v.MaxAttempts != 3 || string(v.Payload) != `{"order":7}` || v.EnqueuedAt == 0 {
			t.Fatalf("job beyond the horizon: %+v", v)
		}
		if !strings.Contains(string(e.get(t, "/v1/topics/dur/jobs/later").body), `"sql_only":true`) {
			t.Error("the JSON lacks sql_only: true")
		}
		expect(t, e.post(t, "/v1/topics/dur/jobs", `{"id":"soon","delay_ms":60000}`), http.StatusAccepted)
		r = e.get(t, "/v1/topics/dur/jobs/soon")
		if v := decode[httpapi.JobView](t, r); v.SQLOnly || v.State != "waiting" || strings.Contains(string(r.body), "sql_only") {
			t.Fatalf("job within the horizon: %s", r.body)
		}
		expectError(t, e.get(t, "/v1/topics/dur/jobs/nope"), http.StatusNotFound, httpapi.CodeNotFound, "")
		// A duplicate of a job waiting in SQL only: 200, its due time.
		r = e.post(t, "/v1/topics/dur/jobs", `{"id":"later"}`)
		expect(t, r, http.StatusOK)
		if d := decode[httpapi.EnqueueResponse](t, r); !d.Duplicate || d.RunAt != enq.RunAt {
			t.Fatalf("duplicate of a job in SQL only: %+v", d)
		}
		// Rescheduled from SQL: moved in its row and put in Redis at the
		// new time, even beyond the horizon (docs/design.md §4.14).
		r = e.patch(t, "/v1/topics/dur/jobs/later", `{"shift_ms":3600000}`)
		expect(t, r, http.StatusOK)
		if v := decode[httpapi.RescheduledView](t, r); v.RunAt != enq.RunAt+3600000 || v.PreviousRunAt != enq.RunAt || v.SQLOnly {
			t.Fatalf("rescheduled from SQL: %s", r.body)
		}
		if v := decode[httpapi.JobView](t, e.get(t, "/v1/topics/dur/jobs/later")); v.SQLOnly || v.RunAt != enq.RunAt+3600000 {
			t.Fatalf("after the reschedule: %+v", v)
		}
		row, err := e.l.Row(testenv.Context(t), "dur", "later")
		if err != nil || row.RunAt != enq.RunAt+3600000 {
			t.Fatalf("row %+v, %v", row, err)
		}
	}, withDurable(time.Hour, "dur"))
}

// With SQL down a durable enqueue is 503 naming sql and writes nothing;
// a redis topic's enqueue goes on.
func TestDurableEnqueueWithSQLDown(t *testing.T) {
	t.Parallel()
	rdb, ns := testenv.MiniRedis(t)
	db := unreachableSQL(t)
	e := apiOnDurable(t, rdb, ns, db, "dur")
	expectUnavailable(t, e.post(t, "/v1/topics/dur/jobs", `{"id":"a"}`), "sql")
	expectUnavailable(t, e.post(t, "/v1/topics/dur/jobs:batch", `{"jobs":[{"id":"a"}]}`), "sql")
	if keys := e.keys(t); len(keys) != 0 {
		t.Fatalf("a refused durable enqueue wrote to Redis: %v", keys)
	}
	expect(t, e.post(t, "/v1/topics/plain/jobs", `{"id":"a"}`), http.StatusAccepted)
}

// apiOnDurable serves the API over rdb (namespace ns) and db with topics
// durable.
func apiOnDurable(t *testing.T, rdb redis.UniversalClient, ns string, db *gorm.DB, topics ...string) *env {
	t.Helper()
	l, err := ledger.New(db, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := map[string]queue.Durability{}
	for _, topic := range topics {
		d[topic] = queue.DurabilityDurable
	}
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns, Store: l, TopicDurability: d})
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Deps{Queue: q, Ledger: l, Logger: testLogger(&testenv.SyncBuffer{})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &env{q: q, l: l, rdb: rdb, ns: ns, srv: srv}
}

// With Redis down a durable enqueue is still 202: the row is committed,
// and the relay pushes the job once Redis is back.
func TestDurableEnqueueWithRedisDown(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RefusedAddr(t), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	db := testenv.SQLite(t)
	l, err := ledger.New(db, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Migrate(testenv.Context(t)); err != nil {
		t.Fatal(err)
	}
	e := apiOnDurable(t, rdb, "", db, "dur")

	expect(t, e.post(t, "/v1/topics/dur/jobs", `{"id":"a","delay_ms":1000}`), http.StatusAccepted)
	row, err := ledgerops.Of(e.l).Lookup(testenv.Context(t), "dur", "a")
	if err != nil || row == nil || row.State != queue.StateWaiting {
		t.Fatalf("the row of a job accepted with Redis down: %+v, %v", row, err)
	}
	expectUnavailable(t, e.post(t, "/v1/topics/plain/jobs", `{"id":"a"}`), "redis")
}

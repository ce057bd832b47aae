package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/tcpproxy"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// TestFaultDurableServeRedisDownAndSQLCut runs the built program (`delayq
// serve`, topic t durable in its configuration) on a redis-server of the
// test's own, its MariaDB link through a TCP proxy (docs/design.md §4.11,
// §6):
//
//   - Redis stopped: every POST /v1/topics/t/jobs answers 202 (the job is
//     committed to SQL; its push is left to the relay). Redis restarted
//     empty: the relay in serve reloads the horizon and every job runs (a
//     worker of the test's own handles topic t: serve has no handler for it).
//   - MariaDB cut while enqueues, single and batches, go on: every answer is
//     202/200 or 503 backend_unavailable naming sql; a job in Redis always
//     has its row; a request answered 503 wrote all its jobs or none (a
//     commit whose answer the cut lost is all of them), and a request
//     accepted wrote all. Then exactly the jobs with rows run.
func TestFaultDurableServeRedisDownAndSQLCut(t *testing.T) {
	bin := buildBinary(t)
	srv := testenv.StartRedis(t, testenv.RedisOptions{})
	dsn := testenv.MySQLDSN(t)
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := tcpproxy.New(t, cfg.Addr)
	cfg.Addr = proxy.Addr()
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = time.Second, 2*time.Second, 2*time.Second
	conf := filepath.Join(t.TempDir(), "delayq.yaml")
	yaml := "queue:\n  push_timeout: 200ms\n  topics:\n    t: {durability: durable}\n    order_close: {durability: durable}\n"
	if err := os.WriteFile(conf, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	port := testenv.FreePort(t)
	serve := start(t, bin, serveEnv("dq", cfg.FormatDSN(), port, "DELAYQ_REDIS_ADDRS="+srv.Addr), "serve", "--config", conf)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHTTP(t, base+"/readyz")

	d := newDrainer(t, srv, dsn)
	ctx := testenv.Context(t)

	// Redis down: every durable enqueue is accepted.
	srv.Stop(t)
	k := scaleChaos(50, 500)
	began := time.Now()
	var down []string
	for i := range k {
		id := fmt.Sprintf("down%d", i)
		resp, err := http.Post(base+"/v1/topics/t/jobs", "application/json", strings.NewReader(fmt.Sprintf(`{"id":%q}`, id)))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("enqueue %s with Redis down: %d %s", id, resp.StatusCode, b.String())
		}
		down = append(down, id)
	}
	t.Logf("%d enqueues with Redis down, all 202, in %s", k, time.Since(began).Round(time.Millisecond))
	// Redis stays down 3 s more: every job is overdue past the relay's
	// grace when it comes back, and no relay pass that began before the
	// outage (its Redis calls retrying) outlasts it, so only the relay's
	// reload (no mark in the new Redis) puts them back in time (the
	// recoverer's stale scan, its backstop, waits a minute).
	last := time.Now()
	testenv.WaitFor(ctx, t, "3 s of outage after the last enqueue", func() bool { return time.Since(last) >= 3*time.Second })
	srv.Restart(t)
	run := d.start(t)
	d.waitRan(t, down)
	run.Stop()

	// MariaDB cut during enqueues.
	reqs := enqueueLoop(t, base, func(ok, unavailable int) bool {
		switch {
		case ok >= 20 && unavailable == 0:
			proxy.Cut()
		case unavailable >= 20:
			proxy.Restore()
			return ok < 60
		}
		return true
	})
	rows := d.rows(t)
	inRedis, err := d.rdb.HKeys(ctx, "dq:{t}:job").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range inRedis {
		if !rows[id] {
			t.Errorf("%s is in Redis without its ledger row", id)
		}
	}
	var want []string
	counts := map[int]int{}
	ambiguous := 0
	for _, r := range reqs {
		counts[r.code]++
		have := 0
		for _, id := range r.ids {
			if rows[id] {
				have++
				want = append(want, id)
			}
		}
		switch {
		case r.code == http.StatusAccepted || r.code == http.StatusOK:
			if have != len(r.ids) {
				t.Errorf("%s answered %d, but %d of its %d jobs have rows", r.what, r.code, have, len(r.ids))
			}
		case r.code == http.StatusServiceUnavailable:
			if r.errCode != "backend_unavailable" || !strings.Contains(r.message, "sql") {
				t.Errorf("%s answered 503 %s %q, want backend_unavailable naming sql", r.what, r.errCode, r.message)
			}
			if have != 0 && have != len(r.ids) {
				t.Errorf("%s answered 503 and wrote %d of its %d jobs: half-written", r.what, have, len(r.ids))
			}
			if have != 0 {
				ambiguous++
			}
		default:
			t.Errorf("%s answered %d %s %s", r.what, r.code, r.errCode, r.message)
		}
	}
	t.Logf("MariaDB cut during enqueues: answers by status %v; %d answered 503 though committed (the cut took the answer)", counts, ambiguous)
	d.start(t)
	d.waitRan(t, want)
	testenv.WaitFor(ctx, t, "the ledger empty", func() bool { return len(d.rows(t)) == 0 })
	if n := d.ranCount(); n != len(down)+len(want) {
		t.Errorf("%d jobs ran, want %d: some ran without their row", n, len(down)+len(want))
	}
	if code := serve.stop(t); code != 0 {
		t.Errorf("serve exited %d after SIGTERM", code)
	}
}

func scaleChaos(short, long int) int {
	if os.Getenv("DELAYQ_CHAOS") == "long" {
		return long
	}
	return short
}

// request is one enqueue request of enqueueLoop and its answer.
type request struct {
	what, errCode, message string
	ids                    []string
	code                   int
}

// enqueueLoop sends enqueues to topic t from four goroutines, alternately
// one job and a batch of five, until more says stop; more is asked after
// each answer (one call at a time) with the counts of answers so far
// (202/200, and 503), so what it does happens while other requests are in
// flight.
func enqueueLoop(t *testing.T, base string, more func(ok, unavailable int) bool) []request {
	t.Helper()
	var mu sync.Mutex
	var reqs []request
	ok, unavailable, next, done := 0, 0, 0, false
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := done || i > 100000
				mu.Unlock()
				if stop {
					return
				}
				r := sendEnqueue(base, i)
				mu.Lock()
				reqs = append(reqs, r)
				switch r.code {
				case http.StatusOK, http.StatusAccepted:
					ok++
				case http.StatusServiceUnavailable:
					unavailable++
				}
				if !done && !more(ok, unavailable) {
					done = true
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return reqs
}

// sendEnqueue sends enqueue request i: one job when i is even, else a
// batch of five. A transport error is answer 0.
func sendEnqueue(base string, i int) request {
	r := request{what: fmt.Sprintf("request %d", i)}
	var url, body string
	if i%2 == 0 {
		r.ids = []string{fmt.Sprintf("s%d", i)}
		url, body = base+"/v1/topics/t/jobs", fmt.Sprintf(`{"id":%q}`, r.ids[0])
	} else {
		var jobs []string
		for j := range 5 {
			r.ids = append(r.ids, fmt.Sprintf("b%d-%d", i, j))
			jobs = append(jobs, fmt.Sprintf(`{"id":%q}`, r.ids[j]))
		}
		url, body = base+"/v1/topics/t/jobs:batch", `{"jobs":[`+strings.Join(jobs, ",")+`]}`
	}
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		r.message = err.Error()
		return r
	}
	defer resp.Body.Close()
	r.code = resp.StatusCode
	var e struct {
		Error struct{ Code, Message string }
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	r.errCode, r.message = e.Error.Code, e.Error.Message
	return r
}

// drainer is the test's worker for topic t over the same Redis and ledger
// as serve (directly, not through the proxy); it counts runs per job.
type drainer struct {
	rdb *redis.Client
	led *ledger.Ledger
	q   *dataplane.Client

	mu   sync.Mutex
	runs map[string]int
	ran  testenv.Event
}

func newDrainer(t *testing.T, srv *testenv.RedisServer, dsn string) *drainer {
	t.Helper()
	db, err := gorm.Open(mysql.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s, err := db.DB(); err == nil {
			_ = s.Close()
		}
	})
	d := &drainer{rdb: srv.Client(t), runs: map[string]int{}}
	if d.led, err = ledger.New(db, ledger.Options{}); err != nil {
		t.Fatal(err)
	}
	d.q, err = dataplane.New(d.rdb, queue.Config{Namespace: "dq", Store: d.led,
		TopicDurability: map[string]queue.Durability{"t": queue.DurabilityDurable}})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// start runs a worker on topic t until the test ends or the result is
// stopped.
func (d *drainer) start(t *testing.T) *testenv.Running {
	t.Helper()
	w, err := dataplane.NewWorker(d.q, ledgerops.Of(d.led), queue.WorkerConfig{ID: "drainer", Logger: testenv.QuietLogger(),
		ErrorBackoffMin: 20 * time.Millisecond, ErrorBackoffMax: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h := queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		d.mu.Lock()
		d.runs[j.ID]++
		d.mu.Unlock()
		d.ran.Notify()
		return nil
	})
	if err := w.Handle("t", h, queue.TopicConfig{Concurrency: 16}); err != nil {
		t.Fatal(err)
	}
	return testenv.Start(t, w.Run)
}

// waitRan waits until each of ids ran once, and fails t if one ran twice.
func (d *drainer) waitRan(t *testing.T, ids []string) {
	t.Helper()
	missing := func() []string {
		d.mu.Lock()
		defer d.mu.Unlock()
		var out []string
		for _, id := range ids {
			if d.runs[id] == 0 {
				out = append(out, id)
			}
		}
		return out
	}
	d.ran.Wait(testenv.ContextTimeout(t, time.Minute), t, fmt.Sprintf("%d jobs to run", len(ids)),
		func() bool { return len(missing()) == 0 },
		func() string { m := missing(); return fmt.Sprintf("%d missing, e.g. %v", len(m), m[:min(5, len(m))]) })
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range ids {
		if d.runs[id] != 1 {
			t.Errorf("%s ran %d times", id, d.runs[id])
		}
	}
}

func (d *drainer) ranCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.runs)
}

// rows returns the ids of topic t's ledger rows.
func (d *drainer) rows(t *testing.T) map[string]bool {
	t.Helper()
	var ids []string
	err := d.led.DB().WithContext(testenv.Context(t)).Table(d.led.LedgerTable()).Where("topic = ?", "t").Pluck("job_id", &ids).Error
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out
}

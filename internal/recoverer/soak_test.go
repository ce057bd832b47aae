package recoverer_test

import (
	"context"
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/tcpproxy"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// TestSoak runs the whole system under steady load while faults strike at
// random: three worker processes (each with its recoverer) on two topics,
// the delayq API process taking the jobs, a redis-server with the AOF
// (appendfsync always) and MariaDB behind a proxy on the workers' ledger
// links. The load mixes jobs due now, in a few seconds and far ahead, some
// failing and retrying, some designed to die. The injector SIGKILLs
// workers, restarts Redis, cuts MariaDB and pauses workers past their
// lease. Then the test waits for quiescence and checks from the database
// that no job is missing, that every duplicate run has a fault to explain
// it, that the ledger is empty and that exactly the jobs designed to die
// are dead letters; it prints a table with the figures.
//
// make test runs it for 60 s; make soak (DELAYQ_SOAK=long) for 10 minutes.
// DELAYQ_SOAK_DURATION and DELAYQ_SOAK_SEED override the length and the
// random seed (the seed is logged, so a failing run can be replayed).
func TestSoak(t *testing.T) {
	cfg := soakSettings(t)
	t.Logf("soak: %s, %d jobs/s, seed %d", cfg.duration, cfg.rate, cfg.seed)
	rng := rand.New(rand.NewSource(cfg.seed))
	topics := []string{"soak-a", "soak-b"}

	srv := testenv.StartRedis(t, testenv.RedisOptions{AOF: true, Fsync: "always"})
	fdb := newFaultDB(t)
	if err := fdb.db.Exec(runsTable).Error; err != nil {
		t.Fatal(err)
	}
	dsn, err := gomysql.ParseDSN(fdb.dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := tcpproxy.New(t, dsn.Addr)
	dsn.Addr = proxy.Addr()
	dsn.Timeout, dsn.ReadTimeout, dsn.WriteTimeout = time.Second, 2*time.Second, 2*time.Second
	const ns = "soak"
	mem := newMemSampler()
	mem.watch(fmt.Sprintf("redis-server.%d", srv.Pid()), srv.Pid())

	api, base := startAPI(t, srv.Addr, ns, fdb.dsn)
	mem.watch("api", api.pid())
	cl := &soakCluster{
		redis: srv, proxy: proxy, mem: mem, lease: cfg.lease,
		spec: soakSpec{
			RedisAddr: srv.Addr, Namespace: ns, DSN: dsn.FormatDSN(), BusinessDSN: fdb.dsn,
			Topics: topics, Concurrency: 8, Lease: cfg.lease, BackoffBase: 100 * time.Millisecond,
			Schedule: "@every 2s", Grace: time.Second,
		},
		workers: make([]*child, cfg.workers), gens: make([]int, cfg.workers),
	}
	for i := range cl.workers {
		cl.startWorker(t, i)
	}

	ctx, stopSampling := context.WithCancel(context.Background())
	samplerDone := make(chan struct{})
	go func() { defer close(samplerDone); mem.run(ctx, 500*time.Millisecond) }()
	defer func() { stopSampling(); <-samplerDone }()

	began := time.Now()
	load := newSoakLoad(base, topics, cfg.rate, cfg.far, cfg.seed)
	loadCtx, stopLoad := context.WithTimeout(context.Background(), cfg.duration)
	defer stopLoad()
	loadDone := make(chan struct{})
	go func() { defer close(loadDone); load.run(loadCtx, t, 2*time.Minute) }()

	// Faults, on this goroutine (they start and stop processes), one at a
	// time; each kind once in a random order first, so even a short run
	// has all four, then any kind.
	var faults []faultEvent
	order := rng.Perm(len(faultKinds))
	for n := 0; ; n++ {
		gap := cfg.gap[0] + time.Duration(rng.Int63n(int64(cfg.gap[1]-cfg.gap[0])))
		select {
		case <-loadCtx.Done():
		case <-time.After(gap):
		}
		if loadCtx.Err() != nil {
			break
		}
		kind := faultKinds[rng.Intn(len(faultKinds))]
		if n < len(order) {
			kind = faultKinds[order[n]]
		}
		faults = append(faults, cl.inject(t, kind, rng))
	}
	<-loadDone
	loadEnded := time.Now()
	accepted, statuses, maxRunAt := load.snapshot()
	t.Logf("load ended: %d jobs accepted; answers by status: %v", len(accepted), statuses)

	q := queueClient(t, srv.Addr, ns)
	until := time.Until(time.UnixMilli(maxRunAt)) + 2*time.Minute
	testenv.WaitFor(testenv.ContextTimeout(t, until), t, "quiescence: every job handled or dead, ledger empty, nothing due or in flight", func() bool {
		return soakQuiet(t, fdb, q, topics, accepted)
	}, func() string { return soakState(t, fdb, q, topics) })
	quiet := time.Now()
	for _, w := range cl.workers {
		w.stop(t, 30*time.Second)
		w.checkNoRace(t)
	}
	api.stop(t, 30*time.Second)
	api.checkNoRace(t)
	stopSampling()
	<-samplerDone

	res := checkSoak(t, fdb, accepted, faults, 3*cfg.lease.Milliseconds()+1000)
	res.printTable(t, cfg, faults, mem.report(began, loadEnded), loadEnded.Sub(began), quiet.Sub(loadEnded))
}

// soakConfig is one soak run's settings.
type soakConfig struct {
	duration time.Duration
	rate     int // jobs a second
	workers  int
	lease    time.Duration
	far      [2]time.Duration // the delay range of far-ahead jobs
	gap      [2]time.Duration // the pause range between faults
	seed     int64
}

func soakSettings(t *testing.T) soakConfig {
	c := soakConfig{duration: 60 * time.Second, rate: 150, workers: 3, lease: 2 * time.Second,
		far: [2]time.Duration{10 * time.Second, 30 * time.Second}, gap: [2]time.Duration{2 * time.Second, 6 * time.Second},
		seed: time.Now().UnixNano()}
	if os.Getenv("DELAYQ_SOAK") == "long" {
		// 150 jobs/s like the short run: at 300 the rig itself saturates on
		// 2 vCPUs (race-instrumented workers, an fsync per Redis write with
		// appendfsync always, a committed SQL row per run) and lateness
		// measures the backlog, not delayq (p50 8 s seen).
		c.duration = 10 * time.Minute
		c.far = [2]time.Duration{time.Minute, 3 * time.Minute}
		c.gap = [2]time.Duration{3 * time.Second, 15 * time.Second}
	}
	if v := os.Getenv("DELAYQ_SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("DELAYQ_SOAK_DURATION=%q: %v", v, err)
		}
		c.duration = d
	}
	if v := os.Getenv("DELAYQ_SOAK_SEED"); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("DELAYQ_SOAK_SEED=%q: %v", v, err)
		}
		c.seed = s
	}
	return c
}

// runsTable is where the soak handler writes each successful run.
const runsTable = "CREATE TABLE runs (token CHAR(16) NOT NULL PRIMARY KEY, topic VARCHAR(64) NOT NULL, job_id VARCHAR(64) NOT NULL, " +
	"attempt INT NOT NULL, worker VARCHAR(64) NOT NULL, started_ms BIGINT NOT NULL, run_at BIGINT NOT NULL, " +
	"unrecorded INT NOT NULL, KEY (job_id)) ENGINE=InnoDB"

// startAPI runs `delayq serve` with only the API on, as a child process,
// and returns it with its base URL once /healthz answers.
func startAPI(t *testing.T, redisAddr, ns, dsn string) (*child, string) {
	listen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	conf := filepath.Join(t.TempDir(), "delayq.yaml")
	yaml := fmt.Sprintf(`log: {level: info, format: json}
redis: {mode: single, addrs: [%q], namespace: %q}
sql: {driver: mysql, dsn: %q, auto_migrate: false}
http: {listen: %q}
orders: {enabled: false}
`, redisAddr, ns, dsn, listen)
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	api := startChild(t, "api", "api", apiSpec{Args: []string{"serve", "--config", conf, "--no-workers", "--no-recovery", "--no-sweeper"}})
	base := "http://" + listen
	testenv.WaitFor(testenv.Context(t), t, "the API's /healthz", func() bool {
		if api.exited() {
			t.Fatalf("the API exited: %s", tail(api.log(), 3000))
		}
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return api, base
}

// queueClient returns a queue client of the test's own on addr.
func queueClient(t *testing.T, addr, ns string) *dataplane.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

package recoverer_test

import (
	"context"
	"fmt"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"
	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// Pause / resume across worker processes (docs/design.md §4.13): each child
// is a worker process as the app runs one (worker, recoverer, relay), whose
// handler logs every run with the instant of its claim on Redis's clock.

const pauseTopic = "pz"

// pauseWorkerSpec configures a pause test's worker process.
type pauseWorkerSpec struct {
	RedisAddr, Namespace, DSN, WorkerID string
	Durable                             bool
	Concurrency                         int
	Lease                               time.Duration
}

const pauseRunsDDL = "CREATE TABLE pause_runs (id BIGINT AUTO_INCREMENT PRIMARY KEY, job_id VARCHAR(64) NOT NULL, " +
	"attempt INT NOT NULL, claim_ms BIGINT NOT NULL, worker VARCHAR(64) NOT NULL, KEY (job_id)) ENGINE=InnoDB"

func runPauseWorkerProc(s pauseWorkerSpec, log *logrus.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	exitWithParent(log)
	rdb := redis.NewClient(&redis.Options{Addr: s.RedisAddr})
	defer rdb.Close()
	db, led, err := openPool(s.DSN, 8)
	if err != nil {
		return err
	}
	qc := queue.Config{Namespace: s.Namespace, Store: led}
	if s.Durable {
		qc.TopicDurability = map[string]queue.Durability{pauseTopic: queue.DurabilityDurable}
	}
	q, err := dataplane.New(rdb, qc)
	if err != nil {
		return err
	}
	rec, err := recoverer.New(q, ledgerops.Of(led), recoverer.Config{Schedule: "@every 1s", Grace: 5 * time.Second, HeartbeatInterval: s.Lease / 3, Logger: log})
	if err != nil {
		return err
	}
	relay, err := recoverer.NewRelay(q, ledgerops.Of(led), recoverer.RelayConfig{Logger: log})
	if err != nil {
		return err
	}
	w, err := dataplane.NewWorker(q, ledgerops.Of(led), queue.WorkerConfig{ID: s.WorkerID, Logger: log,
		ErrorBackoffMin: 20 * time.Millisecond, ErrorBackoffMax: 250 * time.Millisecond,
		OnRedisReconnect: rec.RedisReconnected,
	})
	if err != nil {
		return err
	}
	lease := s.Lease
	h := queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		// The claim's instant on Redis's clock: its lease deadline less
		// the lease (claim.lua sets LeaseUntil = now + lease).
		claimed := j.LeaseUntil - lease.Milliseconds()
		return retryUntil(ctx, func() error {
			return db.WithContext(ctx).Exec("INSERT INTO pause_runs (job_id, attempt, claim_ms, worker) VALUES (?, ?, ?, ?)",
				j.ID, j.Attempt, claimed, s.WorkerID).Error
		})
	})
	if err := w.Handle(pauseTopic, h, queue.TopicConfig{Concurrency: s.Concurrency, Lease: lease}); err != nil {
		return err
	}
	relayDone := make(chan struct{})
	go func() { defer close(relayDone); _ = relay.Run(ctx) }()
	log.WithField("worker", s.WorkerID).Info("pause worker ready")
	err = runWorker(ctx, w, rec)
	<-relayDone
	return err
}

// pauseWorld is a pause test's world: its own redis-server, a database with
// the ledger and the run log, a client, and n worker processes.
type pauseWorld struct {
	srv *testenv.RedisServer
	rdb redis.UniversalClient
	db  *gorm.DB
	led *ledger.Ledger
	q   *dataplane.Client
}

func newPauseWorld(t *testing.T, n int, durable bool) pauseWorld {
	t.Helper()
	srv := testenv.StartRedis(t, testenv.RedisOptions{})
	rdb := srv.Client(t)
	dsn := testenv.MySQLDSN(t)
	db, led := openLedgerDB(t, dsn, pauseRunsDDL)
	qc := queue.Config{Namespace: "dq", Store: led}
	if durable {
		qc.TopicDurability = map[string]queue.Durability{pauseTopic: queue.DurabilityDurable}
	}
	q, err := dataplane.New(rdb, qc)
	if err != nil {
		t.Fatal(err)
	}
	ws := make([]*child, n)
	for i := range ws {
		name := fmt.Sprintf("pw%d", i)
		ws[i] = startChild(t, name, "pauseworker", pauseWorkerSpec{RedisAddr: srv.Addr, Namespace: "dq", DSN: dsn,
			WorkerID: name, Durable: durable, Concurrency: 20, Lease: 10 * time.Second})
	}
	for _, w := range ws {
		testenv.WaitFor(testenv.Context(t), t, w.name+" ready", func() bool {
			return len(w.logLines(`"msg":"pause worker ready"`)) > 0
		})
	}
	pw := pauseWorld{srv: srv, rdb: rdb, db: db, led: led, q: q}
	pw.waitSubscribed(t, n)
	t.Cleanup(func() {
		for _, w := range ws {
			w.checkNoRace(t)
		}
	})
	return pw
}

// waitSubscribed waits until n processes listen on the topic's wake channel.
func (pw pauseWorld) waitSubscribed(t *testing.T, n int) {
	t.Helper()
	ch := pw.q.WakeChannel(pauseTopic)
	testenv.WaitFor(testenv.Context(t), t, fmt.Sprintf("%d subscribers", n), func() bool {
		m, err := pw.rdb.PubSubNumSub(testenv.Context(t), ch).Result()
		return err == nil && m[ch] == int64(n)
	})
}

func (pw pauseWorld) count(t *testing.T, q string) int64 {
	t.Helper()
	var n int64
	if err := pw.db.WithContext(testenv.Context(t)).Raw(q).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPauseAcrossProcesses: three worker processes handle a steady stream of
// jobs. A pause stops claims in every process: no claim in any of them is
// later than 200 ms after Pause returned (claim.lua checks the key in the
// claim's atomic step, so in fact none is later than the key's write). Jobs
// keep falling due and wait; the resume drains them all.
func TestPauseAcrossProcesses(t *testing.T) {
	pw := newPauseWorld(t, 3, false)
	ctx := testenv.Context(t)

	var enq testenv.Counter
	stopEnq := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a job every 2 ms, due at once
		defer wg.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stopEnq:
				return
			case <-tick.C:
			}
			if _, err := pw.q.Enqueue(ctx, pauseTopic, queue.NewJob{ID: fmt.Sprintf("s%d", i)}); err != nil {
				t.Error(err)
				return
			}
			enq.Add(1)
		}
	}()
	defer func() { close(stopEnq); wg.Wait() }()

	testenv.WaitFor(ctx, t, "jobs running in every process", func() bool {
		return pw.count(t, "SELECT COUNT(DISTINCT worker) FROM pause_runs") == 3
	})
	if _, err := pw.q.Pause(ctx, pw.led, pauseTopic, "test"); err != nil {
		t.Fatal(err)
	}
	pausedAt, err := pw.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	atPause := enq.Load()
	// Jobs keep falling due: 300 more (0.6 s of the stream) is the window
	// in which a process that missed the pause would claim some.
	enq.WaitAtLeast(ctx, t, atPause+300, "enqueues after the pause")
	ranAtPause := pw.count(t, "SELECT COUNT(*) FROM pause_runs")

	lastClaim := pw.count(t, "SELECT COALESCE(MAX(claim_ms), 0) FROM pause_runs")
	late := lastClaim - pausedAt.UnixMilli()
	t.Logf("last claim in any process: %d ms after Pause returned (bound 200 ms)", late)
	if late > 200 {
		t.Fatalf("a claim %d ms after the pause returned", late)
	}
	st, err := pw.q.Stats(ctx, pauseTopic)
	if err != nil {
		t.Fatal(err)
	}
	// The enqueuer is one goroutine, so one of the 300 may have been in
	// flight at the pause: written, and claimed, before it.
	if st.DueNow < 299 {
		t.Fatalf("%d jobs due and waiting while paused, want at least 299 of the 300 enqueued after it", st.DueNow)
	}
	close(stopEnq)
	wg.Wait()
	stopEnq = make(chan struct{}) // for the deferred close
	total := enq.Load()

	if _, err := pw.q.Resume(ctx, pw.led, pauseTopic, "test"); err != nil {
		t.Fatal(err)
	}
	resumedAt, err := pw.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(ctx, t, fmt.Sprintf("all %d jobs run after the resume", total), func() bool {
		return pw.count(t, "SELECT COUNT(DISTINCT job_id) FROM pause_runs") == total
	})
	// How soon each process claimed after the resume: the wake, not a poll.
	var firsts []struct {
		Worker string
		First  int64
	}
	if err := pw.db.WithContext(ctx).Raw("SELECT worker, MIN(claim_ms) AS first FROM pause_runs WHERE claim_ms >= ? GROUP BY worker",
		resumedAt.UnixMilli()-50).Scan(&firsts).Error; err != nil {
		t.Fatal(err)
	}
	// A fetcher that missed the wake would claim at its pausedRecheck (30 s)
	// at the earliest: 5 s tells the two apart on any host.
	if len(firsts) == 0 {
		t.Fatal("no claim after the resume")
	}
	for _, f := range firsts {
		after := f.First - resumedAt.UnixMilli()
		t.Logf("%s: first claim %d ms after Resume returned", f.Worker, after)
		if after > 5000 {
			t.Errorf("%s claimed first %d ms after the resume: it slept to its recheck instead of waking", f.Worker, after)
		}
	}
	t.Logf("%d jobs ran before the pause, %d after the resume", ranAtPause, total-ranAtPause)
}

// TestPauseSurvivesRedisWipe: a durable topic, paused, with jobs due; its
// Redis is killed and restarted empty. The relay reloads the jobs from SQL,
// after putting the pause back from SQL, so none of them runs; the resume
// runs them all.
func TestPauseSurvivesRedisWipe(t *testing.T) {
	testPauseSurvivesRedisWipe(t, 1)
}

// TestPartitionedPauseSurvivesRedisWipe: the same with a topic of 4
// partitions, which every worker process claims from before the wipe (and
// so after it). Redis loses the layout key with the pauses; the relay puts
// the layout back from SQL before the pauses, so the pause reaches every
// partition before any job is pushed there, and none runs until the
// resume.
func TestPartitionedPauseSurvivesRedisWipe(t *testing.T) {
	testPauseSurvivesRedisWipe(t, 4)
}

func testPauseSurvivesRedisWipe(t *testing.T, partitions int) {
	pw := newPauseWorld(t, 3, true)
	ctx := testenv.Context(t)
	parts := []string{pauseTopic}
	key := func(name, suffix string) string { return pw.q.Config().Namespace + ":{" + name + "}:" + suffix }
	if partitions > 1 {
		layout, err := pw.q.SetPartitions(ctx, pauseTopic, partitions)
		if err != nil {
			t.Fatal(err)
		}
		parts = layout.Names(pauseTopic)
		for _, p := range parts {
			ch := pw.q.WakeChannel(p)
			testenv.WaitFor(ctx, t, "3 processes claiming from "+p, func() bool {
				m, err := pw.rdb.PubSubNumSub(ctx, ch).Result()
				return err == nil && m[ch] == 3
			})
		}
	}
	if _, err := pw.q.Pause(ctx, pw.led, pauseTopic, "test"); err != nil {
		t.Fatal(err)
	}
	const n = 200
	jobs := make([]queue.NewJob, n)
	for i := range jobs {
		jobs[i] = queue.NewJob{ID: fmt.Sprintf("w%d", i)}
	}
	if _, err := pw.q.EnqueueBatch(ctx, pauseTopic, jobs); err != nil {
		t.Fatal(err)
	}
	due := func() int64 {
		var sum int64
		for _, p := range parts {
			c, err := pw.rdb.ZCard(ctx, key(p, "due")).Result()
			if err != nil {
				return -1
			}
			sum += c
		}
		return sum
	}
	testenv.WaitFor(ctx, t, "the jobs in Redis", func() bool { return due() == n })

	pw.srv.Kill(t)
	pw.srv.Restart(t)
	// The relay notices its mark is gone (≤ 200 ms) and reloads the
	// horizon: the jobs are due in Redis again, and the pause with them.
	testenv.WaitFor(ctx, t, "the relay's reload", func() bool { return due() == n })
	if st, err := pw.q.PauseOf(ctx, pauseTopic); err != nil || !st.Paused || st.By != "test" {
		t.Fatalf("after the wipe and reload: %+v, %v; want paused by test", st, err)
	}
	for _, p := range parts {
		if ok, err := pw.rdb.Exists(ctx, key(p, "paused")).Result(); err != nil || ok != 1 {
			t.Fatalf("after the wipe and reload %s is not paused (%v)", p, err)
		}
	}
	if partitions > 1 {
		want := []string{"1", strconv.Itoa(partitions)}
		if counts, err := pw.rdb.ZRange(ctx, key(pauseTopic, "layout"), 0, -1).Result(); err != nil || !slices.Equal(counts, want) {
			t.Fatalf("layout after the wipe: %v (%v), want %v", counts, err, want)
		}
	}
	// Every process re-subscribed (which wakes its fetchers: each claims
	// once and finds the topic paused).
	pw.waitSubscribed(t, 3)
	if c := due(); c != n {
		t.Fatalf("%d jobs due after the workers' claims, want all %d waiting", c, n)
	}
	if ran := pw.count(t, "SELECT COUNT(*) FROM pause_runs"); ran != 0 {
		t.Fatalf("%d jobs ran while paused", ran)
	}

	if _, err := pw.q.Resume(ctx, pw.led, pauseTopic, "test"); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(ctx, t, "all jobs run after the resume", func() bool {
		return pw.count(t, "SELECT COUNT(DISTINCT job_id) FROM pause_runs") == n
	})
}

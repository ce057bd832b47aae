package recoverer_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// The mains of the durable-topic fault tests' child processes: a worker
// process as the app runs one (worker, recoverer and relay side by side) on
// a durable topic, and an enqueuer that commits a transactional enqueue and
// dies before its push.

// durableWorkerSpec configures a durable worker process.
type durableWorkerSpec struct {
	RedisAddr, Namespace, DSN, WorkerID, Topic string
	Horizon                                    time.Duration
	Concurrency                                int
	Lease                                      time.Duration
	// Schedule and Grace: the recoverer's, wired to the worker's
	// OnRedisReconnect hook, as the app does.
	Schedule string
	Grace    time.Duration
	// MaxConns bounds the process's MariaDB pool: hundreds of handlers
	// must not take hundreds of the shared server's connections.
	MaxConns int
	// LedgerHold is the worker's (0: its default).
	LedgerHold time.Duration
	// RedisCluster: RedisAddr lists a Redis Cluster's nodes, separated by
	// commas.
	RedisCluster bool
}

// redisClient is the process's client to the spec's Redis.
func (s durableWorkerSpec) redisClient() redis.UniversalClient {
	if s.RedisCluster {
		// The program's redis.cluster_reload_every.
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(s.RedisAddr, ","), ClusterStateReloadInterval: 2 * time.Second})
	}
	return redis.NewClient(&redis.Options{Addr: s.RedisAddr})
}

// durablePayload is what a durable fault job carries: its due time (Unix
// ms, the RunAt it was enqueued with), and whether its first run blocks
// until the test sends "release" on the process's stdin.
type durablePayload struct {
	Due   int64 `json:"due"`
	Block bool  `json:"block,omitempty"`
	// Fail: every run fails (after its end is logged).
	Fail bool `json:"fail,omitempty"`
	// Sleep: each run works this long before its effect (ms).
	Sleep int `json:"sleep,omitempty"`
}

// enqueuerSpec configures an enqueuer process: in one transaction it
// enqueues Count jobs <Prefix><i> to Topic, due Delay + i*Spread/Count from
// now (Redis's clock; the payload says when), commits, prints "committed <results as JSON>" and then waits
// for a line on stdin before it would push: the test kills it there.
type enqueuerSpec struct {
	RedisAddr, Namespace, DSN, Topic, Prefix string
	Count                                    int
	Delay, Spread                            time.Duration
}

// stagedJob is one job of the enqueuer's "committed" line.
type stagedJob struct {
	ID    string `json:"id"`
	RunAt int64  `json:"run_at"`
}

// openPool opens dsn with at most maxConns connections (0: no bound).
func openPool(dsn string, maxConns int) (*gorm.DB, *ledger.Ledger, error) {
	db, err := gorm.Open(mysql.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", dsn, err)
	}
	if maxConns > 0 {
		sqlDB, err := db.DB()
		if err != nil {
			return nil, nil, err
		}
		sqlDB.SetMaxOpenConns(maxConns)
		sqlDB.SetMaxIdleConns(maxConns)
	}
	led, err := ledger.New(db, ledger.Options{})
	return db, led, err
}

// durableClient is a queue client whose topic is durable over led.
func durableClient(rdb redis.UniversalClient, ns, topic string, led *ledger.Ledger, horizon time.Duration) (*dataplane.Client, error) {
	return dataplane.New(rdb, queue.Config{
		Namespace:       ns,
		TopicDurability: map[string]queue.Durability{topic: queue.DurabilityDurable},
		Store:           led,
		Horizon:         horizon,
	})
}

func runDurableWorkerProc(s durableWorkerSpec, log *logrus.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	release := make(chan struct{})
	go readCommands(log, map[string]func(){"release": sync.OnceFunc(func() { close(release) })})
	rdb := s.redisClient()
	defer rdb.Close()
	db, led, err := openPool(s.DSN, s.MaxConns)
	if err != nil {
		return err
	}
	q, err := durableClient(rdb, s.Namespace, s.Topic, led, s.Horizon)
	if err != nil {
		return err
	}
	rec, err := recoverer.New(q, ledgerops.Of(led), recoverer.Config{Schedule: s.Schedule, Grace: s.Grace, HeartbeatInterval: s.Lease / 3, Logger: log})
	if err != nil {
		return err
	}
	relay, err := recoverer.NewRelay(q, ledgerops.Of(led), recoverer.RelayConfig{Logger: log})
	if err != nil {
		return err
	}
	w, err := dataplane.NewWorker(q, ledgerops.Of(led), queue.WorkerConfig{ID: s.WorkerID, Logger: log,
		ErrorBackoffMin: 20 * time.Millisecond, ErrorBackoffMax: 250 * time.Millisecond,
		ShutdownTimeout: 10 * time.Second, OnRedisReconnect: rec.RedisReconnected, LedgerHold: s.LedgerHold,
	})
	if err != nil {
		return err
	}
	h := &durableHandler{rdb: rdb, db: db, worker: s.WorkerID, release: release, led: led}
	tc := queue.TopicConfig{Concurrency: s.Concurrency, BatchSize: min(s.Concurrency, 100), Lease: s.Lease}
	if err := w.Handle(s.Topic, h, tc); err != nil {
		return err
	}
	relayDone := make(chan struct{})
	go func() { defer close(relayDone); _ = relay.Run(ctx) }()
	log.WithField("worker", s.WorkerID).Info("durable worker ready")
	err = runWorker(ctx, w, rec)
	<-relayDone
	return err
}

// readCommands runs the command named by each line of stdin; at EOF (the
// test binary is gone) it ends the process.
func readCommands(log logrus.FieldLogger, cmds map[string]func()) {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if f := cmds[strings.TrimSpace(in.Text())]; f != nil {
			f()
		}
	}
	log.Warn("stdin closed: the test is gone, exiting")
	os.Exit(3)
}

// durableHandler logs every run (a row of durable_runs: its job, attempt,
// due time and start on Redis's clock) and then commits the job's effect (a
// row of durable_effect) in the transaction that deletes its ledger row
// (ledger.Transactional): a second run of a job adds a run, never a second
// effect, unless the fencing is broken.
type durableHandler struct {
	rdb     redis.UniversalClient
	db      *gorm.DB
	worker  string
	release chan struct{}
	led     *ledger.Ledger
}

const insertDurableRun = "INSERT IGNORE INTO durable_runs (token, job_id, attempt, due_ms, start_ms, worker) VALUES (?, ?, ?, ?, ?, ?)"

// endDurableRun logs when a run ended (Redis's clock): for a success in
// the transaction of its effect, which deletes the job's ledger row, so
// that no later job of its ordering key can be recorded before it.
const endDurableRun = "UPDATE durable_runs SET end_ms = ? WHERE token = ?"

func (h *durableHandler) Handle(ctx context.Context, j *queue.Job) error {
	var start time.Time
	err := retryUntil(ctx, func() (err error) {
		start, err = h.rdb.Time(ctx).Result()
		return err
	})
	if err != nil {
		return err
	}
	var p durablePayload
	if err := json.Unmarshal(j.Payload, &p); err != nil {
		return queue.SkipRetry(fmt.Errorf("payload: %w", err))
	}
	token := newToken()
	err = retryUntil(ctx, func() error {
		return h.db.WithContext(ctx).Exec(insertDurableRun, token, j.ID, j.Attempt, p.Due, start.UnixMilli(), h.worker).Error
	})
	if err != nil {
		return err
	}
	ended := false
	defer func() {
		// A run cut short (its context ended) logs its end too.
		if !ended {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = retryUntil(ctx, func() error {
				end, err := h.rdb.Time(ctx).Result()
				if err != nil {
					return err
				}
				return h.db.WithContext(ctx).Exec(endDurableRun, end.UnixMilli(), token).Error
			})
		}
	}()
	if p.Block && j.Attempt == 1 {
		select {
		case <-h.release:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	if p.Sleep > 0 {
		select {
		case <-time.After(time.Duration(p.Sleep) * time.Millisecond):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	var end time.Time
	err = retryUntil(ctx, func() (err error) {
		end, err = h.rdb.Time(ctx).Result()
		return err
	})
	if err != nil {
		return err
	}
	if p.Fail {
		err := retryUntil(ctx, func() error { return h.db.WithContext(ctx).Exec(endDurableRun, end.UnixMilli(), token).Error })
		ended = err == nil
		return errors.Join(errors.New("fails on purpose"), err)
	}
	effect := ledger.Transactional(h.led, func(ctx context.Context, tx *gorm.DB, j *queue.Job) error {
		if err := h.writeEffect(ctx, tx, j); err != nil {
			return err
		}
		return tx.WithContext(ctx).Exec(endDurableRun, end.UnixMilli(), token).Error
	})
	err = ledger.RetryDeadlocks(ctx, func() error { return effect(ctx, j) })
	ended = err == nil
	return err
}

func (h *durableHandler) writeEffect(ctx context.Context, tx *gorm.DB, j *queue.Job) error {
	return tx.WithContext(ctx).Exec("INSERT INTO durable_effect (job_id, attempt, worker) VALUES (?, ?, ?)", j.ID, j.Attempt, h.worker).Error
}

// newToken names one run: a statement retried over a flaky link writes its
// row once.
func newToken() string {
	tok := make([]byte, 8)
	_, _ = rand.Read(tok)
	return hex.EncodeToString(tok)
}

func runEnqueuerProc(s enqueuerSpec, log *logrus.Logger) error {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: s.RedisAddr})
	defer rdb.Close()
	db, led, err := openPool(s.DSN, 4)
	if err != nil {
		return err
	}
	q, err := durableClient(rdb, s.Namespace, s.Topic, led, time.Hour)
	if err != nil {
		return err
	}
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		return err
	}
	jobs := make([]queue.NewJob, s.Count)
	for i := range jobs {
		due := now.Add(s.Delay + time.Duration(i)*s.Spread/time.Duration(s.Count)).UnixMilli()
		p, err := json.Marshal(durablePayload{Due: due})
		if err != nil {
			return err
		}
		jobs[i] = queue.NewJob{ID: fmt.Sprintf("%s%d", s.Prefix, i), Payload: p, RunAt: due}
	}
	var staged *dataplane.Staged
	err = db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		staged, err = q.EnqueueTx(ctx, led.Tx(tx), s.Topic, jobs...)
		return err
	})
	if err != nil {
		return err
	}
	out := make([]stagedJob, 0, len(jobs))
	for _, r := range staged.Results() {
		if r.Status != queue.BatchCreated {
			return fmt.Errorf("enqueue %s: %s", r.ID, r.Status)
		}
		out = append(out, stagedJob{ID: r.ID, RunAt: r.RunAt})
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	fmt.Printf("committed %s\n", b)
	// Between the commit and the push: the test kills the process here.
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		return errors.New("stdin closed before the push")
	}
	log.Warn("enqueuer was not killed: pushing")
	return q.Push(ctx, staged)
}

package recoverer_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
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

// The mains of the fault tests' child processes.

// workerSpec configures a worker process: it drains Topic, and each handled
// job writes its row in the business table handled (see faultDB).
type workerSpec struct {
	RedisAddr string
	Namespace string
	DSN       string // the ledger (and the recoverer)
	// BusinessDSN is where the handler writes, "" meaning DSN: a test that
	// cuts the ledger's link keeps the handlers' own writes going.
	BusinessDSN string
	WorkerID    string
	Topic       string
	Concurrency int
	Lease       time.Duration
	// HandlerSleep is the work each handler does before its write.
	HandlerSleep time.Duration
	// FailEvery > 0 makes every job whose number is a multiple of it fail
	// its first attempt, retried after RetryAfter: ledger rows in the
	// retrying state at any moment.
	FailEvery  int
	RetryAfter time.Duration
	// Schedule, if set, runs a recoverer in the process too (as the app
	// does), on that cron spec, with Grace, wired to the worker's
	// OnRedisReconnect hook.
	Schedule string
	Grace    time.Duration
}

// recovererSpec configures a recoverer process: it says "ready" on stdout,
// waits for a line on stdin, runs once, prints its report as JSON and exits.
type recovererSpec struct {
	RedisAddr string
	Namespace string
	DSN       string
	LockKey   string
	// PageSize and Chunk: small ones make a run many round trips long, so
	// two runs really interleave.
	PageSize, Chunk int
}

func faultChild(role, spec string) int {
	log := logrus.New()
	log.SetFormatter(&logrus.JSONFormatter{})
	log.SetOutput(os.Stderr)
	var err error
	switch role {
	case "worker":
		var s workerSpec
		if err = json.Unmarshal([]byte(spec), &s); err == nil {
			err = runWorkerProc(s, log)
		}
	case "recoverer":
		var s recovererSpec
		if err = json.Unmarshal([]byte(spec), &s); err == nil {
			err = runRecovererProc(s, log)
		}
	case "soakworker":
		var s soakSpec
		if err = json.Unmarshal([]byte(spec), &s); err == nil {
			err = runSoakWorker(s, log)
		}
	case "durableworker":
		var s durableWorkerSpec
		if err = json.Unmarshal([]byte(spec), &s); err == nil {
			err = runDurableWorkerProc(s, log)
		}
	case "pauseworker":
		var s pauseWorkerSpec
		if err = json.Unmarshal([]byte(spec), &s); err == nil {
			err = runPauseWorkerProc(s, log)
		}
	case "outageworker":
		var s outageWorkerSpec
		if err = json.Unmarshal([]byte(spec), &s); err == nil {
			err = runOutageWorkerProc(s, log)
		}
	case "enqueuer":
		var s enqueuerSpec
		if err = json.Unmarshal([]byte(spec), &s); err == nil {
			err = runEnqueuerProc(s, log)
		}
	case "api":
		var s apiSpec
		if err = json.Unmarshal([]byte(spec), &s); err == nil {
			err = runAPIProc(s, log)
		}
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		log.WithError(err).Error("fault child failed")
		return 1
	}
	return 0
}

// exitWithParent ends the process when stdin reaches EOF: the test binary
// that started it is gone.
func exitWithParent(log logrus.FieldLogger) {
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		log.Warn("stdin closed: the test is gone, exiting")
		os.Exit(3)
	}()
}

func openDB(dsn string) (*gorm.DB, *ledger.Ledger, error) {
	db, err := gorm.Open(mysql.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", dsn, err)
	}
	led, err := ledger.New(db, ledger.Options{})
	return db, led, err
}

func runWorkerProc(s workerSpec, log *logrus.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	exitWithParent(log)
	p, err := newWorkerProc(s.RedisAddr, s.Namespace, s.DSN, s.WorkerID, s.Schedule, s.Grace, s.Lease, log,
		func(led *ledger.Ledger, db *gorm.DB) dataplane.Ledger {
			return &claimLog{Ledger: ledgerops.Of(led), db: db}
		})
	if err != nil {
		return err
	}
	defer p.rdb.Close()
	bdb := p.db
	if s.BusinessDSN != "" {
		if bdb, _, err = openDB(s.BusinessDSN); err != nil {
			return err
		}
	}
	h := &faultHandler{db: bdb, ledgerTable: p.led.LedgerTable(), worker: s.WorkerID, sleep: s.HandlerSleep,
		failEvery: s.FailEvery, retryAfter: s.RetryAfter}
	if err := p.w.Handle(s.Topic, h, queue.TopicConfig{Concurrency: s.Concurrency, BatchSize: s.Concurrency, Lease: s.Lease}); err != nil {
		return err
	}
	log.WithField("worker", s.WorkerID).Info("fault worker ready")
	return runWorker(ctx, p.w, p.rec)
}

// workerProc is what every worker role sets up alike: a Redis client and
// queue, the ledger's database, a Worker with short error backoffs (so a
// drain resumes quickly after a fault), and, with a schedule, a recoverer
// beside it wired to the worker's reconnect hook, as the app does.
type workerProc struct {
	rdb *redis.Client
	q   *dataplane.Client
	db  *gorm.DB
	led *ledger.Ledger
	w   *dataplane.Worker
	rec *recoverer.Recoverer
}

// newWorkerProc builds a workerProc; wrap, if set, wraps the ledger the
// worker records into. The caller closes rdb.
func newWorkerProc(redisAddr, namespace, dsn, id, schedule string, grace, lease time.Duration, log logrus.FieldLogger,
	wrap func(*ledger.Ledger, *gorm.DB) dataplane.Ledger) (*workerProc, error) {
	p := &workerProc{rdb: redis.NewClient(&redis.Options{Addr: redisAddr})}
	var err error
	if p.q, err = dataplane.New(p.rdb, queue.Config{Namespace: namespace}); err != nil {
		return nil, err
	}
	if p.db, p.led, err = openDB(dsn); err != nil {
		return nil, err
	}
	var led dataplane.Ledger = ledgerops.Of(p.led)
	if wrap != nil {
		led = wrap(p.led, p.db)
	}
	wcfg := queue.WorkerConfig{
		ID: id, Logger: log,
		ErrorBackoffMin: 20 * time.Millisecond, ErrorBackoffMax: 250 * time.Millisecond,
		ShutdownTimeout: 10 * time.Second,
	}
	if schedule != "" {
		p.rec, err = recoverer.New(p.q, ledgerops.Of(p.led), recoverer.Config{
			Schedule: schedule, Grace: grace, HeartbeatInterval: lease / 3, Logger: log,
		})
		if err != nil {
			return nil, err
		}
		wcfg.OnRedisReconnect = p.rec.RedisReconnected
	}
	p.w, err = dataplane.NewWorker(p.q, led, wcfg)
	return p, err
}

// runWorker runs w, and rec beside it if set, until ctx ends.
func runWorker(ctx context.Context, w *dataplane.Worker, rec *recoverer.Recoverer) error {
	recDone := make(chan struct{})
	if rec != nil {
		go func() { defer close(recDone); _ = rec.Run(ctx) }()
	} else {
		close(recDone)
	}
	err := w.Run(ctx)
	<-recDone
	return err
}

// claimLog is the worker's ledger, which also notes every recorded job in
// the claims table: "claimed before Redis died" is read from there.
type claimLog struct {
	dataplane.Ledger
	db *gorm.DB
}

func (c *claimLog) Record(ctx context.Context, jobs []*queue.Job, worker string) error {
	if err := c.Ledger.Record(ctx, jobs, worker); err != nil {
		return err
	}
	var b strings.Builder
	args := make([]any, len(jobs))
	b.WriteString("INSERT IGNORE INTO claims (job_id) VALUES ")
	for i, j := range jobs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?)")
		args[i] = j.ID
	}
	return c.db.WithContext(ctx).Exec(b.String(), args...).Error
}

// faultHandler writes one row per job into handled; a run of the handler
// counts once however often its write is retried (the token), a second run
// of the job counts as a duplicate. It also counts the runs that found no
// ledger row for their claim (unrecorded): there must be none.
type faultHandler struct {
	db          *gorm.DB
	ledgerTable string
	worker      string
	sleep       time.Duration
	failEvery   int
	retryAfter  time.Duration
}

const upsertHandled = "INSERT INTO handled (job_id, attempt, runs, unrecorded, last_token, worker) VALUES (?, ?, 1, ?, ?, ?) " +
	"ON DUPLICATE KEY UPDATE runs = runs + IF(last_token = VALUES(last_token), 0, 1), " +
	"unrecorded = unrecorded + IF(last_token = VALUES(last_token), 0, VALUES(unrecorded)), " +
	"attempt = GREATEST(attempt, VALUES(attempt)), last_token = VALUES(last_token), worker = VALUES(worker)"

func (h *faultHandler) Handle(ctx context.Context, j *queue.Job) error {
	n, _ := strconv.Atoi(strings.TrimPrefix(j.ID, "j"))
	if h.failEvery > 0 && n%h.failEvery == 0 && j.Attempt == 1 {
		return queue.RetryAfter(errors.New("planned failure of the first attempt"), h.retryAfter)
	}
	if h.sleep > 0 {
		t := time.NewTimer(h.sleep)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	tok := make([]byte, 8)
	_, _ = rand.Read(tok)
	token := hex.EncodeToString(tok)
	// The database may be cut off (TCP proxy): each statement is retried
	// until it lands or the job's context ends, so an outage spends no
	// attempt.
	var rows int64
	err := retryUntil(ctx, func() error {
		return h.db.WithContext(ctx).Table(h.ledgerTable).
			Where("topic = ? AND job_id = ? AND attempt = ?", j.Topic, j.ID, j.Attempt).Count(&rows).Error
	})
	if err != nil {
		return err
	}
	unrecorded := 0
	if rows == 0 {
		unrecorded = 1
	}
	return retryUntil(ctx, func() error {
		return h.db.WithContext(ctx).Exec(upsertHandled, j.ID, j.Attempt, unrecorded, token, h.worker).Error
	})
}

func runRecovererProc(s recovererSpec, log *logrus.Logger) error {
	rdb := redis.NewClient(&redis.Options{Addr: s.RedisAddr})
	defer rdb.Close()
	q, err := dataplane.New(rdb, queue.Config{Namespace: s.Namespace})
	if err != nil {
		return err
	}
	_, led, err := openDB(s.DSN)
	if err != nil {
		return err
	}
	rec, err := recoverer.New(q, ledgerops.Of(led), recoverer.Config{
		LockKey: s.LockKey, PageSize: s.PageSize, Chunk: s.Chunk, Logger: log,
	})
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil { // connected before the start signal
		return err
	}
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		return errors.New("no start signal on stdin")
	}
	rep, err := rec.RunOnce(ctx)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(rep)
}

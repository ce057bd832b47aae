package recoverer_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"
	"gorm.io/gorm"

	"github.com/delayq/delayq/app/cli"
	"github.com/delayq/delayq/queue"
)

// The mains of the soak and scale tests' child processes: a worker on
// several topics whose handler follows the plan each job carries in its
// payload, and the delayq program itself (the API).

// soakSpec configures a soak worker process.
type soakSpec struct {
	RedisAddr string
	Namespace string
	// DSN is the ledger's (and the recoverer's) link: the soak cuts it
	// through a proxy. BusinessDSN is the handler's own, never cut.
	DSN, BusinessDSN string
	WorkerID         string
	Topics           []string
	Concurrency      int
	Lease            time.Duration
	BackoffBase      time.Duration
	// Schedule and Grace run a recoverer in the process, as the app does;
	// "" runs none.
	Schedule string
	Grace    time.Duration
	// Tally, if set, makes the handler count its runs in Redis instead of
	// writing SQL: HINCRBY <Tally>:runs <job id> and <Tally>:workers
	// <worker id>, one pipelined round trip. A handler that commits a SQL
	// row per job measures the database's commit rate, not delayq's.
	Tally string
}

// soakPlan is what a soak job's payload tells its handler to do.
type soakPlan struct {
	Fail   int  `json:"fail,omitempty"`    // fail the first Fail attempts
	Die    bool `json:"die,omitempty"`     // fail every attempt: the job must end dead
	WorkMs int  `json:"work_ms,omitempty"` // work before the write
}

func runSoakWorker(s soakSpec, log *logrus.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	exitWithParent(log)
	p, err := newWorkerProc(s.RedisAddr, s.Namespace, s.DSN, s.WorkerID, s.Schedule, s.Grace, s.Lease, log, nil)
	if err != nil {
		return err
	}
	defer p.rdb.Close()
	var h queue.Handler = tallyHandler{rdb: p.rdb, runs: s.Tally + ":runs", workers: s.Tally + ":workers", worker: s.WorkerID}
	if s.Tally == "" {
		bdb, _, err := openDB(s.BusinessDSN)
		if err != nil {
			return err
		}
		h = &soakHandler{db: bdb, ledgerTable: p.led.LedgerTable(), worker: s.WorkerID}
	}
	for _, topic := range s.Topics {
		tc := queue.TopicConfig{Concurrency: s.Concurrency, Lease: s.Lease,
			Backoff: queue.Backoff{Base: s.BackoffBase, Cap: 10 * s.BackoffBase}}
		if err := p.w.Handle(topic, h, tc); err != nil {
			return err
		}
	}
	log.WithField("worker", s.WorkerID).Info("soak worker ready")
	return runWorker(ctx, p.w, p.rec)
}

// soakHandler writes one row per successful run into runs, keyed by a
// token of the run, so that a statement retried over a flaky link counts
// once while a second run of the job counts twice. The row says when the
// run started and whether it found its claim's ledger row (a run without
// one is the bug the ledger exists to prevent).
type soakHandler struct {
	db          *gorm.DB
	ledgerTable string
	worker      string
}

const insertRun = "INSERT IGNORE INTO runs (token, topic, job_id, attempt, worker, started_ms, run_at, unrecorded) " +
	"VALUES (?, ?, ?, ?, ?, ?, ?, ?)"

func (h *soakHandler) Handle(ctx context.Context, j *queue.Job) error {
	started := time.Now().UnixMilli()
	unrecorded, err := h.unrecorded(ctx, j)
	if err != nil {
		return err
	}
	var p soakPlan
	if len(j.Payload) > 0 {
		if err := json.Unmarshal(j.Payload, &p); err != nil {
			return queue.SkipRetry(fmt.Errorf("payload: %w", err))
		}
	}
	if p.Die {
		return errors.New("designed to die")
	}
	if j.Attempt <= p.Fail {
		return fmt.Errorf("planned failure %d of %d", j.Attempt, p.Fail)
	}
	if p.WorkMs > 0 {
		t := time.NewTimer(time.Duration(p.WorkMs) * time.Millisecond)
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
	return retryUntil(ctx, func() error {
		return h.db.WithContext(ctx).Exec(insertRun, token, j.Topic, j.ID, j.Attempt, h.worker, started, j.RunAt, unrecorded).Error
	})
}

// unrecorded returns 1 if the ledger has no row for this claim as the
// handler starts. Only a claim still within its lease counts: once the
// lease has passed (a worker paused past it), another worker may have
// claimed the job again and rewritten or finished the row, which says
// nothing about this claim's own record.
func (h *soakHandler) unrecorded(ctx context.Context, j *queue.Job) (int, error) {
	var rows int64
	err := retryUntil(ctx, func() error {
		return h.db.WithContext(ctx).Table(h.ledgerTable).
			Where("topic = ? AND job_id = ? AND attempt = ?", j.Topic, j.ID, j.Attempt).Count(&rows).Error
	})
	if err != nil || rows > 0 || time.Now().UnixMilli() >= j.LeaseUntil {
		return 0, err
	}
	return 1, nil
}

// tallyHandler counts each run in Redis (see soakSpec.Tally).
type tallyHandler struct {
	rdb                   *redis.Client
	runs, workers, worker string
}

func (h tallyHandler) Handle(ctx context.Context, j *queue.Job) error {
	_, err := h.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HIncrBy(ctx, h.runs, j.ID, 1)
		p.HIncrBy(ctx, h.workers, h.worker, 1)
		return nil
	})
	return err
}

// retryUntil runs op until it succeeds or ctx ends.
func retryUntil(ctx context.Context, op func() error) error {
	for {
		err := op()
		if err == nil || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
}

// apiSpec runs the delayq program with Args (its configuration in a file
// the test wrote), as `delayq serve` runs in production.
type apiSpec struct {
	Args []string
}

func runAPIProc(s apiSpec, log *logrus.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	exitWithParent(log)
	if code := cli.Main(ctx, s.Args, os.Stdout, os.Stderr, "soak"); code != cli.ExitOK {
		return fmt.Errorf("delayq %v exited with %d", s.Args, code)
	}
	return nil
}

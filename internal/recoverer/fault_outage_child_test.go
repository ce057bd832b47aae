package recoverer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/queue"
)

// outageWorkerSpec configures a worker process of the outage test: a worker
// as the app runs one (recoverer and relay beside it), with the library's
// default error backoff, on a redis topic and a durable topic, its links
// to Redis and MariaDB through the test's proxies. Each handler run works
// HandlerMin to HandlerMax and then appends one line to RunLog.
type outageWorkerSpec struct {
	RedisAddr, Namespace, DSN, WorkerID string
	RedisTopic, DurableTopic            string
	Concurrency                         int
	Lease                               time.Duration
	HandlerMin, HandlerMax              time.Duration
	RunLog                              string
	MaxConns                            int
}

// outageRun is one line of a worker's run log: one handler run, its start
// and its end on the host's clock (Unix ns; every process runs on this
// host), and its error ("" when it succeeded).
type outageRun struct {
	ID      string `json:"id"`
	Topic   string `json:"topic"`
	Attempt int    `json:"attempt"`
	Worker  string `json:"worker"`
	Start   int64  `json:"start"`
	End     int64  `json:"end"`
	Err     string `json:"err,omitempty"`
}

func runOutageWorkerProc(s outageWorkerSpec, logger *logrus.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	exitWithParent(logger)
	// The driver logs every cut connection on its own global logger.
	_ = gomysql.SetLogger(log.New(io.Discard, "", 0))
	rdb := redis.NewClient(&redis.Options{Addr: s.RedisAddr})
	defer rdb.Close()
	_, led, err := openPool(s.DSN, s.MaxConns)
	if err != nil {
		return err
	}
	q, err := durableClient(rdb, s.Namespace, s.DurableTopic, led, time.Hour)
	if err != nil {
		return err
	}
	rec, err := recoverer.New(q, ledgerops.Of(led), recoverer.Config{Schedule: "@every 1s", Grace: 2 * s.Lease, HeartbeatInterval: s.Lease / 3, Logger: logger})
	if err != nil {
		return err
	}
	relay, err := recoverer.NewRelay(q, ledgerops.Of(led), recoverer.RelayConfig{Logger: logger})
	if err != nil {
		return err
	}
	// ErrorBackoffMin and Max left at their defaults (50 ms, 5 s): the
	// pause after a failure grows during an outage as in production.
	w, err := dataplane.NewWorker(q, ledgerops.Of(led), queue.WorkerConfig{ID: s.WorkerID, Logger: logger,
		ShutdownTimeout: 10 * time.Second, OnRedisReconnect: rec.RedisReconnected,
	})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(s.RunLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	h := &outageHandler{log: f, worker: s.WorkerID, min: s.HandlerMin, max: s.HandlerMax}
	tc := queue.TopicConfig{Concurrency: s.Concurrency, BatchSize: s.Concurrency, Lease: s.Lease}
	for _, topic := range []string{s.RedisTopic, s.DurableTopic} {
		if err := w.Handle(topic, h, tc); err != nil {
			return err
		}
	}
	relayDone := make(chan struct{})
	go func() { defer close(relayDone); _ = relay.Run(ctx) }()
	logger.WithField("worker", s.WorkerID).Info("outage worker ready")
	err = runWorker(ctx, w, rec)
	<-relayDone
	return err
}

// outageHandler works a while (its context ending cuts it short: the
// lease ran out) and logs the run before it returns, so a run's end is
// always before its outcome reaches the completer.
type outageHandler struct {
	mu       sync.Mutex
	log      *os.File
	worker   string
	min, max time.Duration
}

func (h *outageHandler) Handle(ctx context.Context, j *queue.Job) error {
	r := outageRun{ID: j.ID, Topic: j.Topic, Attempt: j.Attempt, Worker: h.worker, Start: time.Now().UnixNano()}
	work := time.NewTimer(h.min + rand.N(h.max-h.min+1))
	defer work.Stop()
	var err error
	select {
	case <-work.C:
	case <-ctx.Done():
		err = context.Cause(ctx)
		r.Err = err.Error()
	}
	r.End = time.Now().UnixNano()
	b, merr := json.Marshal(r)
	if merr != nil {
		return merr
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, werr := h.log.Write(append(b, '\n')); werr != nil {
		// The test cannot account for a run it does not see.
		fmt.Fprintln(os.Stderr, "run log:", werr)
		os.Exit(1)
	}
	return err
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/user"
	"strconv"

	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/app/backend"
	"github.com/delayq/delayq/app/config"
	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/httpjson"
	"github.com/delayq/delayq/jobs/orderclose"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/queue/engine"
	"github.com/delayq/delayq/recovery"
)

// directStore works on the configured Redis and SQL themselves.
type directStore struct {
	cfg config.Config
	b   *backend.Backends
	log logrus.FieldLogger
}

func (s *directStore) Enqueue(ctx context.Context, topic string, j queue.NewJob) (queue.EnqueueResult, error) {
	return s.b.Queue.Enqueue(ctx, topic, j)
}

func (s *directStore) Jobs(ctx context.Context, topic string, jq httpapi.JobQuery) (httpapi.JobPage, error) {
	insp, err := s.inspector()
	if err != nil {
		return httpapi.JobPage{}, err
	}
	p, err := httpapi.BrowseJobs(ctx, insp, s.log, topic, jq)
	p.CapAttempts(s.cfg.Worker.AttemptLimit)
	var bad *httpjson.Error
	if errors.As(err, &bad) && bad.Status == http.StatusBadRequest {
		// The API's 400: the command's usage (exit 2), as through the API.
		return p, usageError{err}
	}
	return p, err
}

func (s *directStore) Cancel(ctx context.Context, topic, id string) (httpapi.JobView, error) {
	j, err := s.b.Queue.Cancel(ctx, s.b.Steps, topic, id)
	if errors.Is(err, queue.ErrInFlight) {
		// Held by a worker: its run is cancelled, as through the API (202).
		held, at, rerr := s.b.Queue.CancelRunning(ctx, s.b.Steps, topic, id)
		if errors.Is(rerr, queue.ErrNotFound) {
			return httpapi.JobView{}, err // not held after all: Cancel's answer
		}
		if rerr != nil {
			return httpapi.JobView{}, rerr
		}
		s.capAttempts(held)
		return httpapi.NewCancelRequestedJobView(held, at), nil
	}
	if err != nil {
		return httpapi.JobView{}, err
	}
	s.capAttempts(j)
	v := httpapi.NewCancelledJobView(j)
	v.Warning = cancelWarning(s.cfg)(topic, id) // as the API of a server with this configuration warns
	return v, nil
}

func (s *directStore) Reschedule(ctx context.Context, topic, id string, to queue.When) (*queue.Rescheduled, error) {
	r, err := s.b.Queue.Reschedule(ctx, s.b.Steps, topic, id, to)
	if r != nil {
		s.capAttempts(r.Job)
	}
	return r, err
}

func (s *directStore) Get(ctx context.Context, topic, id string) (*queue.JobInfo, error) {
	info, err := s.b.Queue.Find(ctx, s.b.Steps, topic, id)
	if info != nil {
		s.capAttempts(info.Job)
	}
	return info, err
}

// capAttempts shows j's max_attempts as its topic's configured limit caps
// it at its next claim, as the API does (httpapi.Deps.AttemptLimit).
func (s *directStore) capAttempts(j *queue.Job) {
	if j != nil {
		if n := s.cfg.Worker.AttemptLimit(j.Topic); n > 0 {
			j.MaxAttempts = min(j.MaxAttempts, n)
		}
	}
}

// Stats reads Redis's counts, and for durable topics counts their waiting
// jobs in SQL once (one GROUP BY over the waiting rows' index, as the
// relay does), so that durable topics whose jobs all wait beyond the
// horizon are listed too.
func (s *directStore) Stats(ctx context.Context, topics []string) ([]httpapi.TopicStats, error) {
	insp, err := s.inspector()
	if err != nil {
		return nil, err
	}
	infos, err := insp.Topics(ctx, topics...)
	if err != nil {
		return nil, err
	}
	workers, err := s.b.Queue.Workers(ctx)
	if err != nil {
		return nil, err
	}
	consumers := queue.Consumers(workers)
	all := make([]httpapi.TopicStats, 0, len(infos))
	for _, info := range infos {
		st := httpapi.NewTopicStats(info, s.cfg.Worker.RateLimit(info.Topic))
		st.SetConsumers(consumers)
		all = append(all, st)
	}
	return all, nil
}

// Workers lists the workers' registry.
func (s *directStore) Workers(ctx context.Context) ([]queue.WorkerInfo, error) {
	return s.b.Queue.Workers(ctx)
}

// Partitions reads (and with set > 0 first raises) a topic's partition
// count on Redis directly, and logs the audit line the API logs.
func (s *directStore) Partitions(ctx context.Context, topic string, set int) (httpapi.PartitionsResponse, error) {
	if set > 0 {
		l, err := s.b.Queue.SetPartitions(ctx, topic, set)
		if err != nil {
			return httpapi.PartitionsResponse{}, err
		}
		s.log.WithFields(logrus.Fields{"topic": topic, "partitions": l.Current(), "actor": cliActor()}).Info("topic partitions set")
		return httpapi.NewPartitionsResponse(topic, l.Public()), nil
	}
	l, err := s.b.Queue.Layout(ctx, topic)
	if err != nil {
		return httpapi.PartitionsResponse{}, err
	}
	return httpapi.NewPartitionsResponse(topic, l.Public()), nil
}

// SetPaused pauses or resumes a topic on Redis and SQL directly, as
// "cli:<user>@<host>", and logs the audit line the API logs.
func (s *directStore) SetPaused(ctx context.Context, topic string, paused bool) (httpapi.PauseResponse, error) {
	st, err := s.b.Queue.SetPaused(ctx, s.b.Ledger, s.log, topic, cliActor(), paused)
	switch {
	case err != nil && !errors.Is(err, queue.ErrNotApplied):
		return httpapi.PauseResponse{}, err
	case err != nil:
		action := "resume"
		if paused {
			action = "pause"
		}
		return httpapi.PauseResponse{}, fmt.Errorf("the %s is saved in SQL; Redis did not answer, and the relay applies it once it does (run the command again to confirm): %w", action, err)
	}
	return httpapi.NewPauseResponse(topic, st), nil
}

// cliActor names the operator of a direct CLI command: "cli:<user>@<host>".
func cliActor() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return "cli:" + name + "@" + host
}

func (s *directStore) Dead(ctx context.Context, topic string, offset, limit int) (*queue.Page, error) {
	p, err := s.b.Queue.List(ctx, topic, queue.StateDead, offset, limit)
	if p != nil {
		for _, j := range p.Jobs {
			s.capAttempts(j.Job)
		}
	}
	return p, err
}

func (s *directStore) RequeueDead(ctx context.Context, topic, id string) error {
	return s.b.Queue.RequeueDead(ctx, topic, id)
}

func (s *directStore) RequeueAllDead(ctx context.Context, topic string) (int, error) {
	return s.b.Queue.RequeueAllDead(ctx, topic)
}

func (s *directStore) PurgeDead(ctx context.Context, topic string, before int64) (int, error) {
	return httpapi.PurgeDead(ctx, s.b.Queue, s.b.Shards, s.log, topic, before)
}

func (s *directStore) DeleteDead(ctx context.Context, topic, id string) error {
	return httpapi.DeleteDead(ctx, s.b.Queue, s.b.Shards, s.log, topic, id)
}

func (s *directStore) List(ctx context.Context, f ledger.ListFilter) (httpapi.LedgerPage, error) {
	if f.Topic != "" {
		if err := queue.ValidateTopic(f.Topic); err != nil {
			return httpapi.LedgerPage{}, err
		}
	}
	p, err := s.b.Shards.List(ctx, f)
	switch {
	case errors.Is(err, ledger.ErrBadCursor):
		return httpapi.LedgerPage{}, usageError{fmt.Errorf("--cursor: %w", err)}
	case err != nil:
		return httpapi.LedgerPage{}, err
	}
	return httpapi.NewLedgerPage(p), nil
}

func (s *directStore) Stale(ctx context.Context, olderThan int64, limit int) ([]ledger.Entry, error) {
	return s.b.Shards.Stale(ctx, olderThan, ledger.StaleCursor{}, limit)
}

func (s *directStore) Recover(ctx context.Context, dryRun bool) (*recovery.Report, error) {
	rcfg := recoveryConfig(s.cfg, s.log)
	rcfg.DryRun = dryRun
	// An engine that runs nothing: its recoverers, one per ledger shard,
	// each over the partitions whose rows its shard holds.
	qc := s.b.Queue.Config()
	qc.Store = nil // the engine's own: the shards' router
	eng, err := engine.New(s.b.Redis, s.b.Ledger, engine.Config{Queue: qc,
		Shards: s.b.Shards.All()[1:], Recovery: rcfg, NoRecovery: true, NoPeriodic: true, Logger: s.log})
	if err != nil {
		return nil, err
	}
	rep, err := eng.Recover(ctx, dryRun)
	return &rep, err
}

// SmokeRan reads the mark the smoke handler sets in Redis.
func (s *directStore) SmokeRan(ctx context.Context, id string) (int64, bool, error) {
	v, err := s.b.Redis.Get(ctx, smokeMarkKey(s.cfg.Redis.Namespace, id)).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	ranAt, _ := strconv.ParseInt(v, 10, 64)
	return ranAt, true, nil
}

func (s *directStore) Where() string { return "this Redis (namespace " + s.cfg.Redis.Namespace + ")" }

func (s *directStore) Close() error { return s.b.Close() }

// inspector reads the backends for one command: durable counts are taken
// in SQL when needed, as no relay counts in this process.
func (s *directStore) inspector() (*engine.Inspector, error) {
	return engine.NewShardsInspector(s.b.Redis, s.b.Shards, s.b.Queue.Config(), nil)
}

// cancelWarning is what a cancel under cfg warns of (httpapi.Deps.
// CancelWarning): with the orders module on, that the sweeper closes an
// order whose close job was cancelled anyway.
func cancelWarning(cfg config.Config) func(topic, id string) string {
	return func(topic, id string) string {
		if !cfg.Orders.Enabled {
			return ""
		}
		return orderclose.CancelWarning(topic, id)
	}
}

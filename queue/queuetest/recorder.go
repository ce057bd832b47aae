package queuetest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/queue"
)

// Enqueued is one job a Recorder accepted: the topic, the job as the handler
// gave it, and the due time it got (Unix ms, the Recorder's clock).
type Enqueued struct {
	Topic string
	queue.NewJob
	RunAt int64
}

// Recorder is a queue.Enqueuer that records what is enqueued through it.
// Behind it runs delayq's real data plane on an in-process Redis (miniredis),
// so input is validated, ids are deduplicated and due times computed
// exactly as in production; nothing runs the jobs. It is safe for
// concurrent use. Close it when done.
type Recorder struct {
	mr  *miniredis.Miniredis
	rdb *redis.Client
	c   *dataplane.Client

	mu   sync.Mutex
	jobs []Enqueued
	fail error
}

var _ queue.Enqueuer = (*Recorder)(nil)

// NewRecorder returns a Recorder whose client has cfg (zero fields take the
// queue's defaults).
func NewRecorder(cfg queue.Config) (*Recorder, error) {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		return nil, fmt.Errorf("queuetest: start in-process Redis: %w", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	c, err := dataplane.New(rdb, cfg)
	if err != nil {
		_ = rdb.Close()
		mr.Close()
		return nil, err
	}
	return &Recorder{mr: mr, rdb: rdb, c: c}, nil
}

// Close stops the in-process Redis.
func (r *Recorder) Close() {
	_ = r.rdb.Close()
	r.mr.Close()
}

// SetTime fixes the clock that due times are computed from (Redis's clock
// in production), so a test can compare them with exact values.
func (r *Recorder) SetTime(t time.Time) { r.mr.SetTime(t) }

// FailWith makes every following Enqueue and EnqueueBatch fail with err
// (Redis unavailable, say) and record nothing; nil restores normal service.
func (r *Recorder) FailWith(err error) {
	r.mu.Lock()
	r.fail = err
	r.mu.Unlock()
}

func (r *Recorder) failure() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fail
}

// Enqueue is the engine's Enqueue: a job it creates is recorded; a
// duplicate or an invalid one is not.
func (r *Recorder) Enqueue(ctx context.Context, topic string, j queue.NewJob) (queue.EnqueueResult, error) {
	if err := r.failure(); err != nil {
		return queue.EnqueueResult{}, err
	}
	res, err := r.c.Enqueue(ctx, topic, j)
	if err == nil && !res.Duplicate {
		r.record(Enqueued{Topic: topic, NewJob: j, RunAt: res.RunAt})
	}
	return res, err
}

// EnqueueBatch is the engine's EnqueueBatch: the jobs it creates are
// recorded, in order.
func (r *Recorder) EnqueueBatch(ctx context.Context, topic string, jobs []queue.NewJob) ([]queue.BatchResult, error) {
	if err := r.failure(); err != nil {
		return nil, err
	}
	res, err := r.c.EnqueueBatch(ctx, topic, jobs)
	if err != nil {
		return res, err
	}
	for i, br := range res {
		if br.Status == queue.BatchCreated {
			r.record(Enqueued{Topic: topic, NewJob: jobs[i], RunAt: br.RunAt})
		}
	}
	return res, nil
}

func (r *Recorder) record(e Enqueued) {
	r.mu.Lock()
	r.jobs = append(r.jobs, e)
	r.mu.Unlock()
}

// All returns every job recorded, in the order they were enqueued.
func (r *Recorder) All() []Enqueued {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Enqueued(nil), r.jobs...)
}

// Jobs returns the jobs recorded for topic, in order.
func (r *Recorder) Jobs(topic string) []Enqueued {
	var out []Enqueued
	for _, e := range r.All() {
		if e.Topic == topic {
			out = append(out, e)
		}
	}
	return out
}

// Reset forgets the recorded jobs and empties the in-process Redis, so the
// same ids can be enqueued again.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.jobs = nil
	r.mu.Unlock()
	r.mr.FlushAll()
}

// Get reads back a job as the Recorder's Redis holds it: its state
// (waiting), due time and envelope, as a worker would claim it.
func (r *Recorder) Get(ctx context.Context, topic, id string) (*queue.JobInfo, error) {
	return r.c.Get(ctx, topic, id)
}

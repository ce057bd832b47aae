package cli

import (
	"context"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/app/backend"
	"github.com/delayq/delayq/app/config"
	"github.com/delayq/delayq/queue"
)

// workerHooks is what the rest of the program plugs into the worker; all
// else comes from the configuration.
type workerHooks struct {
	observer queue.Observer
	// onRedisReconnect, if set, is told when Redis came back (recovery
	// checks for a data loss).
	onRedisReconnect func(ctx context.Context)
}

// newWorker builds the worker of the configuration with a handler per
// topic; worker.topics overrides the defaults per topic.
func newWorker(cfg config.Config, b *backend.Backends, log logrus.FieldLogger, handlers map[string]queue.Handler, hooks workerHooks) (*queue.Worker, error) {
	wc := cfg.Worker
	w, err := queue.NewWorker(b.Queue, queue.WorkerConfig{
		Ledger:           b.Ledger,
		ID:               wc.ID,
		ShutdownTimeout:  wc.ShutdownTimeout,
		MaxIdle:          wc.MaxIdle,
		Logger:           log,
		Observer:         hooks.observer,
		OnRedisReconnect: hooks.onRedisReconnect,
		Topic: queue.TopicConfig{
			Concurrency: wc.Concurrency,
			BatchSize:   wc.BatchSize,
			Prefetch:    wc.Prefetch,
			ClaimAhead:  wc.ClaimAhead,
			Lease:       wc.Lease,
			Heartbeat:   wc.Heartbeat,
			MaxAttempts: wc.MaxAttempts,
			Backoff:     queue.Backoff{Base: wc.BackoffBase, Cap: wc.BackoffCap},
		},
	})
	if err != nil {
		return nil, err
	}
	for topic, h := range handlers {
		t := wc.TopicSettings(topic)
		tc := queue.TopicConfig{
			Concurrency:  t.Concurrency,
			BatchSize:    t.BatchSize,
			Prefetch:     t.Prefetch,
			ClaimAhead:   t.ClaimAhead,
			Lease:        t.Lease,
			Timeout:      t.Timeout,
			MaxAttempts:  t.MaxAttempts,
			Backoff:      queue.Backoff{Base: t.BackoffBase, Cap: t.BackoffCap},
			RateLimit:    t.RateLimit,
			RateBurst:    t.RateBurst,
			RateStartLag: t.RateStartLag,
		}
		if err := w.Handle(topic, h, tc); err != nil {
			return nil, err
		}
	}
	for topic := range wc.Topics {
		if _, ok := handlers[topic]; !ok {
			log.WithField("topic", topic).Warn("worker.topics names a topic this program has no handler for: ignored")
		}
	}
	return w, nil
}

package cli

import (
	"fmt"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/app/backend"
	"github.com/delayq/delayq/app/config"
	"github.com/delayq/delayq/app/metrics"
	"github.com/delayq/delayq/jobs/orderclose"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/queue/engine"
	"github.com/delayq/delayq/queue/periodic"
)

// engineConfig turns the program's configuration into the engine's: the
// parts p says this process runs, and the metrics every part reports to.
func engineConfig(cfg config.Config, log logrus.FieldLogger, p parts, m *metrics.Metrics) (engine.Config, error) {
	wc := cfg.Worker
	rc := recoveryConfig(cfg, log)
	rc.OnReport = m.RecoveryReport
	ec := engine.Config{
		Queue: backend.QueueConfig(cfg, m),
		Worker: queue.WorkerConfig{
			ID:              wc.ID,
			ShutdownTimeout: wc.ShutdownTimeout,
			RegistryEvery:   wc.RegistryEvery,
			LedgerHold:      wc.LedgerHold,
			KeyWait:         wc.KeyWait,
			MaxIdle:         wc.MaxIdle,
			Logger:          log,
			Observer:        m,
			Pools:           wc.QueuePools(),
			Topic: queue.TopicConfig{
				Concurrency: wc.Concurrency,
				BatchSize:   wc.BatchSize,
				Prefetch:    wc.Prefetch,
				ClaimAhead:  wc.ClaimAhead,
				Lease:       wc.Lease,
				Heartbeat:   wc.Heartbeat,
				MaxAttempts: wc.MaxAttempts,
				OldestEvery: wc.OldestEvery,
				Backoff:     queue.Backoff{Base: wc.BackoffBase, Cap: wc.BackoffCap},
			},
		},
		Recovery:   rc,
		Relay:      relayConfig(cfg, log, m.RelayPass),
		NoRecovery: !p.recovery,
		NoPeriodic: !p.periodic,
		Partitions: cfg.Queue.Partitions(),
		Logger:     log,
	}
	if len(cfg.Periodic) > 0 {
		schedules, err := cfg.Schedules()
		if err != nil {
			return ec, err
		}
		ec.Schedules = schedules
		ec.Periodic = periodic.Options{Logger: log.WithField("component", "periodic")}
		if p.periodic { // its metrics only where it runs
			names := make([]string, len(schedules))
			for i, sc := range schedules {
				names[i] = sc.Name
			}
			ec.Periodic.Observer = m.Periodic(names)
		}
	}
	return ec, nil
}

// topicConfig is one topic's worker settings: worker.topics.<topic> over
// the worker's defaults.
func topicConfig(cfg config.Config, topic string) queue.TopicConfig {
	t := cfg.Worker.TopicSettings(topic)
	return queue.TopicConfig{
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
		OldestEvery:  t.OldestEvery,
	}
}

// handle gives the engine the program's handlers: the smoke topic, the
// orders module's close handler when it is on, and the HTTP targets.
func (s *system) handle() error {
	handlers := map[string]queue.Handler{SmokeTopic: smokeHandler(s.b.Redis, s.cfg.Redis.Namespace)}
	if s.orders != nil {
		handlers[orderclose.Topic] = s.orders.CloseHandler()
	}
	m := s.obs.metrics
	for topic, tg := range s.targets {
		handlers[topic] = tg
		m.InitTarget(topic)
		m.DescribeTarget(topic, tg.Method(), tg.URL())
	}
	for topic, h := range handlers {
		m.InitTopic(topic)
		if l := s.cfg.Worker.RateLimit(topic); l.PerSecond > 0 {
			m.InitRateLimit(topic, l.PerSecond)
		}
		if err := s.eng.Handle(topic, h, topicConfig(s.cfg, topic)); err != nil {
			return err
		}
	}
	for topic := range s.cfg.Worker.Topics {
		if _, ok := handlers[topic]; !ok {
			s.log.WithField("topic", topic).Warn("worker.topics names a topic this program has no handler for: ignored")
		}
	}
	// A pool's topic without a handler is a mistake (a typo, or an HTTP
	// target not configured): refused before anything starts.
	for _, pl := range s.cfg.Worker.QueuePools() {
		for topic := range pl.Weights {
			if _, ok := handlers[topic]; !ok {
				return usageError{fmt.Errorf("worker.pools.%s.topics.%s: this program has no handler for topic %s (it runs %s, the HTTP targets of worker.topics, and %s with orders.enabled)",
					pl.Name, topic, topic, SmokeTopic, orderclose.Topic)}
			}
		}
	}
	return nil
}

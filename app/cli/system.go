package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/app/backend"
	"github.com/delayq/delayq/app/config"
	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/app/metrics"
	"github.com/delayq/delayq/internal/scheduler"
	"github.com/delayq/delayq/jobs/httptarget"
	"github.com/delayq/delayq/jobs/orderclose"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue/engine"
	"github.com/delayq/delayq/queue/periodic"
	"github.com/delayq/delayq/recovery"
)

// parts says which parts of the system a command runs.
type parts struct {
	api, workers, recovery, sweeper bool
	// periodic runs the configured periodic schedules (any number of
	// processes may: each tick is enqueued once).
	periodic bool
}

// system is the assembled program: backends, the engine (workers,
// recoverer, relay, periodic schedules, each run only if its part is on),
// order sweeper and API server.
type system struct {
	cfg    config.Config
	log    logrus.FieldLogger
	b      *backend.Backends
	eng    *engine.Engine
	orders *orderclose.Service // nil when orders are off
	sweep  *orderclose.Sweeper
	server *http.Server
	ln     net.Listener
	obs    observability // metrics, dashboard and the metrics listener
	// targets are the HTTP-target topics' handlers, by topic.
	targets map[string]*httptarget.Target
	// trace is the tracer provider with tracing.enabled, else nil.
	trace *tracing
}

// recoveryConfig is the recoverer's configuration from the program's; the
// caller adds what depends on its use (OnReport, a dry run asked for).
func recoveryConfig(cfg config.Config, log logrus.FieldLogger) recovery.Config {
	return recovery.Config{
		Schedule:              cfg.Recovery.Spec,
		Grace:                 cfg.Recovery.Grace,
		LockTTL:               cfg.Recovery.LockTTL,
		HeartbeatInterval:     cfg.Worker.HeartbeatInterval(),
		DryRun:                cfg.Recovery.DryRun,
		HistoryRetention:      cfg.Recovery.HistoryRetention,
		TopicHistoryRetention: cfg.Queue.HistoryRetentions(),
		HistoryPurgeBatch:     cfg.Recovery.HistoryPurgeBatch,
		HistoryPurgeDuty:      cfg.Recovery.HistoryPurgeDuty,
		Logger:                log,
	}
}

// relayConfig is the relay's configuration from the program's.
func relayConfig(cfg config.Config, log logrus.FieldLogger, onPass func(recovery.RelayReport)) recovery.RelayConfig {
	return recovery.RelayConfig{
		Every:         cfg.Recovery.RelayEvery,
		Grace:         cfg.Recovery.RelayGrace,
		LockTTL:       cfg.Recovery.RelayLockTTL,
		FullEvery:     cfg.Recovery.RelayFullEvery,
		CheckEvery:    cfg.Recovery.RelayCheckEvery,
		IdleEvery:     cfg.Recovery.RelayIdleEvery,
		HandOverAfter: cfg.Recovery.RelayHandOverAfter,
		OnPass:        onPass,
		Logger:        log,
	}
}

// assemble builds the parts p of the configured system; nothing runs yet.
// version is the program's, for the HTTP targets' User-Agent.
func assemble(ctx context.Context, cfg config.Config, log logrus.FieldLogger, p parts, version string) (_ *system, err error) {
	// s is not the named result: "return nil, err" must not hide it from
	// the deferred close of what was opened.
	s := &system{cfg: cfg, log: log}
	s.obs.metrics = metrics.New(log)
	if p.workers {
		// Before the backends: a secret missing from the environment
		// stops the start without a connection opened.
		builtin := func(topic string) bool {
			return topic == SmokeTopic || (cfg.Orders.Enabled && topic == orderclose.Topic)
		}
		if s.targets, err = newTargets(cfg, log, s.obs.metrics, version, builtin, os.LookupEnv); err != nil {
			return nil, err
		}
	}
	if s.b, err = backend.OpenWith(ctx, cfg, log, backend.Options{QueueObserver: s.obs.metrics}); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if !cfg.SQL.AutoMigrate {
		warnPendingMigrations(ctx, s.b.Shards, log)
	}
	ecfg, err := engineConfig(cfg, log, p, s.obs.metrics)
	ecfg.Worker.Version = version // shown in the workers' registry
	if err != nil {
		return nil, err
	}
	if cfg.Tracing.Enabled {
		if s.trace, err = newTracing(ctx, cfg.Tracing, version, log); err != nil {
			return nil, err
		}
		ecfg.Worker.TracerProvider = s.trace.provider
	}
	ecfg.Shards = s.b.Shards.All()[1:]
	if s.eng, err = engine.New(s.b.Redis, s.b.Ledger, ecfg); err != nil {
		return nil, err
	}
	if cfg.Orders.Enabled {
		if cfg.SQL.AutoMigrate {
			if err := migrateOrders(ctx, s.b); err != nil {
				return nil, err
			}
		}
		s.orders, err = orderclose.New(ordersLedger(s.b), s.b.Queue, orderclose.Config{
			PaymentWindow: cfg.Orders.PaymentWindow,
			SweepSpec:     cfg.Orders.SweeperSpec,
			SweepGrace:    cfg.Orders.SweeperGrace,
			SweepLockTTL:  cfg.Orders.SweeperLockTTL,
			OnSweep: func(rep orderclose.SweepReport, ran bool, err error) {
				s.obs.metrics.OrderSweep(rep.Enqueued, rep.Start.Add(rep.Duration), ran, err)
			},
			MaxAttempts: cfg.Queue.DefaultMaxAttempts,
			Logger:      log,
		})
		if err != nil {
			return nil, err
		}
		if p.sweeper {
			s.sweep = orderclose.NewSweeper(s.orders)
		}
	}
	// A durable topic's push and relay series start at zero, so that the
	// first lost push shows in increase() (alerts.yml).
	for topic := range cfg.Queue.Topics {
		if s.b.Queue.WaitsInSQL(topic) {
			s.obs.metrics.InitDurableTopic(topic)
		}
	}
	if p.workers {
		if err := s.handle(); err != nil {
			return nil, err
		}
	}
	if err := s.buildObservability(p); err != nil {
		return nil, err
	}
	if p.api {
		if err := s.buildAPI(p); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *system) buildAPI(p parts) error {
	c := s.cfg.HTTP
	var modules []httpapi.Module
	if s.orders != nil {
		h := orderclose.NewHTTPHandler(s.orders)
		for _, pattern := range h.Patterns() {
			modules = append(modules, httpapi.Module{Pattern: pattern, Handler: h})
		}
	}
	modules = append(modules, s.obs.apiModules()...)
	var counts httpapi.SQLCounter // the relay's cached counts, where one runs
	if p.recovery {
		counts = relayReader{s.eng}
	}
	// Deps.Ready stays nil: the API's own check pings the same two
	// backends and tells the unauthenticated /readyz only which one failed
	// (s.b.Ready's error has addresses and TLS details: those go to the
	// log).
	var schedules httpapi.Schedules // nil without periodic schedules
	if len(s.cfg.Periodic) > 0 {
		schedules = engineSchedules{s.eng}
	}
	h, err := httpapi.New(httpapi.Deps{
		Queue:         s.b.Queue,
		Ledger:        s.b.Ledger,
		Shards:        s.b.Shards,
		Recovery:      recoveryAPI{s.eng},
		SQLCounts:     counts,
		RateLimits:    s.cfg.Worker.RateLimits(),
		AttemptLimit:  s.cfg.Worker.AttemptLimit,
		CancelWarning: cancelWarning(s.cfg),
		Modules:       modules,
		Token:         strings.TrimSpace(c.Token),
		ReadOnly:      c.ReadOnly,
		MaxBodyBytes:  c.MaxBodyBytes,
		Logger:        s.log,
		Metrics:       s.obs.apiMetrics(),
		Dashboard:     s.obs.apiDashboard(),
		Schedules:     schedules,
	})
	if err != nil {
		return err
	}
	s.server = httpapi.NewServer(httpapi.ServerConfig{
		Addr:              c.Listen,
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout:       c.ReadTimeout,
		WriteTimeout:      c.WriteTimeout,
		IdleTimeout:       c.IdleTimeout,
		MaxConcurrent:     c.MaxConcurrent,
	}, h)
	// Listen now, so a taken port fails the start, and the address is
	// known (port 0 picks one).
	if s.ln, err = net.Listen("tcp", c.Listen); err != nil {
		return fmt.Errorf("http.listen %s: %w", c.Listen, err)
	}
	return nil
}

// apiURL is the API's base URL, or "" without an API.
func (s *system) apiURL() string {
	if s.ln == nil {
		return ""
	}
	return "http://" + s.ln.Addr().String()
}

// run runs every assembled part until ctx ends, then stops them all at
// once: the API's graceful shutdown, the worker's (no more claims, running
// handlers finish, outcomes settled), the recoverer and the sweeper run
// side by side. No part needs another stopped first: each is safe next to
// the others running, as it is next to other instances of the program.
// Only the backends wait, until every part has returned. A part that fails
// stops the others.
func (s *system) run(ctx context.Context, p parts) error {
	defer s.close()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	fail := func(name string, err error) {
		if err == nil {
			return
		}
		mu.Lock()
		errs = append(errs, fmt.Errorf("%s: %w", name, err))
		mu.Unlock()
		cancel(err)
	}
	start := func(name string, f func() error) {
		wg.Add(1)
		go func() { defer wg.Done(); fail(name, f()) }()
	}
	start("engine", func() error { return s.eng.Run(ctx) })
	if s.sweep != nil {
		start("sweeper", func() error { return s.sweep.Run(ctx) })
	}
	if s.server != nil {
		serveHTTP(ctx, "api", s.server, s.ln, start, fail, &wg)
		s.log.WithField("url", s.apiURL()).Info("API listening")
	}
	s.obs.run(ctx, start, fail, &wg, s.log)
	<-ctx.Done()
	s.log.Info("shutting down")
	wg.Wait()
	return errors.Join(errs...)
}

// serveHTTP serves srv on ln as part name until ctx ends, then shuts it
// down (10 s at most).
func serveHTTP(ctx context.Context, name string, srv *http.Server, ln net.Listener, start func(string, func() error), fail func(string, error), wg *sync.WaitGroup) {
	start(name, func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		sctx, c := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer c()
		fail(name+" shutdown", srv.Shutdown(sctx))
	}()
}

func (s *system) close() {
	s.obs.close()
	if err := s.trace.close(); err != nil {
		s.log.WithError(err).Warn("flushing the last spans")
	}
	for _, tg := range s.targets {
		tg.Close()
	}
	if s.b != nil {
		if err := s.b.Close(); err != nil {
			s.log.WithError(err).Warn("closing the backends")
		}
	}
}

// recoveryAPI adapts the engine's recovery runs to the API.
type recoveryAPI struct{ e *engine.Engine }

func (a recoveryAPI) Run(ctx context.Context, dryRun bool) (any, error) {
	return a.e.Recover(ctx, dryRun)
}

// Reports lists the runs of this process, dry runs included, newest first.
func (a recoveryAPI) Reports() any { return a.e.RecoveryReports() }

// engineSchedules gives the API the engine's periodic schedules.
type engineSchedules struct{ e *engine.Engine }

func (s engineSchedules) List(ctx context.Context) ([]periodic.Info, error) {
	return s.e.Schedules(ctx)
}

// relayReader gives the API and the metrics the relay's counts.
type relayReader struct{ e *engine.Engine }

func (r relayReader) Totals() recovery.RelayTotals { return r.e.RelayTotals() }

func (r relayReader) TotalsByShard() []recovery.RelayTotals { return r.e.RelayTotalsByShard() }

func (r relayReader) Counts() (map[string]ledger.ScheduledCount, time.Time) {
	return r.e.DurableCounts()
}

// newScheduler returns the scheduler of cfg's periodic jobs, nil without
// any: for listing them where no engine runs (the CLI on the stores).
func newScheduler(cfg config.Config, b *backend.Backends, log logrus.FieldLogger) (*scheduler.Scheduler, error) {
	if len(cfg.Periodic) == 0 {
		return nil, nil
	}
	schedules, err := cfg.Schedules()
	if err != nil {
		return nil, err
	}
	return scheduler.New(b.Queue, b.Steps, schedules, periodic.Options{Logger: log.WithField("component", "periodic")})
}

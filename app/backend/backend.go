// Package backend opens what the configuration names: Redis (a real one or
// the embedded miniredis) and the ledger's SQL database (MySQL or a SQLite
// file), and builds the queue client and the ledger on them.
package backend

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"
	"gorm.io/gorm"

	"github.com/delayq/delayq/app/config"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// Backends are the opened stores and the clients over them.
type Backends struct {
	Redis  redis.UniversalClient
	DB     *gorm.DB
	Queue  *dataplane.Client
	Ledger *ledger.Ledger
	// Shards are the ledger's shards (docs/design.md §7.1): Ledger first,
	// then one per sql.shards DSN. The listings read them merged.
	Shards *ledger.Shards
	// Steps are a job's ledger steps, each on its shard's ledger (cancel,
	// reschedule, find): Ledger's own steps on a ledger of one shard.
	Steps ledgerops.Router
	// Embedded is set when Redis or SQL is an embedded, not-for-production
	// backend.
	Embedded bool

	closers []func() error
}

// OpenLedger opens only the configured SQL database and the ledger on it
// (Redis, Queue stay nil): for work on the schema alone (delayq migrate),
// which must not need Redis. It does not migrate.
func OpenLedger(cfg config.Config, log logrus.FieldLogger) (_ *Backends, err error) {
	b := &Backends{}
	if err := b.openLedger(cfg, log); err != nil {
		_ = b.Close()
		return nil, err
	}
	return b, nil
}

// openLedger opens the SQL database and builds the ledger on it.
// With sql.shards, it opens each further shard's too.
func (b *Backends) openLedger(cfg config.Config, log logrus.FieldLogger) (err error) {
	if b.DB, err = b.openSQL(cfg.SQL, log); err != nil {
		return err
	}
	opts := ledger.Options{TablePrefix: cfg.SQL.TablePrefix,
		GroupCommit: cfg.SQL.GroupCommit, GroupLinger: cfg.SQL.GroupLinger,
		GroupCommitDepth: cfg.SQL.GroupCommitDepth, NoHistory: cfg.Queue.NoHistory(), UniqueFor: cfg.Queue.DurableUniqueFor(),
		NotReadyWait: notReadyWait(cfg.SQL.NotReadyWait)}
	if b.Ledger, err = ledger.New(b.DB, opts); err != nil {
		return err
	}
	var further []*ledger.Ledger
	for i, dsn := range cfg.SQL.Shards {
		db, err := b.OpenSQLShard(cfg.SQL, dsn, log)
		if err != nil {
			return fmt.Errorf("backend: ledger shard %d (sql.shards[%d]): %w", i+1, i, err)
		}
		l, err := ledger.New(db, opts)
		if err != nil {
			return fmt.Errorf("backend: ledger shard %d: %w", i+1, err)
		}
		further = append(further, l)
	}
	if b.Shards, err = ledger.NewShards(b.Ledger, further...); err != nil {
		return err
	}
	b.Steps = ledgerops.Of(b.Ledger)
	if len(further) > 0 {
		if b.Steps, err = ledgerops.NewShards(b.Shards.All()...); err != nil {
			return fmt.Errorf("backend: %w", err)
		}
	}
	return nil
}

// checkShards refuses a shard list that differs from the one the shards
// were marked with (ledger.Shards.Check): a configuration error (exit 2),
// since the rows of a job would be looked for on another shard than the one
// holding them. A shard whose schema predates the marks is only warned of.
func checkShards(ctx context.Context, shards *ledger.Shards, log logrus.FieldLogger) error {
	err := shards.Check(ctx)
	switch {
	case errors.Is(err, ledger.ErrShardMismatch):
		return &config.Error{Key: "sql.shards", Value: fmt.Sprintf("%d further DSNs", shards.Len()-1), Reason: err.Error()}
	case errors.Is(err, ledger.ErrShardUnmarked):
		log.WithError(err).Warn("the ledger shards' list is not checked until delayq migrate has run")
		return nil
	case err != nil:
		return fmt.Errorf("backend: check the ledger shards: %w", err)
	}
	return nil
}

// store is the queue's durable store: the ledger, or its shards' router.
func (b *Backends) store() queue.DurableStore {
	if s, ok := b.Steps.(*ledgerops.Shards); ok {
		return s
	}
	return b.Ledger
}

// Open opens the configured backends. On error, whatever was opened is
// closed again.
func Open(ctx context.Context, cfg config.Config, log logrus.FieldLogger) (*Backends, error) {
	return OpenWith(ctx, cfg, log, Options{})
}

// Options are what a program adds to the configured backends.
type Options struct {
	// QueueObserver, if set, is the queue client's queue.Config.Observer
	// (the program's metrics).
	QueueObserver queue.EnqueueObserver
	// NoShardCheck skips the check of the shard list against the shards'
	// marks (ledger.Shards.Check): for delayq bench, whose runs use tables
	// of their own, not the configured ledger's.
	NoShardCheck bool
}

// OpenWith is Open with opts.
func OpenWith(ctx context.Context, cfg config.Config, log logrus.FieldLogger, opts Options) (_ *Backends, err error) {
	// b is not the named result: "return nil, err" would set that to nil
	// before the deferred close of what was opened runs.
	b := &Backends{}
	defer func() {
		if err != nil {
			_ = b.Close()
		}
	}()
	rc := cfg.Redis
	if rc.PoolSize == 0 {
		rc.PoolSize = defaultPoolSize(cfg)
	}
	if b.Redis, err = b.openRedis(rc, log); err != nil {
		return nil, err
	}
	if rc.Mode != "embedded" {
		if err := checkRedis(ctx, b.Redis, rc, log); err != nil {
			return nil, err
		}
	}
	if err := b.openLedger(cfg, log); err != nil {
		return nil, err
	}
	qc := QueueConfig(cfg, opts.QueueObserver)
	qc.Store = b.store()
	if b.Queue, err = dataplane.New(b.Redis, qc); err != nil {
		return nil, err
	}
	if cfg.SQL.AutoMigrate {
		if err := b.Shards.Migrate(ctx); err != nil {
			return nil, fmt.Errorf("backend: migrate the ledger: %w", err)
		}
	}
	if !opts.NoShardCheck {
		if err := checkShards(ctx, b.Shards, log); err != nil {
			return nil, err
		}
	}
	if b.Embedded {
		log.Warn("EMBEDDED BACKENDS: an in-process Redis and/or a SQLite ledger. Jobs are lost when the process exits. NOT FOR PRODUCTION: configure redis.mode and sql.driver (see configs/production.example.yaml)")
	}
	return b, nil
}

// QueueConfig is the data plane's configuration from the program's, with
// observer (may be nil) told of every enqueue; its Store is left to the
// caller (the engine takes the ledger as its own argument).
func QueueConfig(cfg config.Config, observer queue.EnqueueObserver) queue.Config {
	c := queue.Config{
		Namespace:          cfg.Redis.Namespace,
		MaxPayloadBytes:    cfg.Queue.MaxPayloadBytes,
		MaxDelay:           cfg.Queue.MaxDelay,
		DefaultMaxAttempts: cfg.Queue.DefaultMaxAttempts,
		Coalesce:           cfg.Queue.Coalesce,
		CoalesceInFlight:   cfg.Queue.CoalesceInFlight,
		Observer:           observer,
		Horizon:            cfg.Queue.Horizon,
		PushTimeout:        cfg.Queue.PushTimeout,
		UncertainRecheck:   cfg.Queue.UncertainRecheck,
		TombstoneTTL:       cfg.Queue.TombstoneTTL,
		LayoutRefresh:      cfg.Queue.LayoutRefresh,
		TopicUniqueFor:     cfg.Queue.UniqueFor(),
		Trace:              cfg.Tracing.Enabled,
	}
	cfg.Queue.ConfigureLifecycles(&c)
	return c
}

// Ready checks that Redis and SQL answer.
func (b *Backends) Ready(ctx context.Context) error {
	var errs []error
	if err := b.Redis.Ping(ctx).Err(); err != nil {
		errs = append(errs, fmt.Errorf("redis: %w", err))
	}
	if sqlDB, err := b.DB.DB(); err != nil {
		errs = append(errs, fmt.Errorf("sql: %w", err))
	} else if err := sqlDB.PingContext(ctx); err != nil {
		errs = append(errs, fmt.Errorf("sql: %w", err))
	}
	return errors.Join(errs...)
}

// Close closes everything Open opened, in reverse order.
func (b *Backends) Close() error {
	var errs []error
	for i := len(b.closers) - 1; i >= 0; i-- {
		errs = append(errs, b.closers[i]())
	}
	b.closers = nil
	return errors.Join(errs...)
}

// maxDefaultPoolSize caps the pool size derived from http.max_concurrent:
// a large cap must not make every process open thousands of connections,
// past Redis's maxclients (10,000 by default, shared by all of them).
const maxDefaultPoolSize = 1000

// defaultPoolSize is go-redis's 10 connections per CPU, raised for an API
// that may run http.max_concurrent requests at once: with 400 connections
// on the enqueue endpoint, 20 Redis connections were the queue they waited
// in (19,300 req/s; 22,000 with 100). See config.Redis.PoolSize.
func defaultPoolSize(cfg config.Config) int {
	n := 10 * runtime.GOMAXPROCS(0)
	if cfg.HTTP.Enabled {
		n = max(n, min(cfg.HTTP.MaxConcurrent/8, maxDefaultPoolSize))
	}
	return n
}

// notReadyWait is the ledger's Options.NotReadyWait for the configured
// sql.not_ready_wait, where 0 means "try once" (the option's 0 is its
// default).
func notReadyWait(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

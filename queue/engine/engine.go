package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/internal/scheduler"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// Engine is delayq inside a Go service: the data plane on Redis, the
// ledger on SQL, and every background part a configuration needs. Build it
// with New, give it handlers with Handle, start it with Run; enqueue and
// operate on jobs through its methods, from any goroutine, before and
// while it runs.
type Engine struct {
	cfg   Config
	log   logrus.FieldLogger
	q     *dataplane.Client
	store *ledger.Ledger
	ops   ledgerops.Ops // store's internal steps, for the parts
	// shards route a job's steps to its ledger shard (store is shard 0);
	// nil with one shard, where store's own steps (ops) serve. ledgers
	// are the shards' ledgers, store first (store alone with one).
	shards  *ledgerops.Shards
	ledgers []*ledger.Ledger
	// readers are ledgers as one for the Inspector's merged reads.
	readers *ledger.Shards

	worker *dataplane.Worker
	// One recoverer, dry-run twin and relay per ledger shard, shard 0
	// first.
	recs    []*recoverer.Recoverer
	dryRecs []*recoverer.Recoverer // Recover's dry runs: the same locks, nothing changed
	relays  []*recoverer.Relay     // none with NoRecovery
	sched   *scheduler.Scheduler   // nil without Schedules

	mu      sync.Mutex
	handled []string // the topics given to Handle, in order
	ran     atomic.Bool
}

// New builds an engine on rdb (any go-redis UniversalClient: single node,
// Sentinel or Cluster) and store, the SQL ledger every claim is recorded
// in and every durable job is committed to. Nothing runs and nothing is
// read or written until Run or an operation. A configuration that cannot
// work is refused here with an error naming the field: a store missing,
// a durable topic or a schedule that is not valid, a recovery grace
// shorter than the heartbeat.
func New(rdb redis.UniversalClient, store *ledger.Ledger, cfg Config) (*Engine, error) {
	if rdb == nil {
		return nil, errors.New("engine: a Redis client is required")
	}
	if store == nil {
		return nil, errors.New("engine: a store (the SQL ledger) is required")
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = logrus.StandardLogger()
	}
	e := &Engine{cfg: cfg, log: cfg.Logger, store: store, ops: ledgerops.Of(store),
		ledgers: append([]*ledger.Ledger{store}, cfg.Shards...)}
	qc := cfg.Queue
	qc.Store = store
	var err error
	if e.readers, err = ledger.NewShards(store, cfg.Shards...); err != nil {
		return nil, err
	}
	if len(cfg.Shards) > 0 {
		if e.shards, err = ledgerops.NewShards(e.ledgers...); err != nil {
			return nil, fmt.Errorf("engine: Config.Shards: %w", err)
		}
		qc.Store = e.shards
	}
	if e.q, err = dataplane.New(rdb, qc); err != nil {
		return nil, err
	}
	if err := e.checkUniqueFor(); err != nil {
		return nil, err
	}
	if err := e.buildRecovery(); err != nil {
		return nil, err
	}
	wc := cfg.Worker
	if wc.Logger == nil {
		wc.Logger = component(e.log, "worker")
	}
	if !cfg.NoRecovery || cfg.Worker.OnRedisReconnect != nil {
		wc.OnRedisReconnect = e.redisReconnected
	}
	if e.worker, err = dataplane.NewWorker(e.q, e.steps(), wc); err != nil {
		return nil, err
	}
	if len(cfg.Schedules) > 0 {
		opts := cfg.Periodic
		if opts.Logger == nil {
			opts.Logger = component(e.log, "periodic")
		}
		if e.sched, err = scheduler.New(e.q, e.steps(), cfg.Schedules, opts); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// steps are the ledger's steps of a job, each on its shard: the shards'
// router, or the one store's own steps.
func (e *Engine) steps() ledgerops.Router {
	if e.shards != nil {
		return e.shards
	}
	return e.ops
}

// shardOps is shard i's steps for its relay and recoverer.
func (e *Engine) shardOps(i int) ledgerops.Ops {
	if e.shards != nil {
		return e.shards.Shard(i)
	}
	return e.ops
}

// buildRecovery builds each shard's recoverer, its dry-run twin and its
// relay.
func (e *Engine) buildRecovery() error {
	rc := e.cfg.Recovery
	if rc.Logger == nil {
		rc.Logger = component(e.log, "recovery")
	}
	if rc.HeartbeatInterval == 0 {
		rc.HeartbeatInterval = e.heartbeat(queue.TopicConfig{}) // Worker.Topic's
	}
	dry := rc
	dry.DryRun, dry.OnReport = true, nil // a dry run changes nothing worth a report hook
	relay := e.cfg.Relay
	if relay.Logger == nil {
		relay.Logger = component(e.log, "relay")
	}
	for i := range e.q.LedgerShards() {
		rec, err := recoverer.NewShard(e.q, e.shardOps(i), i, rc)
		if err != nil {
			return err
		}
		dryRec, err := recoverer.NewShard(e.q, e.shardOps(i), i, dry)
		if err != nil {
			return err
		}
		e.recs, e.dryRecs = append(e.recs, rec), append(e.dryRecs, dryRec)
		if e.cfg.NoRecovery {
			continue // no relay here: its settings are another process's
		}
		r, err := recoverer.NewShardRelay(e.q, e.shardOps(i), i, relay)
		if err != nil {
			return err
		}
		e.relays = append(e.relays, r)
	}
	return nil
}

// Must returns e, and panics if err is not nil: for a program's main,
// where a configuration that cannot work ends the program anyway.
func Must(e *Engine, err error) *Engine {
	if err != nil {
		panic(err)
	}
	return e
}

// Handle runs h for every job of topic that falls due, with tc over
// Config.Worker.Topic's defaults (concurrency, lease, retries, rate limit,
// timeout). Call it before Run; a topic given twice, or a tc that is not
// valid, is refused.
func (e *Engine) Handle(topic string, h queue.Handler, tc queue.TopicConfig) error {
	// Under e.mu with Run's start: the worker's topics are not to be
	// written once it runs.
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ran.Load() {
		return fmt.Errorf("engine: Handle(%s) after Run", topic)
	}
	if h == nil {
		return fmt.Errorf("engine: Handle(%s): the handler is nil", topic)
	}
	if hb, grace := e.heartbeat(tc), e.recs[0].Config().Grace; hb >= grace {
		return fmt.Errorf("engine: Handle(%s): heartbeat %s is not shorter than Recovery.Grace %s: the recoverer would take a live worker's jobs for lost (raise Recovery.Grace and Recovery.HeartbeatInterval)", topic, hb, grace)
	}
	if err := e.worker.Handle(topic, h, tc); err != nil {
		return err
	}
	e.handled = append(e.handled, topic)
	return nil
}

// heartbeat is the heartbeat of a topic handled with tc: its own, or the
// worker's default, or a third of its lease.
func (e *Engine) heartbeat(tc queue.TopicConfig) time.Duration {
	def := e.cfg.Worker.Topic
	if hb := cmp.Or(tc.Heartbeat, def.Heartbeat); hb > 0 {
		return hb
	}
	return queue.DefaultHeartbeat(cmp.Or(tc.Lease, def.Lease, queue.DefaultLease))
}

// HandledTopics lists the topics given to Handle, in order.
func (e *Engine) HandledTopics() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.handled...)
}

// Run starts what the configuration needs and runs it until ctx ends: the
// worker of the handled topics (claims, handlers, heartbeats, settling),
// the recoverer and the relay (unless Config.NoRecovery), and the periodic
// schedules (unless Config.NoPeriodic). When ctx ends it stops them all at
// once and returns after each stopped: the worker claims nothing more,
// running handlers finish (up to Worker.ShutdownTimeout) and every outcome
// is settled. A part that fails stops the others, and Run returns its
// error; ctx ending is not an error. Run may be called once.
func (e *Engine) Run(ctx context.Context) error {
	e.mu.Lock()
	first := e.ran.CompareAndSwap(false, true)
	e.mu.Unlock()
	if !first {
		return errors.New("engine: Run called twice")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	start := func(name string, run func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(ctx); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				mu.Unlock()
				cancel(err)
			}
		}()
	}
	e.raisePartitions(ctx)
	if len(e.HandledTopics()) > 0 {
		start("worker", e.worker.Run)
	}
	if e.cfg.NoRecovery {
		e.warnNoRelay()
	} else {
		for i := range e.recs {
			start(shardPart("recoverer", i), e.recs[i].Run)
			start(shardPart("relay", i), e.relays[i].Run)
		}
	}
	if e.sched != nil && !e.cfg.NoPeriodic {
		start("periodic", e.sched.Run)
	}
	<-ctx.Done()
	wg.Wait()
	return errors.Join(errs...)
}

// raisePartitions applies Config.Partitions. A failure is logged and left:
// the workers claim from whatever layout is stored, and an operator can
// raise the count later (SetPartitions).
func (e *Engine) raisePartitions(ctx context.Context) {
	for topic, k := range e.cfg.Partitions {
		log := e.log.WithFields(logrus.Fields{"topic": topic, "partitions": k})
		l, err := e.q.Layout(ctx, topic)
		if err != nil {
			log.WithError(err).Warn("engine: cannot read the topic's partitions: not raised")
			continue
		}
		switch cur := l.Current(); {
		case k < cur:
			log.WithField("stored", cur).Warn("engine: the topic has more partitions than configured: it keeps them (a count is never lowered)")
		case k > cur:
			if _, err := e.q.SetPartitions(ctx, topic, k); err != nil {
				log.WithError(err).Warn("engine: raising the topic's partitions failed")
				continue
			}
			log.WithField("was", cur).Info("engine: topic partitions raised")
		}
	}
}

// SetPartitions raises topic's partition count to k (docs/design.md §7.1):
// enqueues go to the k partitions and every worker claims from them within
// queue.Config.LayoutRefresh; jobs already enqueued drain where they are.
func (e *Engine) SetPartitions(ctx context.Context, topic string, k int) (queue.Partitions, error) {
	l, err := e.q.SetPartitions(ctx, topic, k)
	return l.Public(), err
}

// Partitions reads topic's partition layout.
func (e *Engine) Partitions(ctx context.Context, topic string) (queue.Partitions, error) {
	l, err := e.q.Layout(ctx, topic)
	return l.Public(), err
}

// warnNoRelay says, when this process runs no relay, that a durable
// topic's far jobs depend on another process's.
func (e *Engine) warnNoRelay() {
	for _, topic := range e.HandledTopics() {
		if e.q.WaitsInSQL(topic) {
			e.log.WithField("topic", topic).Warn("engine: durable topic and no relay in this process (NoRecovery): another process must run one, or its jobs due beyond the horizon never run")
			return
		}
	}
}

// redisReconnected checks, after the worker's link to Redis came back,
// whether Redis lost data meanwhile, and recovers at once if it did; then
// it runs the user's hook.
func (e *Engine) redisReconnected(ctx context.Context) {
	if !e.cfg.NoRecovery {
		for _, r := range e.recs {
			r.RedisReconnected(ctx)
		}
	}
	if f := e.cfg.Worker.OnRedisReconnect; f != nil {
		f(ctx)
	}
}

// shardPart names a part of shard i in Run's errors: the part's name alone
// for shard 0.
func shardPart(name string, i int) string {
	if i == 0 {
		return name
	}
	return fmt.Sprintf("%s of shard %d", name, i)
}

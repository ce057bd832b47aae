package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// sandbox is one run's corner of the backends: a Redis key namespace and
// ledger tables of its own, and the clients over them.
type sandbox struct {
	env Env
	ns  string // Redis namespace, also the tables' prefix without its "_"
	q   *dataplane.Client
	led *ledger.Ledger // shard 0's
	// leds are the ledger's shards (led first: Env.DB, then Env.Shards),
	// and steps a job's ledger steps, each on its shard.
	leds   []*ledger.Ledger
	steps  ledgerops.Router
	log    logrus.FieldLogger
	offset int64 // Redis's clock minus the local one, µs (0 when within measuring precision)
	// durable is the topic made durable for the run ("" when none): its
	// enqueues commit to the sandbox's ledger first (Options.Durable).
	durable string
	// sqlProc is the SQL server's process when it runs on this host, for
	// its CPU time (Usage.SQLCPU).
	sqlProc serverProc
	// tracer is the runs' tracer provider with Env.Trace, else nil.
	tracer *sdktrace.TracerProvider
	// pool: the workers run their topic in a pool (Env.Pool).
	pool bool
	// priorities: loaded jobs take every priority in turn (Env.Priorities).
	priorities bool
	// orderingKeys: loaded jobs take this many ordering keys in turn
	// (Env.OrderingKeys).
	orderingKeys int
}

// cleanupTimeout bounds the removal of a sandbox.
const cleanupTimeout = 2 * time.Minute

// newSandbox creates a namespace and migrated ledger tables for one run.
// durable, if not "", is a topic made durable (queue.Config.TopicDurability)
// with the sandbox's ledger as its Store; horizon, if not 0, replaces
// the queue's Horizon; noHistory are topics whose jobs leave no history.
func newSandbox(ctx context.Context, env Env, durable string, horizon time.Duration, noHistory []string) (s *sandbox, err error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("bench: random sandbox name: %w", err)
	}
	ns := "dqbench_" + hex.EncodeToString(b)
	s = &sandbox{env: env, ns: ns, log: env.Logger, durable: durable}
	for i, db := range append([]*gorm.DB{env.DB}, env.Shards...) {
		led, err := ledger.New(db, ledger.Options{TablePrefix: ns + "_", NoHistory: noHistory})
		if err != nil {
			return nil, fmt.Errorf("bench: ledger shard %d: %w", i, err)
		}
		s.leds = append(s.leds, led)
	}
	s.led, s.steps = s.leds[0], ledgerops.Of(s.leds[0])
	var store queue.DurableStore = s.led
	if len(s.leds) > 1 {
		shards, err := ledgerops.NewShards(s.leds...)
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		s.steps, store = shards, shards
	}
	qc := env.Queue
	qc.Namespace = ns
	// The configured topics' durability (and their Store, the program's
	// own ledger) are not the sandbox's: only the run's topic may be
	// durable, on the sandbox's ledger; the baselines' topics stay redis.
	qc, qc.Store = qc.WithDurableTopics(), nil
	if durable != "" {
		qc, qc.Store = qc.WithDurableTopics(durable), store
	}
	if horizon != 0 {
		qc.Horizon = horizon
	}
	s.pool = env.Pool
	s.priorities = env.Priorities
	s.orderingKeys = env.OrderingKeys
	if env.Trace {
		qc.Trace = true
		s.tracer = sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	}
	if s.q, err = dataplane.New(env.Redis, qc); err != nil {
		return nil, fmt.Errorf("bench: queue client: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.close(ctx))
		}
	}()
	for i, led := range s.leds {
		if err := led.Migrate(ctx); err != nil {
			return nil, fmt.Errorf("bench: create the sandbox's ledger tables on shard %d: %w", i, err)
		}
	}
	if s.offset, err = clockOffset(ctx, env.Redis); err != nil {
		return nil, err
	}
	s.sqlProc = sqlServerProc(ctx, env.DB)
	return s, nil
}

// close deletes the sandbox's keys and drops its tables, unless the Env
// says to keep them. It runs even when ctx is cancelled (an interrupted run
// cleans up too).
func (s *sandbox) close(ctx context.Context) error {
	if s.tracer != nil {
		_ = s.tracer.Shutdown(ctx) // its exporter drops the spans
	}
	if s.env.Keep {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	var errs []error
	if err := deleteKeys(ctx, s.env.Redis, s.ns+":*"); err != nil {
		errs = append(errs, fmt.Errorf("bench: delete the keys of namespace %s: %w", s.ns, err))
	}
	for _, led := range s.leds {
		if err := led.Drop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("bench: %w", err))
		}
	}
	return errors.Join(errs...)
}

// deleteKeys unlinks every key matching match, on every master of a
// cluster. One key per UNLINK: keys of different slots cannot share one.
func deleteKeys(ctx context.Context, rdb redis.UniversalClient, match string) error {
	return forEachKeys(ctx, rdb, match, func(ctx context.Context, c redis.UniversalClient, keys []string) error {
		pipe := c.Pipeline()
		for _, k := range keys {
			pipe.Unlink(ctx, k)
		}
		_, err := pipe.Exec(ctx)
		return err
	})
}

// forEachKeys calls fn with the keys matching match, a SCAN page at a time,
// on every master of a cluster, with the client of the node that has them.
func forEachKeys(ctx context.Context, rdb redis.UniversalClient, match string, fn func(ctx context.Context, c redis.UniversalClient, keys []string) error) error {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return forEachKeysOn(ctx, c, match, fn)
		})
	}
	return forEachKeysOn(ctx, rdb, match, fn)
}

func forEachKeysOn(ctx context.Context, c redis.UniversalClient, match string, fn func(ctx context.Context, c redis.UniversalClient, keys []string) error) error {
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, match, 1000).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := fn(ctx, c, keys); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// clockOffset estimates Redis's clock minus the local clock, in µs, from
// the fastest of a few TIME round trips. An offset smaller than that round
// trip cannot be told from measuring noise and is taken as 0 (the usual case:
// Redis on the same host reads the same clock).
func clockOffset(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	best, offset := time.Duration(1<<62), int64(0)
	for i := 0; i < 9; i++ {
		t0 := time.Now()
		rt, err := rdb.Time(ctx).Result()
		t1 := time.Now()
		if err != nil {
			return 0, fmt.Errorf("bench: Redis TIME: %w", err)
		}
		if rtt := t1.Sub(t0); rtt < best {
			best = rtt
			mid := t0.Add(rtt / 2)
			offset = rt.Sub(mid).Microseconds()
		}
	}
	if abs(offset) <= best.Microseconds() {
		return 0, nil
	}
	return offset, nil
}

// redisNowMs returns Redis's clock in Unix ms.
func (s *sandbox) redisNowMs(ctx context.Context) (int64, error) {
	t, err := s.env.Redis.Time(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("bench: Redis TIME: %w", err)
	}
	return t.UnixMilli(), nil
}

// leftover counts what the topic still holds after a run: jobs in Redis
// (waiting, in flight or dead) and rows in the ledger.
func (s *sandbox) leftover(ctx context.Context, topic string) (int64, error) {
	st, err := s.q.Stats(ctx, topic)
	if err != nil {
		return 0, err
	}
	rows, err := s.rows(ctx)
	if err != nil {
		return 0, err
	}
	return st.Due + st.InFlight + st.Dead + rows, nil
}

// sharedServers says, over ledger shards, which of them are on one SQL
// server: their row counts (Costs.SQLShards) are the server's, not each
// shard's. "" when each has its own (or there is one shard).
func (s *sandbox) sharedServers(ctx context.Context) string {
	if len(s.leds) < 2 {
		return ""
	}
	seen := map[string]int{}
	for i, led := range s.leds {
		var id string
		if err := led.DB().WithContext(ctx).Raw("SELECT CONCAT(@@hostname, ':', @@port)").Scan(&id).Error; err != nil {
			continue
		}
		if j, ok := seen[id]; ok {
			return fmt.Sprintf("ledger shards %d and %d are on one SQL server (%s): each shard's ROWS INSERTED is the server's count, not the shard's", j, i, id)
		}
		seen[id] = i
	}
	return ""
}

// rows counts the ledger's rows on every shard.
func (s *sandbox) rows(ctx context.Context) (int64, error) {
	var n int64
	for _, led := range s.leds {
		c, err := led.Count(ctx)
		if err != nil {
			return 0, err
		}
		n += c
	}
	return n, nil
}

// countDurableRows sets r.DurableRows, for a durable run, to the ledger's
// rows: once the jobs are enqueued and before any is handled, one per
// accepted job (the proof that the enqueues went to SQL).
func (s *sandbox) countDurableRows(ctx context.Context, r *Result) error {
	if s.durable == "" {
		return nil
	}
	n, err := s.rows(ctx)
	if err != nil {
		return fmt.Errorf("bench: count the durable rows: %w", err)
	}
	r.DurableRows = &n
	return nil
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

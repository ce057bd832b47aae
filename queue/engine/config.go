package engine

import (
	"errors"
	"fmt"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/queue/periodic"
	"github.com/delayq/delayq/recovery"
)

// Config is everything an Engine runs with. The zero value of each field
// means the default written next to it (or in the type it holds), so
// Config{} is a working configuration: every topic on Redis, a recoverer
// every 30 s and a relay, no periodic schedule.
type Config struct {
	// Queue is the data plane: key namespace, limits, which topics are
	// durable, the horizon (see queue.Config). Leave Queue.Store nil: the
	// store is New's argument, and every operation uses that one.
	Queue queue.Config
	// Worker configures the worker that runs the handlers given to Handle:
	// its id, the defaults of every topic (Worker.Topic), the shutdown
	// timeout, hooks and metrics (see queue.WorkerConfig). The worker
	// records its claims in New's store. Worker.OnRedisReconnect, if set, runs after the engine's own
	// reconnect check.
	Worker queue.WorkerConfig
	// Recovery configures the recoverer: the cron schedule, the grace past
	// a lease, the lock (see recovery.Config). HeartbeatInterval defaults to
	// the heartbeat of Worker.Topic; Handle refuses a topic that beats no
	// faster than Grace. Logger defaults to Config.Logger.
	Recovery recovery.Config
	// Relay configures the relay, which loads durable topics' jobs into
	// Redis as they come within the horizon and pushes those whose push
	// after their commit was lost (see recovery.RelayConfig). Logger
	// defaults to Config.Logger. Unused with NoRecovery.
	Relay recovery.RelayConfig
	// NoRecovery makes Run start neither the recoverer nor the relay: for a
	// process that only works, next to others that recover. Somewhere in
	// the deployment one process must run them: without a relay, a durable
	// job due beyond the horizon never reaches Redis, and Run warns about
	// it. Recover still works on request. Default off.
	NoRecovery bool
	// Schedules are the periodic jobs: each tick is enqueued once, whichever
	// of the processes that run them claims it (see periodic.Schedule).
	// Default none.
	Schedules []periodic.Schedule
	// Periodic tunes the scheduler of Schedules (see periodic.Options).
	// Logger defaults to Config.Logger.
	Periodic periodic.Options
	// NoPeriodic makes Run leave Schedules to other processes; Schedules
	// still lists them. Default off.
	NoPeriodic bool
	// Partitions raises topics' partition counts when Run starts: each
	// topic named gets at least this many (docs/design.md §7.1). The count
	// is a stored setting of the topic, which every process reads, so a
	// process configured with fewer than the topic has keeps the topic's
	// (and says so in a warning); a count is never lowered. Default none:
	// every topic as stored (one partition unless raised).
	Partitions map[string]int
	// Shards are the ledger's further shards, each an SQL server (or
	// database) of its own with the same table names, migrated; New's
	// store is shard 0, the home shard (docs/design.md §7.1, "Ledger
	// shards"). The rows of a topic or partition name live on shard
	// dataplane.ShardOf(name, N) of the N: partition p on shard p mod N,
	// a topic of one partition on the FNV-1a hash of its name mod N. Every
	// step of a job goes to its shard, and Run starts one relay and one
	// recoverer per shard, each with its own lock (Relay.LockKey and
	// Recovery.LockKey suffixed ":<shard>" past shard 0). Transaction and
	// EnqueueTx are shard 0's, TransactionOn any shard's: each refuses a
	// job whose partition is on another shard. History merges every
	// shard's, and the Inspector's counts sum them; the Inspector's rows
	// and the store's own reads are shard 0's alone for now. The shards
	// are fixed when the ledger is created: every process of the namespace
	// must give the same ones in the same order, and a ledger of one shard
	// cannot take more later (its rows would be looked for on the shards
	// their names route to, not where they are). Default none: one shard.
	Shards []*ledger.Ledger
	// Logger receives the logs of every part, with a "component" field.
	// Default logrus.StandardLogger().
	Logger logrus.FieldLogger
}

// check refuses what only New may set.
func (c Config) check() error {
	if c.Queue.Store != nil {
		return errors.New("engine: Config.Queue.Store: leave it nil; the store is New's argument")
	}
	for i, l := range c.Shards {
		if l == nil {
			return fmt.Errorf("engine: Config.Shards[%d]: nil", i)
		}
	}
	for topic, k := range c.Partitions {
		if err := queue.ValidateTopic(topic); err != nil {
			return fmt.Errorf("engine: Config.Partitions: %w", err)
		}
		if k < 1 || k > queue.MaxPartitions {
			return fmt.Errorf("engine: Config.Partitions[%s]: %d: want 1-%d", topic, k, queue.MaxPartitions)
		}
	}
	return nil
}

// component is l with the part's name, for its logs.
func component(l logrus.FieldLogger, name string) logrus.FieldLogger {
	return l.WithField("component", name)
}

// checkUniqueFor refuses a durable topic whose uniqueness window differs
// between Queue.TopicUniqueFor and a shard's ledger.Options.UniqueFor: a
// durable topic's enqueue reads its window from the ledger, so the two
// must say the same (docs/design.md §4.2.1).
func (e *Engine) checkUniqueFor() error {
	topics := make(map[string]bool)
	for t := range e.cfg.Queue.TopicUniqueFor {
		topics[t] = true
	}
	for _, l := range e.ledgers {
		for t := range l.UniqueForAll() {
			topics[t] = true
		}
	}
	for t := range topics {
		if !e.q.WaitsInSQL(t) {
			continue
		}
		want := e.cfg.Queue.UniqueFor(t)
		for i, l := range e.ledgers {
			if got := l.UniqueFor(t); got != want {
				return fmt.Errorf("engine: durable topic %s: Queue.TopicUniqueFor gives a uniqueness window of %s, "+
					"the ledger (shard %d) %s: give ledger.Options.UniqueFor the same", t, want, i, got)
			}
		}
	}
	return nil
}

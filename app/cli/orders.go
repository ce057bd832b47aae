package cli

import (
	"maps"

	"github.com/delayq/delayq/app/config"
	"github.com/delayq/delayq/jobs/orderclose"
)

// ordersTopicKey is the configuration key of the orders topic's durability.
const ordersTopicKey = "queue.topics." + orderclose.Topic + ".durability"

// requireOrders applies the orders module's requirement of its topic to cfg
// when orders.enabled: order_close takes the module's durability unless
// queue.topics sets it (so enabling the module takes one key, even from
// the environment, which cannot set a topic), and any other is refused as
// invalid configuration. Every command calls it after loading, so that an
// operator's enqueue to order_close is durable exactly when the module's
// are.
func requireOrders(cfg *config.Config) error {
	if !cfg.Orders.Enabled {
		return nil
	}
	want := orderclose.RequiredDurability
	t := cfg.Queue.Topics[orderclose.Topic]
	if t.Durability == "" {
		// A copy: the map may be shared with the caller's other values.
		topics := maps.Clone(cfg.Queue.Topics)
		if topics == nil {
			topics = map[string]config.QueueTopic{}
		}
		t.Durability = want
		topics[orderclose.Topic] = t
		cfg.Queue.Topics = topics
	}
	if t.Durability != want {
		return &config.Error{Key: ordersTopicKey, Value: t.Durability,
			Reason: "the orders module (orders.enabled) needs its topic " + orderclose.Topic + " " + want + "; set " + want + " or orders.enabled: false"}
	}
	if len(cfg.SQL.Shards) > 0 && t.Partitions > 1 {
		// The orders tables are on one shard (ordersLedger), and a close
		// commits with its job's row: the jobs must stay on that shard.
		return &config.Error{Key: "queue.topics." + orderclose.Topic + ".partitions", Value: t.Partitions,
			Reason: "over ledger shards (sql.shards) the orders module's topic keeps one partition: its close jobs commit with the orders, which are on one shard"}
	}
	return nil
}

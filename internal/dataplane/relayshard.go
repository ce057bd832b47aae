package dataplane

import (
	"context"
	"errors"
	"hash/fnv"
	"slices"
	"strconv"
)

// The relay's keys per ledger shard (docs/design.md §7.1, "Ledger
// shards"): each shard's rows are timed by its own SQL server's clock and
// passed over by its own relay, so each relay has its own mark, inbox,
// bell, next-load time and rechecks. Shard 0 keeps the names of a ledger
// of one shard, so nothing moves for a deployment of one; shard i > 0
// adds ":<i>" to the mark's name and to the hash tag of the others, which
// puts each shard's inbox keys in a slot of their own.

// ShardedStore is a store whose rows are spread over several ledger shards
// (ledgerops.Shards): the rows of a topic or partition name live on shard
// ShardOf(name, LedgerShards()). A store that is not one is one shard.
type ShardedStore interface {
	LedgerShards() int
}

// relayKeys are one shard's relay keys.
type relayKeys struct {
	mark, inbox, next, bell, recheck string
}

func relayKeysOf(namespace string, shard int) relayKeys {
	mark, tag := namespace+":relay", "{relay}"
	if shard > 0 {
		s := strconv.Itoa(shard)
		mark, tag = mark+":"+s, "{relay:"+s+"}"
	}
	p := namespace + ":" + tag + ":"
	return relayKeys{mark: mark, inbox: p + "inbox", next: p + "next", bell: p + "bell", recheck: p + "recheck"}
}

// storeShards is how many ledger shards store spreads its rows over.
func storeShards(store any) int {
	if s, ok := store.(ShardedStore); ok {
		return max(1, s.LedgerShards())
	}
	return 1
}

// LedgerShards is how many ledger shards the client's store spreads its
// rows over (1 unless it is a ShardedStore): one relay runs per shard.
func (c *Client) LedgerShards() int { return len(c.relays) }

// relay returns shard's relay keys (shard 0's for one out of range, which
// a caller's check refuses first).
func (c *Client) relay(shard int) relayKeys {
	if shard < 0 || shard >= len(c.relays) {
		return c.relays[0]
	}
	return c.relays[shard]
}

// shardsOf lists, in order and once each, the shards holding the rows of
// names (topics or partitions).
func (c *Client) shardsOf(names ...string) []int {
	n := len(c.relays)
	if n == 1 {
		return []int{0}
	}
	var out []int
	for _, name := range names {
		if s := ShardOf(name, n); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// ShardOfKey is the ledger shard (0 to n-1) of the jobs whose partition key
// (or id, without one) is key, on every topic whose partition count is a
// multiple of n: partition PartitionOf(key, K) is on shard that mod n,
// which is FNV-1a of key mod n whatever the K. A shop whose own rows are
// sharded by the same key and function commits a customer's order and
// its close job in one transaction (docs/design.md §7.1). A job without a
// partition key goes by its id: pass the id then.
func ShardOfKey(key string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum64() % uint64(n))
}

// PinShard marks store, a transaction's (ledger.Ledger.Tx), as being on
// ledger shard shard: EnqueueTx through it routes each job to its
// partition as usual and refuses, before writing anything, a call with a
// job whose partition (or topic of one partition) is on another shard
// (ErrOtherShard). An unpinned transaction over several shards (a
// periodic tick's, on its topic's shard) writes every job to the topic's
// own name instead.
func PinShard(store DurableStore, shard int) DurableStore {
	return pinnedStore{DurableStore: store, shard: shard}
}

// pinnedStore is a store on a known shard (PinShard).
type pinnedStore struct {
	DurableStore
	shard int
}

// ScheduleEach is the store's own, for a store that has it.
func (p pinnedStore) ScheduleEach(ctx context.Context, topics []string, jobs [][]NewJob) ([][]EnqueueResult, int64, error) {
	ps, ok := p.DurableStore.(PartitionStore)
	if !ok {
		return nil, 0, errors.New("queue: the pinned store writes no partitions")
	}
	return ps.ScheduleEach(ctx, topics, jobs)
}

// unpin returns store without its pin, and the shard it was pinned to
// (-1: none).
func unpin(store DurableStore) (DurableStore, int) {
	if p, ok := store.(pinnedStore); ok {
		return p.DurableStore, p.shard
	}
	return store, -1
}

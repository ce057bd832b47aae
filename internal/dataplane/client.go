package dataplane

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/internal/redislock"
)

// Client runs the data-plane scripts against one Redis (single node,
// Sentinel or Cluster, through go-redis's UniversalClient). It is safe for
// concurrent use.
type Client struct {
	rdb     redis.UniversalClient
	cfg     Config
	scripts scripts
	// listScript pages through a state's set (list.go).
	listScript *redis.Script

	keys      sync.Map // valid topic -> keys
	keysN     atomic.Int64
	topicSeen sync.Map // topic -> time.Time of the last SADD to the topics set
	layouts   sync.Map // topic -> *layoutEntry (layout.go)

	batchers  sync.Map // topic -> *enqueueBatcher (coalesce.go)
	batchersN atomic.Int64

	// pushDownUntil (Unix ns) skips pushes of durable jobs for a moment
	// after one failed (durable.go).
	pushDownUntil atomic.Int64

	// notePrefix and noteSeq make the references of the relay's notes
	// (relayinbox.go).
	notePrefix string
	noteSeq    atomic.Uint64
	// relays are the relay's keys of each ledger shard (relayshard.go).
	relays []relayKeys
}

// The Client is the Enqueuer a handler's follow-up jobs go through in
// delayq's own packages.
var _ Enqueuer = (*Client)(nil)

// New returns a Client over rdb. The caller owns rdb and closes it.
func New(rdb redis.UniversalClient, cfg Config) (*Client, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	c := &Client{rdb: rdb, cfg: cfg, scripts: newScripts(), listScript: redis.NewScript(listLua), notePrefix: newNotePrefix()}
	for i := range storeShards(cfg.Store) {
		c.relays = append(c.relays, relayKeysOf(cfg.Namespace, i))
	}
	return c, nil
}

// Redis is the client's Redis, for a reader that needs a data plane of its
// own over it (engine.NewInspector).
func (c *Client) Redis() redis.UniversalClient { return c.rdb }

// Config returns the client's configuration with defaults filled in.
func (c *Client) Config() Config { return c.cfg }

// Ping checks that Redis answers: the readiness probe's Redis check.
func (c *Client) Ping(ctx context.Context) error {
	if err := c.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("queue: ping: %w", err)
	}
	return nil
}

// Time returns Redis's clock, the one every due time and lease is measured
// on.
func (c *Client) Time(ctx context.Context) (time.Time, error) {
	t, err := c.rdb.Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("queue: Redis time: %w", err)
	}
	return t, nil
}

// Lock is a TTL lock in Redis with an owner token: TryAcquire, Refresh,
// Release, and Do to run a function while holding it (the lock is refreshed
// every TTL/3, and a lost lock cancels the function's context).
type Lock = redislock.Lock

// ErrLockNotHeld is what a Lock's Refresh and Release return, and the cause
// of Do's cancelled context, once the lock is no longer this holder's.
var ErrLockNotHeld = redislock.ErrNotHeld

// Lock returns a lock named key, with the given TTL, in this client's Redis:
// one holder at a time across processes, for the cron jobs (the recoverer,
// the order sweeper) that one process at a time runs. Each caller takes its
// own; a Lock is not safe for concurrent use.
func (c *Client) Lock(key string, ttl time.Duration) *Lock {
	return redislock.New(c.rdb, key, ttl)
}

// maxCachedTopics bounds keysFor's cache: a client that is asked about
// ever new topic names (an API caller probing GET /v1/topics/{topic}) must
// not grow without limit; past it, keys are built on every call.
const maxCachedTopics = 10000

// keysFor returns the keys of a topic or a topic's partition, or the
// *ValidationError of an invalid name. Every Redis key of a topic is built
// here, so no name that could break out of the {topic} hash tag or the
// namespace (a brace, a colon, a glob character, "..") ever reaches Redis,
// whichever method the topic came through.
func (c *Client) keysFor(topic string) (keys, error) {
	if k, ok := c.keys.Load(topic); ok {
		return k.(keys), nil
	}
	if err := validateName(topic); err != nil {
		return keys{}, err
	}
	k := newKeys(c.cfg.Namespace, topic)
	if c.keysN.Load() < maxCachedTopics {
		if _, loaded := c.keys.LoadOrStore(topic, k); !loaded {
			c.keysN.Add(1)
		}
	}
	return k, nil
}

// keysForAll returns the keys of every topic of m, or the first invalid
// topic's error: a call over several topics checks them all before it
// writes anything.
func keysForAll[V any](c *Client, m map[string]V) (map[string]keys, error) {
	out := make(map[string]keys, len(m))
	for topic := range m {
		k, err := c.keysFor(topic)
		if err != nil {
			return nil, err
		}
		out[topic] = k
	}
	return out, nil
}

// WakeChannel is the pub/sub channel on which a topic announces jobs that
// became due earlier than its previous head; "" for an invalid topic name.
//
// Plumbing: a step of the Worker's, exported for delayq's own packages; a
// service runs jobs through engine.Engine (or a Worker), never by
// calling it.
func (c *Client) WakeChannel(topic string) string {
	k, err := c.keysFor(topic)
	if err != nil {
		return ""
	}
	return k.wake
}

// topicRefresh is how often a client re-adds a topic it enqueues to to the
// topics set: the set has no hash tag, so no script can maintain it, and
// once per client per topic would never restore it after a Redis data loss.
const topicRefresh = 10 * time.Second

// noteTopic records the topic of name (a topic or a partition) in the
// topics set and, for a partition, its count in the topic's layout, at
// most once per topicRefresh: a partition that jobs go to is claimed
// from, also after a Redis that lost the layout (layout.go).
func (c *Client) noteTopic(ctx context.Context, name string) error {
	now := time.Now()
	if t, ok := c.topicSeen.Load(name); ok && now.Sub(t.(time.Time)) < topicRefresh {
		return nil
	}
	topic := TopicOf(name)
	if err := c.rdb.SAdd(ctx, topicsKey(c.cfg.Namespace), topic).Err(); err != nil {
		return fmt.Errorf("queue: register topic %s: %w", topic, err)
	}
	if _, k, _, ok := parsePartition(name); ok {
		if err := c.listLayout(ctx, topic, k); err != nil {
			return err
		}
	}
	c.topicSeen.Store(name, now)
	return nil
}

// Topics lists the topics jobs were enqueued to, sorted. Names in the set
// that are not valid topics are left out: delayq never writes one, so
// someone else did, and no key may be built from it.
func (c *Client) Topics(ctx context.Context) ([]string, error) {
	ts, err := c.rdb.SMembers(ctx, topicsKey(c.cfg.Namespace)).Result()
	if err != nil {
		return nil, fmt.Errorf("queue: topics: %w", err)
	}
	ts = slices.DeleteFunc(ts, func(t string) bool { return ValidateTopic(t) != nil })
	slices.Sort(ts)
	return ts, nil
}

// oneNode says every key is on the one node the client talks to (a
// *redis.Client: a single Redis, or a Sentinel's master), so a script call
// may take several partitions' keys. Any other client (a Cluster's, a
// Ring, a wrapper) gets one call per partition, each on its own slot.
func (c *Client) oneNode() bool {
	_, ok := c.rdb.(*redis.Client)
	return ok
}

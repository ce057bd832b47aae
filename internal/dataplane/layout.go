package dataplane

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/queue"
)

// A topic's layout is the list of its partition counts that may still hold
// jobs (docs/design.md §7.1): 1 alone for a topic never partitioned; the
// old counts and the new one after an operator raised it. Enqueues go to
// the highest, the current one; workers claim from every partition of
// every count listed, so the jobs of an old layout drain while new ones go
// to the new. It is stored, not configured: every process reads the same
// one (Client.Layout), so no two can disagree on where a job goes for
// longer than Config.LayoutRefresh.
//
// It lives in Redis, in a ZSET in the slot of the topic's name, with the
// count as member and score. Count 1 is listed whenever the key exists,
// since the topic's own keys (layout 1) may always hold jobs from before.
// A Redis that loses the key loses the layout with the jobs; for a durable
// topic the relay's pushes list again the counts its rows' partitions
// belong to (noteTopic), so every layout holding a waiting row is claimed
// from again.

// Layout is a topic's partition counts, ascending: the last is current.
type Layout struct {
	Counts []int
	// names are the partitions' names by count (readLayout): routing an
	// enqueue looks one up rather than searching for its tag.
	names map[int][]string
}

// Public is the layout as package queue shows it.
func (l Layout) Public() queue.Partitions {
	return queue.Partitions{Current: l.Current(), Layouts: l.counts()}
}

// counts are the counts listed: 1 alone for a topic never partitioned.
func (l Layout) counts() []int {
	if len(l.Counts) == 0 {
		return []int{1}
	}
	return l.Counts
}

// single says the topic has one partition, its own, and never had more:
// every job of it is under its own name.
func (l Layout) single() bool { return len(l.Counts) <= 1 && l.Current() == 1 }

// Current is the partition count enqueues use.
func (l Layout) Current() int {
	if len(l.Counts) == 0 {
		return 1
	}
	return l.Counts[len(l.Counts)-1]
}

// Names returns the names of every partition of every count listed: the
// current count's first, by partition, then the older ones'. A topic of
// one partition has its own name alone.
func (l Layout) Names(topic string) []string {
	counts := l.counts()
	var out []string
	for i := len(counts) - 1; i >= 0; i-- {
		out = append(out, l.partitions(topic, counts[i])...)
	}
	return out
}

// partitions returns the names of the k partitions of topic.
func (l Layout) partitions(topic string, k int) []string {
	if names, ok := l.names[k]; ok {
		return names
	}
	return partitionNames(topic, k)
}

// partitionNames returns the names of the k partitions of topic.
func partitionNames(topic string, k int) []string {
	out := make([]string, k)
	for p := range k {
		out[p] = partitionTag(topic, k, p)
	}
	return out
}

// maxNameLen is the longest topic or partition name: the ledger's topic
// columns are varchar(64).
const maxNameLen = 64

// pausedKey is the paused flag's key of a topic or partition name.
func (c *Client) pausedKey(name string) string { return newKeys(c.cfg.Namespace, name).paused }

// layoutKey is the ZSET of topic's partition counts.
func layoutKey(namespace, topic string) string {
	return namespace + ":{" + topic + "}:layout"
}

// layoutEntry is a process's copy of one topic's layout: every enqueue
// reads it, without a lock; mu lets one caller at a time read it again.
type layoutEntry struct {
	mu     sync.Mutex
	cur    atomic.Pointer[layoutCopy]
	failed atomic.Pointer[layoutFailure] // the last read failed, with no copy to give
}

// layoutCopy is a layout and when it was read.
type layoutCopy struct {
	layout Layout
	at     time.Time
}

// Layout returns topic's layout as this process last read it, read again
// when older than Config.LayoutRefresh. When Redis cannot be read it
// returns the copy it has, however old, and without one the error.
func (c *Client) Layout(ctx context.Context, topic string) (Layout, error) {
	if err := ValidateTopic(topic); err != nil {
		return Layout{}, err
	}
	v, ok := c.layouts.Load(topic)
	if !ok {
		v, _ = c.layouts.LoadOrStore(topic, &layoutEntry{})
	}
	e := v.(*layoutEntry)
	// What is fresh enough to answer with: a copy, or a failed read that
	// is not due to be tried again yet.
	fresh := func() (Layout, bool, error) {
		if cp := e.cur.Load(); cp != nil && time.Since(cp.at) < c.cfg.LayoutRefresh {
			return cp.layout, true, nil
		}
		if f := e.failed.Load(); f != nil && time.Since(f.at) < c.cfg.LayoutRefresh {
			return Layout{}, true, f.err
		}
		return Layout{}, false, nil
	}
	if l, ok, err := fresh(); ok {
		return l, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if l, ok, err := fresh(); ok { // another caller read it meanwhile
		return l, err
	}
	l, err := c.readLayout(ctx, topic)
	if err != nil {
		// The callers behind this one take the copy (or, without one, the
		// error) for a moment rather than each waiting on a read that
		// fails: an enqueue routes by count 1 then (enqueueLayout).
		retry := time.Now().Add(min(layoutRetry, c.cfg.LayoutRefresh) - c.cfg.LayoutRefresh)
		if cp := e.cur.Load(); cp != nil {
			e.cur.Store(&layoutCopy{layout: cp.layout, at: retry})
			return cp.layout, nil
		}
		e.failed.Store(&layoutFailure{err: err, at: retry})
		return Layout{}, err
	}
	e.failed.Store(nil)
	e.cur.Store(&layoutCopy{layout: l, at: time.Now()})
	return l, nil
}

// layoutRetry is how soon a failed read of a layout is tried again.
const layoutRetry = 200 * time.Millisecond

// layoutFailure is a failed first read of a layout, and when it is due to
// be tried again (as a copy's at).
type layoutFailure struct {
	err error
	at  time.Time
}

// cachedLayout is this process's copy of topic's layout, however old;
// ok is false without one.
func (c *Client) cachedLayout(topic string) (l Layout, ok bool) {
	v, found := c.layouts.Load(topic)
	if !found {
		return Layout{}, false
	}
	if cp := v.(*layoutEntry).cur.Load(); cp != nil {
		return cp.layout, true
	}
	return Layout{}, false
}

// readLayout reads topic's layout from Redis.
func (c *Client) readLayout(ctx context.Context, topic string) (Layout, error) {
	ms, err := c.rdb.ZRange(ctx, layoutKey(c.cfg.Namespace, topic), 0, -1).Result()
	if err != nil {
		return Layout{}, fmt.Errorf("queue: read the partitions of %s: %w", topic, err)
	}
	var counts []int
	for _, m := range ms {
		// Members delayq did not write are not trusted to build names.
		if k, err := strconv.Atoi(m); err == nil && k >= 1 && k <= MaxPartitions {
			counts = append(counts, k)
		}
	}
	return layoutOf(topic, counts), nil
}

// layoutOf is topic's layout of counts (any order, repeats allowed).
func layoutOf(topic string, counts []int) Layout {
	l := Layout{Counts: slices.Clone(counts)}
	slices.Sort(l.Counts)
	l.Counts = slices.Compact(l.Counts)
	l.names = make(map[int][]string, len(l.Counts))
	for _, k := range l.Counts {
		l.names[k] = partitionNames(topic, k)
	}
	return l
}

// SetPartitions raises topic's partition count to k (1 ≤ k ≤
// MaxPartitions): new enqueues go to the k partitions, and every worker
// claims from them as well as from the old ones, within
// Config.LayoutRefresh. The jobs already enqueued stay where they are
// and drain there. A k lower than the current count is refused (the
// jobs of the higher one would keep their partitions anyway, with
// enqueues going back and forth); the current one again changes nothing.
// It returns the layout after the call.
func (c *Client) SetPartitions(ctx context.Context, topic string, k int) (Layout, error) {
	if err := ValidateTopic(topic); err != nil {
		return Layout{}, err
	}
	if k < 1 || k > MaxPartitions {
		return Layout{}, &ValidationError{Field: "partitions", Kind: ErrInvalidPartition,
			Reason: fmt.Sprintf("%d: want 1-%d", k, MaxPartitions)}
	}
	l, err := c.readLayout(ctx, topic)
	if err != nil {
		return Layout{}, err
	}
	if cur := l.Current(); k < cur {
		return l, &ValidationError{Field: "partitions", Kind: ErrInvalidPartition,
			Reason: fmt.Sprintf("%d: the topic has %d; a partition count can only be raised", k, cur)}
	}
	if k == l.Current() {
		return l, nil
	}
	names := partitionNames(topic, k)
	for _, name := range names {
		if len(name) > maxNameLen {
			return l, &ValidationError{Field: "partitions", Kind: ErrInvalidPartition,
				Reason: fmt.Sprintf("%d: partition name %s is over %d characters (the ledger's topic column); use a shorter topic name or fewer partitions", k, name, maxNameLen)}
		}
	}
	// SQL first, when there is a ledger: what Redis lists, SQL has, and a
	// Redis data loss gives it back (ApplyLayouts, from the relay and the
	// recoverer).
	if ls, ok := c.cfg.Store.(LayoutStore); ok {
		// SQL's count too: Redis may have lost a higher one that the
		// relay has not written back yet.
		stored, err := ls.Layouts(ctx)
		if err != nil {
			return l, fmt.Errorf("queue: set the partitions of %s: %w: %w", topic, ErrLedger, err)
		}
		if ks := stored[topic]; len(ks) > 0 && ks[len(ks)-1] > k {
			return l, &ValidationError{Field: "partitions", Kind: ErrInvalidPartition,
				Reason: fmt.Sprintf("%d: the topic has %d; a partition count can only be raised", k, ks[len(ks)-1])}
		}
		if _, err := ls.AddLayouts(ctx, topic, append(slices.Clone(l.Counts), k)); err != nil {
			return l, fmt.Errorf("queue: set the partitions of %s: %w: %w", topic, ErrLedger, err)
		}
	}
	// A paused topic's new partitions are paused before any job can go
	// there: the flag is copied from the topic's own key first, and again
	// once they are listed (a pause made in between wrote the old ones).
	if err := c.copyPause(ctx, topic, names); err != nil {
		return l, err
	}
	if err := c.listLayout(ctx, topic, k); err != nil {
		return Layout{}, err
	}
	if err := c.copyPause(ctx, topic, names); err != nil {
		return l, err
	}
	l, err = c.readLayout(ctx, topic)
	if err != nil {
		return Layout{}, err
	}
	if v, ok := c.layouts.Load(topic); ok { // this process at once
		v.(*layoutEntry).cur.Store(&layoutCopy{layout: l, at: time.Now()})
	}
	return l, nil
}

// copyPause copies topic's pause flag, if it has one, to the partitions
// names.
func (c *Client) copyPause(ctx context.Context, topic string, names []string) error {
	v, err := c.rdb.Get(ctx, c.pausedKey(topic)).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("queue: set the partitions of %s: %w", topic, err)
	}
	// One round trip, not one per partition (each SET alone: the keys
	// are in different slots).
	pipe := c.rdb.Pipeline()
	c.pauseEach(ctx, pipe, names, v)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("queue: set the partitions of %s: pause the new ones: %w", topic, err)
	}
	return nil
}

// pauseEach adds to pipe the writes of pause value v (the topic's own key's)
// to the partitions names.
func (c *Client) pauseEach(ctx context.Context, pipe redis.Pipeliner, names []string, v string) {
	for _, name := range names {
		pipe.Set(ctx, c.pausedKey(name), v, 0)
	}
}

// ApplyLayouts lists in Redis the partition counts of layouts (a topic's
// stored layouts, queue.LayoutStore) that its layout key lacks, and returns
// the topics it changed. It never removes a count. This process reads a
// changed topic's layout again at its next use; others within
// Config.LayoutRefresh.
func (c *Client) ApplyLayouts(ctx context.Context, layouts map[string][]int) ([]string, error) {
	topics := slices.Sorted(maps.Keys(layouts))
	topics = slices.DeleteFunc(topics, func(t string) bool { return ValidateTopic(t) != nil })
	if len(topics) == 0 {
		return nil, nil
	}
	// What Redis lists, and each topic's pause, in one round trip.
	pipe := c.rdb.Pipeline()
	listed := make([]*redis.StringSliceCmd, len(topics))
	paused := make([]*redis.StringCmd, len(topics))
	for i, topic := range topics {
		listed[i] = pipe.ZRange(ctx, layoutKey(c.cfg.Namespace, topic), 0, -1)
		paused[i] = pipe.Get(ctx, c.pausedKey(topic))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("queue: apply partition layouts: %w", err)
	}
	missing := make([][]int, len(topics))
	var changed []string
	for i, topic := range topics {
		if err := listed[i].Err(); err != nil {
			return nil, fmt.Errorf("queue: apply partition layouts: %w", err)
		}
		have := listed[i].Val()
		for _, k := range append([]int{1}, layouts[topic]...) {
			if k >= 1 && k <= MaxPartitions && !slices.Contains(have, strconv.Itoa(k)) && !slices.Contains(missing[i], k) {
				missing[i] = append(missing[i], k)
			}
		}
		if len(missing[i]) > 0 {
			changed = append(changed, topic)
		}
	}
	if len(changed) == 0 {
		return nil, nil
	}
	// A paused topic's partitions of the counts Redis lacks are paused
	// before those are listed, as SetPartitions does (the count may be one
	// a raise is still writing, or whose Redis step failed): no enqueue or
	// claim can use them first. Then the counts, in one round trip each.
	pipe = c.rdb.Pipeline()
	for i, topic := range topics {
		v, err := paused[i].Result()
		if err != nil || len(missing[i]) == 0 {
			continue // not paused (redis.Nil), or nothing to list
		}
		for _, k := range missing[i] {
			if k > 1 {
				c.pauseEach(ctx, pipe, partitionNames(topic, k), v)
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("queue: apply partition layouts: pause the partitions of paused topics: %w", err)
	}
	pipe = c.rdb.Pipeline()
	for i, topic := range topics {
		if len(missing[i]) == 0 {
			continue
		}
		zs := []redis.Z{{Score: 1, Member: 1}}
		for _, k := range missing[i] {
			zs = append(zs, redis.Z{Score: float64(k), Member: k})
		}
		pipe.ZAdd(ctx, layoutKey(c.cfg.Namespace, topic), zs...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("queue: apply partition layouts: %w", err)
	}
	for _, topic := range changed {
		c.layouts.Delete(topic)
	}
	return changed, nil
}

// listLayout adds count k (and 1, always listed) to topic's layout.
func (c *Client) listLayout(ctx context.Context, topic string, k int) error {
	err := c.rdb.ZAdd(ctx, layoutKey(c.cfg.Namespace, topic),
		redis.Z{Score: 1, Member: 1}, redis.Z{Score: float64(k), Member: k}).Err()
	if err != nil {
		return fmt.Errorf("queue: set the partitions of %s: %w", topic, err)
	}
	return nil
}

// Partitions returns the names of every partition of every layout of
// topic (Layout.Names): what an operation that looks through the whole
// topic looks through.
func (c *Client) Partitions(ctx context.Context, topic string) ([]string, error) {
	l, err := c.Layout(ctx, topic)
	if err != nil {
		return nil, err
	}
	return l.Names(topic), nil
}

// AllPartitions returns the names of every partition of every known topic
// (Topics): what recovery scans.
func (c *Client) AllPartitions(ctx context.Context) ([]string, error) {
	topics, err := c.Topics(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range topics {
		names, err := c.Partitions(ctx, t)
		if err != nil {
			return nil, err
		}
		out = append(out, names...)
	}
	return out, nil
}

// route returns the name of the partition of the current layout that a
// job with this key and id goes to.
func (c *Client) route(l Layout, topic, key, id string) string {
	k := l.Current()
	if k == 1 {
		return topic
	}
	return l.partitions(topic, k)[PartitionOf(key, id, k)]
}

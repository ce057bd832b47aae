package dataplane

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/delayq/delayq/queue"
)

// The workers' registry (docs/design.md §4.19): one HASH per namespace,
// "<ns>:workers", field the worker's ID, value its queue.WorkerInfo as
// JSON. One key, so it lives on one node of a cluster; a process writes
// its entry every RegistryEvery (HSET, one command), idle or not, and
// deletes it when it stops; readers mark entries gone once their
// heartbeat is 1.5 intervals old and delete those older than
// queue.RegistryForget.

type (
	WorkerInfo  = queue.WorkerInfo
	WorkerTopic = queue.WorkerTopic
)

func (c *Client) registryKey() string { return c.cfg.Namespace + ":workers" }

// register writes the worker's registry entry every RegistryEvery until
// bg ends, then deletes it (with a context of its own: bg is done).
func (w *Worker) register(bg, detached context.Context) {
	host, _ := os.Hostname()
	info := WorkerInfo{ID: w.cfg.ID, Host: host, PID: os.Getpid(), Version: w.cfg.Version,
		EveryMs: w.cfg.RegistryEvery.Milliseconds()}
	for name, tr := range w.topics {
		t := WorkerTopic{Topic: name, Concurrency: tr.cfg.Concurrency}
		if tr.pool != nil {
			t.Pool, t.Weight = tr.pool.name, tr.member.weight
		}
		info.Topics = append(info.Topics, t)
	}
	slices.SortFunc(info.Topics, func(a, b WorkerTopic) int { return strings.Compare(a.Topic, b.Topic) })
	for _, p := range w.pools {
		info.Pools = append(info.Pools, queue.WorkerPool{Name: p.name, Concurrency: p.size})
	}
	po, _ := w.cfg.Observer.(queue.PoolObserver)
	tick := time.NewTicker(w.cfg.RegistryEvery)
	defer tick.Stop()
	for {
		for i := range info.Topics {
			info.Topics[i].InFlight = w.topics[info.Topics[i].Topic].busy.Load()
		}
		for i, p := range w.pools {
			info.Pools[i].InFlight = p.inFlight()
			if po != nil {
				po.PoolUse(p.name, info.Pools[i].InFlight, p.size)
			}
		}
		// Times on Redis's clock, which the readers compare them with.
		ctx, cancel := withOpTimeout(detached)
		info.LedgerOK = w.ledgerAnswers(ctx)
		now, err := w.c.Time(ctx)
		if err == nil {
			info.Heartbeat = now.UnixMilli()
			if info.StartedAt == 0 {
				info.StartedAt = info.Heartbeat
			}
			b, _ := json.Marshal(info)
			err = w.c.rdb.HSet(ctx, w.c.registryKey(), info.ID, b).Err()
		}
		if err != nil {
			w.log.WithError(err).Debug("worker registry: entry not written")
		}
		cancel()
		select {
		case <-bg.Done():
			ctx, cancel := withOpTimeout(detached)
			defer cancel()
			if err := w.c.rdb.HDel(ctx, w.c.registryKey(), info.ID).Err(); err != nil {
				w.log.WithError(err).Warn("worker registry: entry not removed: it shows as gone, then goes")
			}
			return
		case <-tick.C:
		}
	}
}

// Workers lists the worker processes of the registry, by ID, each live or
// gone (queue.WorkerInfo.State) by Redis's clock; it deletes entries gone
// for longer than queue.RegistryForget.
func (c *Client) Workers(ctx context.Context) ([]WorkerInfo, error) {
	now, err := c.Time(ctx)
	if err != nil {
		return nil, err
	}
	all, err := c.rdb.HGetAll(ctx, c.registryKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("queue: workers: %w", err)
	}
	nowMs := now.UnixMilli()
	out := make([]WorkerInfo, 0, len(all))
	var forget []string
	for id, v := range all {
		var w WorkerInfo
		if err := json.Unmarshal([]byte(v), &w); err != nil || w.ID != id {
			forget = append(forget, id) // not an entry a worker wrote
			continue
		}
		if nowMs-w.Heartbeat > queue.RegistryForget.Milliseconds() {
			forget = append(forget, id)
			continue
		}
		w.State = queue.WorkerGone
		if w.Live(nowMs) {
			w.State = queue.WorkerLive
		}
		out = append(out, w)
	}
	if len(forget) > 0 {
		if err := c.rdb.HDel(ctx, c.registryKey(), forget...).Err(); err != nil {
			return nil, fmt.Errorf("queue: workers: forget %d: %w", len(forget), err)
		}
	}
	slices.SortFunc(out, func(a, b WorkerInfo) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// ledgerAnswers pings the ledger (when it can be pinged; otherwise it
// answers unless the heartbeat's extensions fail), for the registry entry.
func (w *Worker) ledgerAnswers(ctx context.Context) bool {
	if p, ok := w.led.(Pinger); ok {
		return p.Ping(ctx) == nil
	}
	return !w.hold.failing()
}

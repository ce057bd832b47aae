package dataplane_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// A running worker is in the registry, live, with its topics and their
// handlers, idle or not; a stopped one is gone from it at once. An entry
// whose heartbeat is 1.5 intervals old shows as gone; one older than
// RegistryForget, or not a worker's, is deleted by the read. The topics'
// consumers count the live ones.
func TestWorkersRegistry(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	w := newWorker(t, e, dataplane.WorkerConfig{ID: "host-a:1", Version: "v9", RegistryEvery: 50 * time.Millisecond})
	noop := dataplane.HandlerFunc(func(context.Context, *dataplane.Job) error { return nil })
	for topic, n := range map[string]int{"mail": 3, "sms": 5} {
		if err := w.Handle(topic, noop, dataplane.TopicConfig{Concurrency: n}); err != nil {
			t.Fatal(err)
		}
	}
	stop := startWorker(t, w)
	var list []dataplane.WorkerInfo
	testenv.WaitFor(ctx, t, "the worker in the registry", func() bool {
		var err error
		list, err = e.c.Workers(ctx)
		return err == nil && len(list) == 1
	})
	got := list[0]
	if got.ID != "host-a:1" || got.State != queue.WorkerLive || got.Version != "v9" || got.PID == 0 || got.Host == "" ||
		got.EveryMs != 50 || len(got.Topics) != 2 || got.Topics[0] != (queue.WorkerTopic{Topic: "mail", Concurrency: 3}) ||
		got.Topics[1] != (queue.WorkerTopic{Topic: "sms", Concurrency: 5}) || got.StartedAt == 0 || got.Heartbeat < got.StartedAt {
		t.Fatalf("entry %+v", got)
	}
	// Idle, it still heartbeats.
	first := got.Heartbeat
	testenv.WaitFor(ctx, t, "a later heartbeat", func() bool {
		list, err := e.c.Workers(ctx)
		return err == nil && len(list) == 1 && list[0].Heartbeat > first
	})

	// Entries of processes that stopped without a word, and a foreign one.
	now, err := e.c.Time(ctx)
	if err != nil {
		t.Fatal(err)
	}
	put := func(id string, heartbeat time.Time) {
		b, _ := json.Marshal(queue.WorkerInfo{ID: id, EveryMs: 1000, Heartbeat: heartbeat.UnixMilli(),
			Topics: []queue.WorkerTopic{{Topic: "mail", Concurrency: 1}}})
		if err := e.rdb.HSet(ctx, e.ns+":workers", id, b).Err(); err != nil {
			t.Fatal(err)
		}
	}
	put("killed:2", now.Add(-2*time.Second))
	put("long-gone:3", now.Add(-queue.RegistryForget-time.Minute))
	if err := e.rdb.HSet(ctx, e.ns+":workers", "junk", "not json").Err(); err != nil {
		t.Fatal(err)
	}
	// host-a:1 beats every 50 ms: a loaded host can let one listing find
	// its beat 1.5 intervals old (gone), so wait for one that finds it live.
	testenv.WaitFor(ctx, t, "host-a:1 live and killed:2 gone", func() bool {
		list, err = e.c.Workers(ctx)
		if err != nil || len(list) != 2 || list[1].ID != "killed:2" || list[1].State != queue.WorkerGone {
			t.Fatalf("workers %+v, %v; want host-a:1 and killed:2 gone (long-gone:3 and junk dropped)", list, err)
		}
		return list[0].ID == "host-a:1" && list[0].State == queue.WorkerLive
	})
	if n, _ := e.rdb.HLen(ctx, e.ns+":workers").Result(); n != 2 {
		t.Errorf("registry holds %d entries after the read, want the 2 shown", n)
	}
	if c := queue.Consumers(list); c["mail"] != 1 || c["sms"] != 1 {
		t.Errorf("consumers %v: want the live worker only", c)
	}

	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := e.rdb.HExists(ctx, e.ns+":workers", "host-a:1").Result(); ok {
		t.Error("a stopped worker left its entry")
	}
}

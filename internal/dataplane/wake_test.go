package dataplane_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
)

// With the idle safety net set to an hour, only a wake message or the due
// time the last claim reported can start a claim: jobs enqueued to an idle
// worker still run, so the fetcher is not polling.
func TestWorkerWakesOnEnqueueNotPolling(t *testing.T) {
	e := newWEnv(t)
	var ran testenv.Counter
	w := newWorker(t, e, dataplane.WorkerConfig{MaxIdle: time.Hour})
	if err := w.Handle("t", dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		ran.Add(1)
		return nil
	}), dataplane.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	waitSubscribed(t, e.rdb, e.c.WakeChannel("t"))
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "now"})
	ran.WaitAtLeast(testenv.Context(t), t, 1, "the job enqueued to an idle worker")
	if n := ran.Load(); n != 1 {
		t.Fatalf("%d handler runs, want 1", n)
	}
	// Due in 200 ms: the wake makes the fetcher claim (too early), learn the
	// due time, and sleep exactly until then.
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "soon", Delay: 200 * time.Millisecond})
	ran.WaitAtLeast(testenv.Context(t), t, 2, "the delayed job")
	if n := ran.Load(); n != 2 {
		t.Fatalf("%d handler runs, want 2", n)
	}
}

// waitSubscribed waits until channel has a subscriber.
func waitSubscribed(t *testing.T, rdb redis.UniversalClient, channel string) {
	t.Helper()
	testenv.WaitFor(testenv.Context(t), t, "the worker's subscription", func() bool {
		n, err := rdb.PubSubNumSub(testenv.Context(t), channel).Result()
		return err == nil && n[channel] > 0
	})
}

// Redis restarted under a running worker: it reconnects, re-subscribes and
// goes on by itself; a job enqueued after the restart runs even though the
// idle safety net is an hour.
func TestWorkerReconnectsAfterRedisRestart(t *testing.T) {
	srv := testenv.StartRedis(t, testenv.RedisOptions{AOF: true, Fsync: "always"})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	c, err := dataplane.New(rdb, dataplane.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e := newWEnv(t)
	var mu sync.Mutex
	ran := map[string]bool{}
	var changed testenv.Event
	hasRun := func(id string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return ran[id]
		}
	}
	w, err := dataplane.NewWorker(c, ledgerops.Of(e.led), dataplane.WorkerConfig{Logger: testenv.QuietLogger(), MaxIdle: time.Hour,
		ErrorBackoffMin: 10 * time.Millisecond, ErrorBackoffMax: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("t", dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		mu.Lock()
		ran[j.ID] = true
		mu.Unlock()
		changed.Notify()
		return nil
	}), dataplane.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	waitSubscribed(t, rdb, c.WakeChannel("t"))
	if _, err := c.Enqueue(testenv.Context(t), "t", dataplane.NewJob{ID: "before"}); err != nil {
		t.Fatal(err)
	}
	changed.Wait(testenv.Context(t), t, "the first job", hasRun("before"))

	srv.Kill(t)
	srv.Restart(t)
	waitSubscribed(t, rdb, c.WakeChannel("t"))
	if _, err := c.Enqueue(testenv.Context(t), "t", dataplane.NewJob{ID: "after"}); err != nil {
		t.Fatal(err)
	}
	changed.Wait(testenv.Context(t), t, "the job enqueued after the restart", hasRun("after"))
}

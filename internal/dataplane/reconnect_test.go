package dataplane_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
)

// OnRedisReconnect is not called for the first subscription, and once for
// each time Redis came back, however many topics the worker subscribes to.
func TestWorkerCallsReconnectHook(t *testing.T) {
	srv := testenv.StartRedis(t, testenv.RedisOptions{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	c, err := dataplane.New(rdb, dataplane.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e := newWEnv(t)
	var calls testenv.Counter
	w, err := dataplane.NewWorker(c, ledgerops.Of(e.led), dataplane.WorkerConfig{Logger: testenv.QuietLogger(),
		ErrorBackoffMin: 10 * time.Millisecond, ErrorBackoffMax: 100 * time.Millisecond,
		OnRedisReconnect: func(ctx context.Context) { calls.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	h := dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error { return nil })
	for _, topic := range []string{"a", "b", "c"} {
		if err := w.Handle(topic, h, dataplane.TopicConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	startWorker(t, w)
	for _, topic := range []string{"a", "b", "c"} {
		waitSubscribed(t, rdb, c.WakeChannel(topic))
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("hook called %d times before any reconnect", n)
	}
	for round := int64(1); round <= 2; round++ {
		srv.Kill(t)
		srv.Restart(t)
		calls.WaitAtLeast(testenv.Context(t), t, round, "the reconnect hook")
		for _, topic := range []string{"a", "b", "c"} {
			waitSubscribed(t, rdb, c.WakeChannel(topic))
		}
		if n := calls.Load(); n != round {
			t.Fatalf("after %d reconnects the hook ran %d times", round, n)
		}
	}
}

package dataplane_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
)

// Every script touches only keys of one {topic} hash tag, so the whole
// lifecycle runs on a Redis Cluster with no CROSSSLOT error, for topics that
// land on different nodes.
func TestClusterLifecycleAcrossTopics(t *testing.T) {
	addrs := testenv.StartCluster(t, 3)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { rdb.Close() })
	c, err := dataplane.New(rdb, dataplane.Config{Namespace: "dqc"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	topics := []string{"orders", "payments", "emails", "refunds", "t5", "t6"}
	slots := map[int64]bool{}
	for _, topic := range topics {
		slot, err := rdb.ClusterKeySlot(ctx, "dqc:{"+topic+"}:due").Result()
		if err != nil {
			t.Fatal(err)
		}
		slots[slot] = true
	}
	if len(slots) < 3 {
		t.Fatalf("topics fall in %d slots; pick topics that spread", len(slots))
	}

	var all []dataplane.Ref
	for _, topic := range topics {
		jobs := make([]dataplane.NewJob, 30)
		for i := range jobs {
			// Every priority: the scripts' level keys share the topic's slot.
			jobs[i] = dataplane.NewJob{ID: fmt.Sprintf("%s:%d", topic, i), Payload: []byte(topic), MaxAttempts: 2, Priority: i % 4}
		}
		if _, err := c.EnqueueBatch(ctx, topic, jobs); err != nil {
			t.Fatalf("enqueue batch to %s: %v", topic, err)
		}
		if _, err := c.Enqueue(ctx, topic, dataplane.NewJob{ID: "single", Delay: time.Hour}); err != nil {
			t.Fatalf("enqueue to %s: %v", topic, err)
		}
		cl, err := c.Claim(ctx, topic, 30, time.Minute)
		if err != nil || len(cl.Jobs) != 30 {
			t.Fatalf("claim from %s: %d jobs, %v", topic, len(cl.Jobs), err)
		}
		// 10 acked (below, across all topics at once), 10 retried, 10 buried.
		for _, j := range cl.Jobs[:10] {
			all = append(all, j.Ref())
		}
		retries := make([]dataplane.RetryRequest, 0, 10)
		for _, j := range cl.Jobs[10:20] {
			retries = append(retries, dataplane.RetryRequest{Ref: j.Ref(), Error: "again"})
		}
		if _, err := c.Retry(ctx, retries); err != nil {
			t.Fatalf("retry on %s: %v", topic, err)
		}
		buries := make([]dataplane.DeadJob, 0, 10)
		for _, j := range cl.Jobs[20:] {
			buries = append(buries, dataplane.DeadJob{Job: j, Error: "dead"})
		}
		if n, _, err := c.Bury(ctx, buries); err != nil || n != 10 {
			t.Fatalf("bury on %s: %d, %v", topic, n, err)
		}
		if _, _, err := c.Extend(ctx, refs(cl.Jobs[:10]), 2*time.Minute); err != nil {
			t.Fatalf("extend on %s: %v", topic, err)
		}
	}
	if n, err := c.Ack(ctx, all); err != nil || n != len(all) {
		t.Fatalf("ack across topics: %d of %d, %v", n, len(all), err)
	}
	for _, topic := range topics {
		st, err := c.Stats(ctx, topic)
		if err != nil || st.Due != 11 || st.InFlight != 0 || st.Dead != 10 || st.ByPriority[0]+st.ByPriority[1]+st.ByPriority[2]+st.ByPriority[3] != 11 {
			t.Fatalf("stats of %s: %+v, %v", topic, st, err)
		}
		if n, err := c.RequeueAllDead(ctx, topic); err != nil || n != 10 {
			t.Fatalf("requeue dead of %s: %d, %v", topic, n, err)
		}
		if _, err := c.Cancel(ctx, ledgerops.Of(sqliteLedger(t)), topic, "single"); err != nil {
			t.Fatalf("cancel on %s: %v", topic, err)
		}
		if info, err := c.Get(ctx, topic, topic+":0"); err != nil || info.State != dataplane.StateUnknown {
			t.Fatalf("get on %s: %+v, %v", topic, info, err)
		}
	}
	got, err := c.Topics(ctx)
	if err != nil || len(got) != len(topics) {
		t.Fatalf("topics = %v, %v", got, err)
	}
}

package dataplane_test

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
)

// Restore pipelines its calls over topics that live on different Cluster
// nodes, and the epoch helpers pipeline one key per topic: no CROSSSLOT.
func TestClusterRestoreAndEpochs(t *testing.T) {
	addrs := testenv.StartCluster(t, 3)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { rdb.Close() })
	c, err := dataplane.New(rdb, dataplane.Config{Namespace: "dqc"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	topics := []string{"orders", "payments", "emails", "refunds", "t5", "t6"}
	var rows []dataplane.RestoreRow
	for _, topic := range topics {
		for i := 0; i < 40; i++ {
			rows = append(rows, dataplane.RestoreRow{Topic: topic, ID: fmt.Sprintf("%s:%d", topic, i), Attempt: 1, MaxAttempts: 3, RunAt: 1})
		}
	}
	out, err := c.Restore(ctx, rows, dataplane.RestoreOptions{Chunk: 7})
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o != dataplane.RestoreCreated {
			t.Fatalf("row %d: %s", i, o)
		}
	}
	for _, topic := range topics {
		st, err := c.Stats(ctx, topic)
		if err != nil || st.Due != 40 {
			t.Fatalf("%s: %+v, %v", topic, st, err)
		}
	}
	written, err := c.EnsureEpoch(ctx, topics, "x")
	if err != nil || len(written) != len(topics) {
		t.Fatalf("ensure: %v, %v", written, err)
	}
	if missing, err := c.EpochMissing(ctx, topics); err != nil || len(missing) != 0 {
		t.Fatalf("missing: %v, %v", missing, err)
	}
}

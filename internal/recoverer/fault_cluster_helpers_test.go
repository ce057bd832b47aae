package recoverer_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/internal/testenv"
)

// startFaultCluster starts the Cluster fault tests' Redis Cluster, 3
// masters with a replica each (cluster-node-timeout 2 s), and a client to
// it that reloads its slot map every 2 s, as the program does
// (redis.cluster_reload_every).
func startFaultCluster(t *testing.T) (*testenv.Cluster, *redis.ClusterClient) {
	t.Helper()
	cl := testenv.StartClusterReplicas(t, 3, 1, testenv.RedisOptions{ClusterNodeTimeout: 2 * time.Second})
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ClusterStateReloadInterval: 2 * time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	return cl, rdb
}

// failover is when a master's death went (Unix ms, this host's clock,
// which the nodes' TIME shares).
type failover struct {
	slot                         int
	cutAt, killedAt, servedAgain int64
}

// failOver kills the master of topic's slot with writes its replica never
// got, as a lagging link would lose them: it cuts the replica off, calls
// hold (the test notes where it is and lets the master acknowledge more
// work), SIGKILLs the master and waits until the cluster has promoted the
// replica and every node says the cluster is ok.
func failOver(t *testing.T, cl *testenv.Cluster, rdb *redis.ClusterClient, topic string, hold func()) failover {
	t.Helper()
	ctx := testenv.Context(t)
	slot, err := rdb.ClusterKeySlot(ctx, "{"+topic+"}").Result()
	if err != nil {
		t.Fatal(err)
	}
	f := failover{slot: int(slot)}
	master := cl.MasterOf(t, f.slot)
	f.cutAt = time.Now().UnixMilli() // before the cut: what is acknowledged from here on may be lost
	cl.CutReplication(t, cl.ReplicaOf(t, master))
	hold()
	f.killedAt = time.Now().UnixMilli()
	master.Kill(t)
	testenv.WaitFor(ctx, t, "the replica's promotion", func() bool { return cl.MasterOf(t, f.slot) != master }, cl.Describe)
	cl.WaitOK(t)
	f.servedAgain = time.Now().UnixMilli()
	return f
}

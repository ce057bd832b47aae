package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/app/bench"
	"github.com/delayq/delayq/internal/testenv"
)

// On a Redis Cluster the costs are counted on every master, and each
// master's part is reported (the per-node figures of docs/benchmarks.md):
// a topic of one partition is one hash tag, so one master does most of the
// work; with 6 partitions (--partitions) each master does a third, ±10
// points.
func TestClusterPerNodeCosts(t *testing.T) {
	addrs := testenv.StartCluster(t, 3)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	for _, run := range []struct {
		durable    bool
		partitions int
	}{{false, 1}, {true, 1}, {true, 6}} {
		durable := run.durable
		sc, _ := bench.Lookup("drain")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		r, err := sc.Run(ctx, bench.Options{Env: bench.Env{Redis: rdb, DB: testenv.MySQL(t), Partitions: run.partitions}, Jobs: 2000, Concurrency: 20,
			ClaimBatch: 50, Durable: durable, Stall: 10 * time.Second})
		cancel()
		if err != nil || !r.OK() || r.Handled != 2000 {
			t.Fatalf("durable %v: %v, %+v", durable, err, r)
		}
		c := r.Costs
		if c == nil || len(c.RedisNodes) != 3 || c.RedisCommands == nil || c.RedisCPUUs == nil {
			t.Fatalf("durable %v: costs %+v, want the three masters' figures and their sums", durable, c)
		}
		var sum int64
		var share, top float64
		for _, n := range c.RedisNodes {
			sum += n.Commands
			share += n.Share
			top = max(top, n.Share)
			if n.CommandsPerJob == nil || n.CPUUsPerJob == nil || n.CPUUs < 0 {
				t.Errorf("durable %v: master %+v: want per-job figures", durable, n)
			}
		}
		if sum == 0 || sum > *c.RedisCommands || share < 0.999 || share > 1.001 {
			t.Errorf("durable %v: masters' commands %d (shares %.3f) against %d in all", durable, sum, share, *c.RedisCommands)
		}
		if run.partitions == 1 && top < 0.5 {
			// One topic, one hash tag: its master does most of the work.
			t.Errorf("durable %v: the busiest master did %.0f%% of the commands; one topic's keys are on one master", durable, 100*top)
		}
		for _, n := range c.RedisNodes {
			if run.partitions > 1 && (n.Share < 0.2333 || n.Share > 0.4333) {
				t.Errorf("%d partitions: master %s did %.1f%% of the commands, want 33%% ± 10", run.partitions, n.Addr, 100*n.Share)
			}
			t.Logf("durable %v, %d partitions: master %s: %d commands (%.1f%%), %.2f/job, %.1f CPU µs/job",
				durable, run.partitions, n.Addr, n.Commands, 100*n.Share, *n.CommandsPerJob, *n.CPUUsPerJob)
		}
	}
}

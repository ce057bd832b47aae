package dataplane_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
)

// For 5 random topic names, each with 6 partitions on a Redis Cluster of 3
// masters: enqueuing and draining 3,000 jobs puts 33% ± 10% of the
// topic's commands on each master, by the masters' own counters
// (total_commands_processed).
func TestPartitionedTopicSpreadsOverClusterMasters(t *testing.T) {
	addrs := testenv.StartCluster(t, 3)
	ctx := testenv.Context(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	masters := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		masters[i] = redis.NewClient(&redis.Options{Addr: a})
		t.Cleanup(func() { _ = masters[i].Close() })
	}
	led := ledgerops.Of(sqliteLedger(t))
	const jobs, k = 3000, 6
	for n, topic := range spreadTopics(5) {
		c, err := dataplane.New(rdb, dataplane.Config{Namespace: "spread" + strconv.Itoa(n)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.SetPartitions(ctx, topic, k); err != nil {
			t.Fatal(err)
		}
		before := commandsOf(ctx, t, masters)
		obs := &settled{}
		w, err := dataplane.NewWorker(c, led, dataplane.WorkerConfig{Observer: obs, Logger: testenv.QuietLogger(),
			Topic: dataplane.TopicConfig{Concurrency: 50}})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Handle(topic, dataplane.HandlerFunc(func(context.Context, *dataplane.Job) error { return nil }), dataplane.TopicConfig{}); err != nil {
			t.Fatal(err)
		}
		stop := startWorker(t, w)
		for start := 0; start < jobs; start += 100 {
			batch := make([]dataplane.NewJob, 100)
			for i := range batch {
				batch[i] = dataplane.NewJob{ID: fmt.Sprintf("order:%d", start+i)}
			}
			if _, err := c.EnqueueBatch(ctx, topic, batch); err != nil {
				t.Fatal(err)
			}
		}
		obs.completed.WaitAtLeast(ctx, t, jobs, "every job completed")
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		after := commandsOf(ctx, t, masters)
		total := int64(0)
		for i := range masters {
			total += after[i] - before[i]
		}
		shares := make([]string, len(masters))
		for i := range masters {
			share := float64(after[i]-before[i]) / float64(total)
			shares[i] = fmt.Sprintf("%.1f%%", 100*share)
			if share < 0.2333 || share > 0.4333 {
				t.Errorf("%q: master %s served %.1f%% of %d commands, want 33%% ± 10%%", topic, addrs[i], 100*share, total)
			}
		}
		t.Logf("%q: %d commands, per master %s", topic, total, strings.Join(shares, " "))
	}
}

// spreadTopics returns n topic names of 1-40 characters of the topic
// alphabet (short enough for 6 partitions' names), the same on every run.
func spreadTopics(n int) []string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
	r := rand.New(rand.NewPCG(25, 7))
	out := make([]string, n)
	for i := range out {
		b := make([]byte, 1+r.IntN(40))
		for j := range b {
			b[j] = alphabet[r.IntN(len(alphabet))]
		}
		out[i] = string(b)
	}
	return out
}

// commandsOf reads each server's total_commands_processed.
func commandsOf(ctx context.Context, t *testing.T, servers []*redis.Client) []int64 {
	t.Helper()
	out := make([]int64, len(servers))
	for i, s := range servers {
		info, err := s.Info(ctx, "stats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "total_commands_processed:"); ok {
				out[i], _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return out
}

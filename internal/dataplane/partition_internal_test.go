package dataplane

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/internal/testenv"
)

// randomTopics returns n topic names of 1-64 characters of the topic
// alphabet, the same on every run.
func randomTopics(n int) []string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
	r := rand.New(rand.NewPCG(25, 6))
	out := make([]string, n)
	for i := range out {
		b := make([]byte, 1+r.IntN(64))
		for j := range b {
			b[j] = alphabet[r.IntN(len(alphabet))]
		}
		out[i] = string(b)
	}
	return out
}

// Partition p of k sits in the p-th of k equal arcs of the slot space,
// whatever the topic's name; one partition is the topic itself (today's
// keys); no two tags of a topic's layouts are the same.
func TestPartitionTagsCoverTheSlotSpaceInArcs(t *testing.T) {
	for _, topic := range append(randomTopics(10), "order_close", "a", "emails") {
		if got := partitionTag(topic, 1, 0); got != topic {
			t.Fatalf("one partition of %q: tag %q, want the topic", topic, got)
		}
		seen := map[string]bool{}
		for _, k := range []int{2, 3, 6, 7, 8, 64, MaxPartitions} {
			for p := range k {
				tag := partitionTag(topic, k, p)
				lo, hi := p*clusterSlots/k, (p+1)*clusterSlots/k
				if s := tagSlot(tag); s < lo || s >= hi {
					t.Fatalf("%q partition %d of %d: tag %q in slot %d, want [%d, %d)", topic, p, k, tag, s, lo, hi)
				}
				if seen[tag] {
					t.Fatalf("%q: tag %q twice", topic, tag)
				}
				seen[tag] = true
				if again := partitionTag(topic, k, p); again != tag {
					t.Fatalf("%q partition %d of %d: %q, then %q", topic, p, k, tag, again)
				}
			}
		}
	}
}

// On a Redis Cluster of 3 masters (slots spread by redis-cli --cluster
// create): tagSlot agrees with the servers' CLUSTER KEYSLOT, and each of 5
// random topics with 6 partitions has 2 on each master (a third of the
// topic's keys, by the servers' own slot map).
func TestPartitionsSpreadOverClusterMasters(t *testing.T) {
	addrs := testenv.StartCluster(t, 3)
	ctx := testenv.Context(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	ranges, err := rdb.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	master := func(slot int) string {
		for _, r := range ranges {
			if slot >= int(r.Start) && slot <= int(r.End) {
				return r.Nodes[0].Addr
			}
		}
		t.Fatalf("slot %d: no master", slot)
		return ""
	}
	const k = 6
	for _, topic := range randomTopics(5) {
		per := map[string]int{}
		for p := range k {
			tag := partitionTag(topic, k, p)
			key := "dq:{" + tag + "}:due"
			want, err := rdb.ClusterKeySlot(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := tagSlot(tag); int64(got) != want {
				t.Fatalf("%s: tagSlot %d, CLUSTER KEYSLOT %d", key, got, want)
			}
			per[master(int(want))]++
		}
		if len(per) != 3 {
			t.Fatalf("%q: partitions on %d masters (%v), want all 3", topic, len(per), per)
		}
		for addr, n := range per {
			if n != k/3 {
				t.Errorf("%q: master %s holds %d of %d partitions, want %d (%v)", topic, addr, n, k, k/3, per)
			}
		}
		t.Logf("%q: %s", topic, fmt.Sprint(per))
	}
}

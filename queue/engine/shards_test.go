package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/queue/engine"
	"github.com/delayq/delayq/queue/periodic"
	"github.com/delayq/delayq/recovery"
)

// An engine over three ledger shards (three MariaDB databases) with a
// durable topic of 6 partitions: every partition's rows are on its shard
// (2 partitions, a third of the rows, on each), each shard's relay has its
// own mark and lock, and after Redis lost every key each shard's relay
// reloads its own shard's waiting jobs: all of them run, each once.
func TestEngineOverLedgerShards(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	ctx := testenv.Context(t)
	var stores []*ledger.Ledger
	for range 3 {
		stores = append(stores, migratedLedger(t, testenv.MySQL(t)))
	}
	const topic, k = "order_close", 6
	eng, err := engine.New(rdb, stores[0], engine.Config{
		Queue: queue.Config{Namespace: ns, Horizon: 2 * time.Second,
			TopicDurability: map[string]queue.Durability{topic: queue.DurabilityDurable}},
		Shards:     stores[1:],
		Schedules:  []periodic.Schedule{{Name: "sweep", Spec: "@every 1s", Topic: topic}},
		Partitions: map[string]int{topic: k},
		Relay:      recovery.RelayConfig{Every: 50 * time.Millisecond},
		Logger:     testenv.QuietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		runs = map[string]int{}
	)
	var ran testenv.Counter
	ticked := make(chan *queue.Job, 1)
	if err := eng.Handle(topic, queue.HandlerFunc(func(_ context.Context, j *queue.Job) error {
		if !strings.HasPrefix(j.ID, "o") { // a periodic tick's job
			select {
			case ticked <- j:
			default:
			}
			return nil
		}
		mu.Lock()
		runs[j.ID]++
		mu.Unlock()
		ran.Add(1)
		return nil
	}), queue.TopicConfig{Concurrency: 20}); err != nil {
		t.Fatal(err)
	}
	run := testenv.Start(t, eng.Run)
	testenv.WaitFor(ctx, t, "Run to raise the topic's partitions", func() bool {
		p, err := eng.Partitions(ctx, topic)
		return err == nil && p.Current == k
	})

	// 300 jobs due at once and 300 beyond the horizon.
	const now, later = 300, 300
	var jobs []queue.NewJob
	for i := range now + later {
		j := queue.NewJob{ID: fmt.Sprintf("o%04d", i)}
		if i >= now {
			j.Delay = 5 * time.Second
		}
		jobs = append(jobs, j)
	}
	for b := 0; b < len(jobs); b += 100 {
		res, err := eng.EnqueueBatch(ctx, topic, jobs[b:b+100])
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Status != queue.BatchCreated {
				t.Fatalf("%s: %v %v", r.ID, r.Status, r.Err)
			}
		}
	}
	ran.WaitAtLeast(ctx, t, now, "the jobs due at once to run")

	// The waiting jobs' rows, counted by each server: a third on each,
	// each shard holding two partitions' rows and none of another's.
	for i, s := range stores {
		page, err := s.List(ctx, ledger.ListFilter{Topic: topic, Limit: later})
		if err != nil {
			t.Fatal(err)
		}
		parts, n := map[string]int{}, 0
		for _, r := range page.Rows {
			if r.State != queue.StateWaiting {
				continue // a job that ran, its settlement not written yet
			}
			n++
			parts[r.Topic]++
			if got := dataplane.ShardOf(r.Topic, 3); got != i {
				t.Errorf("shard %d holds a row of %s, whose shard is %d", i, r.Topic, got)
			}
		}
		if n < later*23/100 || n > later*43/100 || len(parts) != 2 {
			t.Errorf("shard %d: %d waiting rows of %d (want 33%% ± 10%%) over partitions %v (want 2)", i, n, later, parts)
		}
	}
	// Each shard's relay passed with its own mark and holds its own lock.
	for i := range 3 {
		mark, lock := ns+":relay", ns+":relay:lock"
		if i > 0 {
			mark, lock = fmt.Sprintf("%s:%d", mark, i), fmt.Sprintf("%s:%d", lock, i)
		}
		testenv.WaitFor(ctx, t, "shard's relay mark and lock", func() bool {
			n, err := rdb.Exists(ctx, mark, lock).Result()
			return err == nil && n == 2
		}, func() string { return mark + " " + lock })
	}

	// Redis loses every key: each shard's relay reloads its own rows.
	if err := testenv.WipeNamespace(ctx, rdb, ns); err != nil {
		t.Fatal(err)
	}
	ran.WaitAtLeast(ctx, t, now+later, "every job to run after Redis lost its data")
	// A periodic tick's job commits with the tick's row on the topic's
	// shard: it goes to the topic's own name, not to a partition that may
	// be on another shard.
	tick := testenv.Receive(ctx, t, ticked, "a periodic tick's job to run")
	if tick.Partition != "" {
		t.Errorf("the tick's job ran from partition %s, want the topic's own name", tick.Partition)
	}
	if err := run.Stop(); err != nil {
		t.Fatal(err)
	}
	for i, s := range stores {
		page, err := s.List(ctx, ledger.ListFilter{Topic: topic, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Rows {
			if got := dataplane.ShardOf(r.Topic, 3); got != i {
				t.Errorf("shard %d holds %s/%s (%s), whose shard is %d", i, r.Topic, r.JobID, r.State, got)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, j := range jobs {
		if runs[j.ID] != 1 {
			t.Errorf("%s ran %d times, want once", j.ID, runs[j.ID])
		}
	}
	if tot := eng.RelayTotals(); tot.Loaded+tot.Reloaded < later {
		t.Errorf("relays loaded %d and reloaded %d jobs in all, want the %d waiting", tot.Loaded, tot.Reloaded, later)
	}
}

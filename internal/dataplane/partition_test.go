package dataplane_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
)

// Per-key grouping: of 10,000 jobs over 100 partition keys on 8
// partitions, every key's jobs are on one partition (the one Get finds them
// in), the keys use every partition, and Stats sums the partitions.
func TestPartitionKeyGroupsJobs(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		const topic, jobs, keys, k = "order_close", 10000, 100, 8
		if _, err := e.c.SetPartitions(ctx, topic, k); err != nil {
			t.Fatal(err)
		}
		key := func(i int) string { return fmt.Sprintf("customer:%d", i%keys) }
		for start := 0; start < jobs; start += 1000 {
			batch := make([]dataplane.NewJob, 0, 1000)
			for i := start; i < start+1000; i++ {
				batch = append(batch, dataplane.NewJob{ID: fmt.Sprintf("o%d", i), PartitionKey: key(i), Delay: time.Hour})
			}
			res, err := e.c.EnqueueBatch(ctx, topic, batch)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if r.Status != dataplane.BatchCreated {
					t.Fatalf("%s: %s %v", r.ID, r.Status, r.Err)
				}
			}
		}
		partOfKey := map[string]string{}
		used := map[string]int{}
		for i := 0; i < jobs; i += 7 { // a sample of every key (7 and 100 are coprime)
			info, err := e.c.Get(ctx, topic, fmt.Sprintf("o%d", i))
			if err != nil {
				t.Fatal(err)
			}
			if info.State != dataplane.StateWaiting || info.Job.Topic != topic || !strings.HasPrefix(info.Job.Partition, topic+"~8.") {
				t.Fatalf("o%d: %s in topic %q partition %q", i, info.State, info.Job.Topic, info.Job.Partition)
			}
			if p, ok := partOfKey[key(i)]; ok && p != info.Job.Partition {
				t.Fatalf("key %s: jobs on %s and %s", key(i), p, info.Job.Partition)
			}
			partOfKey[key(i)] = info.Job.Partition
			used[info.Job.Partition]++
		}
		if len(partOfKey) != keys || len(used) != k {
			t.Fatalf("%d keys seen over %d partitions, want %d over %d", len(partOfKey), len(used), keys, k)
		}
		st, err := e.c.Stats(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if st.Due != jobs || st.Topic != topic {
			t.Fatalf("stats: %+v, want %d due", st, jobs)
		}
	})
}

// A topic's partition count is raised only, up to MaxPartitions, and only
// while its partitions' names fit the ledger's column; a bad partition key
// is refused, naming the field.
func TestSetPartitionsRefusesWhatCannotWork(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		if _, err := e.c.SetPartitions(ctx, "t", 4); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			topic string
			k     int
		}{{"t", 2}, {"t", 0}, {"t", dataplane.MaxPartitions + 1}, {strings.Repeat("x", 60), 8}} {
			_, err := e.c.SetPartitions(ctx, c.topic, c.k)
			var ve *dataplane.ValidationError
			if !errors.As(err, &ve) || ve.Field != "partitions" {
				t.Fatalf("%d partitions on %q: %v, want a validation error of field partitions", c.k, c.topic, err)
			}
		}
		l, err := e.c.SetPartitions(ctx, "t", 4)
		if err != nil || fmt.Sprint(l.Counts) != "[1 4]" {
			t.Fatalf("the same count again: %v %v, want [1 4]", l.Counts, err)
		}
		_, err = e.c.Enqueue(ctx, "t", dataplane.NewJob{ID: "a", PartitionKey: "has space"})
		var ve *dataplane.ValidationError
		if !errors.As(err, &ve) || ve.Field != "partition_key" {
			t.Fatalf("a bad partition key: %v, want a validation error of field partition_key", err)
		}
		if _, err := e.c.Enqueue(ctx, "t~4.0~0", dataplane.NewJob{ID: "a"}); err == nil {
			t.Fatal("an enqueue to a partition's name was accepted")
		}
	})
}

// A worker runs every job of a partitioned topic once, from every
// partition, on redis and durable topics alike; its handler sees the topic
// and the partition; Cancel and Get find a job wherever it is.
func TestPartitionedTopicRunsEveryJobOnce(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			e := newWEnv(t)
			const topic, n = "part", 2000
			if durable {
				e = newDurableWEnv(t)
			}
			name := topic
			if durable {
				name = durableT
			}
			ctx := testenv.Context(t)
			if _, err := e.c.SetPartitions(ctx, name, 4); err != nil {
				t.Fatal(err)
			}
			// One job to cancel, found in its partition by Cancel.
			mustEnqueue(t, e.env, name, dataplane.NewJob{ID: "cancel-me", PartitionKey: "k1", Delay: time.Hour})
			if _, err := e.c.Cancel(ctx, ledgerops.Of(e.led), name, "cancel-me"); err != nil {
				t.Fatal(err)
			}
			if info, err := e.c.Get(ctx, name, "cancel-me"); err != nil || info.State != dataplane.StateUnknown {
				t.Fatalf("cancelled job: %v %v", info, err)
			}

			var mu sync.Mutex
			runs := map[string]int{}
			parts := map[string]int{}
			obs := &settled{}
			w := newWorker(t, e, dataplane.WorkerConfig{Observer: obs, Topic: dataplane.TopicConfig{Concurrency: 20}})
			if err := w.Handle(name, dataplane.HandlerFunc(func(_ context.Context, j *dataplane.Job) error {
				mu.Lock()
				defer mu.Unlock()
				if j.Topic != name {
					return dataplane.SkipRetry(fmt.Errorf("topic %q", j.Topic))
				}
				runs[j.ID]++
				parts[j.Partition]++
				return nil
			}), dataplane.TopicConfig{}); err != nil {
				t.Fatal(err)
			}
			startWorker(t, w)
			enqueueMany(t, e.c, name, "j", n, nil)
			obs.completed.WaitAtLeast(ctx, t, n, "every job completed")
			mu.Lock()
			defer mu.Unlock()
			if len(runs) != n {
				t.Fatalf("%d jobs ran, want %d", len(runs), n)
			}
			for id, r := range runs {
				if r != 1 {
					t.Fatalf("%s ran %d times", id, r)
				}
			}
			if len(parts) != 4 {
				t.Fatalf("jobs ran from partitions %v, want 4", parts)
			}
			for p := range parts {
				if !strings.HasPrefix(p, name+"~4.") {
					t.Fatalf("a job ran from partition %q", p)
				}
			}
			if d := obs.dead.Load(); d != 0 {
				t.Fatalf("%d jobs dead (a handler saw the wrong topic)", d)
			}
		})
	}
}

// Raising a live durable topic's partitions from 1 to 8, with jobs waiting
// and a producer running: every job runs once and none before its due
// time; the old layout drains while new jobs go to the new one. 5,000
// waiting and 3,000 produced in make test; 100,000 and 20,000 under make
// chaos (DELAYQ_CHAOS=long).
func TestChaosRaisingPartitionsOnALiveTopic(t *testing.T) {
	e := newDurableWEnv(t)
	c, err := dataplane.New(e.rdb, dataplane.Config{Namespace: e.ns, Store: e.led, LayoutRefresh: 100 * time.Millisecond,
		TopicDurability: map[string]dataplane.Durability{durableT: dataplane.DurabilityDurable}})
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	ctx := testenv.Context(t)
	var mu sync.Mutex
	runs := map[string]int{}
	parts := map[string]int{}
	var early []string
	obs := &settled{}
	w := newWorker(t, e, dataplane.WorkerConfig{Observer: obs, Topic: dataplane.TopicConfig{Concurrency: 50}})
	if err := w.Handle(durableT, dataplane.HandlerFunc(func(_ context.Context, j *dataplane.Job) error {
		now := time.Now().UnixMilli() // Redis runs on this host's clock
		mu.Lock()
		defer mu.Unlock()
		runs[j.ID]++
		parts[j.Partition]++
		if now < j.RunAt {
			early = append(early, fmt.Sprintf("%s %dms early", j.ID, j.RunAt-now))
		}
		return nil
	}), dataplane.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)

	waiting, produced := 5000, 3000
	base, spread := 500*time.Millisecond, 1500
	if os.Getenv("DELAYQ_CHAOS") == "long" {
		// Due well after the raise (enqueueing 100,000 takes seconds):
		// all of them wait through it.
		waiting, produced = 100_000, 20_000
		base, spread = 45*time.Second, 5000
	}
	enqueueMany(t, e.c, durableT, "w", waiting, func(j *dataplane.NewJob) {
		var n int
		fmt.Sscanf(j.ID, "w%d", &n)
		j.Delay = base + time.Duration(n%spread)*time.Millisecond
	})
	var waitedAtRaise int
	// The producer: small batches, before, during and after the raise.
	produce := testenv.Start(t, func(ctx context.Context) error {
		for i := 0; i < produced; i += 50 {
			batch := make([]dataplane.NewJob, 50)
			for k := range batch {
				batch[k] = dataplane.NewJob{ID: fmt.Sprintf("p%d", i+k), PartitionKey: fmt.Sprintf("c%d", (i+k)%97),
					Delay: time.Duration((i+k)%700) * time.Millisecond}
			}
			if _, err := c.EnqueueBatch(ctx, durableT, batch); err != nil {
				return err
			}
			if i <= produced/3 && produced/3 < i+50 { // once, a third of the way
				if _, err := c.SetPartitions(ctx, durableT, 8); err != nil {
					return err
				}
				mu.Lock()
				waitedAtRaise = waiting
				for id := range runs {
					if id[0] == 'w' {
						waitedAtRaise--
					}
				}
				mu.Unlock()
			}
			if !sleepCtx(ctx, 5*time.Millisecond) {
				return ctx.Err()
			}
		}
		return nil
	})
	if err := produce.Wait(); err != nil {
		t.Fatal(err)
	}
	obs.completed.WaitAtLeast(ctx, t, int64(waiting+produced), "every job completed")
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != waiting+produced {
		t.Fatalf("%d jobs ran, want %d", len(runs), waiting+produced)
	}
	for id, r := range runs {
		if r != 1 {
			t.Fatalf("%s ran %d times", id, r)
		}
	}
	if len(early) > 0 {
		t.Fatalf("%d jobs ran early: %v", len(early), early[:min(5, len(early))])
	}
	t.Logf("%d jobs waiting at the raise, %d produced around it; they ran from %v", waitedAtRaise, produced, parts)
	if parts[""] == 0 || len(parts) != 9 {
		t.Fatalf("jobs ran from %d partitions (%v), want the old one and 8 new", len(parts), parts)
	}
}

// sleepCtx waits d or until ctx ends; it reports whether ctx is live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

// Stats of a topic of many partitions reads them all in one pipeline,
// and a server that has lost its scripts (SCRIPT FLUSH: a restart, a new
// node) is sent their bodies: the sums are right either way. On
// miniredis, whose script cache is this test's alone.
func TestStatsOfManyPartitionsAfterAScriptFlush(t *testing.T) {
	rdb, ns := testenv.MiniRedis(t)
	c, err := dataplane.New(rdb, dataplane.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	if _, err := c.SetPartitions(ctx, "many", 64); err != nil {
		t.Fatal(err)
	}
	batch := make([]dataplane.NewJob, 500)
	for i := range batch {
		batch[i] = dataplane.NewJob{ID: fmt.Sprint("j", i), Delay: time.Hour}
	}
	if _, err := c.EnqueueBatch(ctx, "many", batch); err != nil {
		t.Fatal(err)
	}
	for _, flush := range []bool{false, true} {
		if flush {
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		st, err := c.Stats(ctx, "many")
		if err != nil || st.Due != 500 || st.Topic != "many" {
			t.Fatalf("stats (scripts flushed: %v): %+v, %v; want 500 due", flush, st, err)
		}
		// An id whose partition is not the one it routes to under no key
		// (a missing one): found nowhere, in one pipelined look.
		if info, err := c.Get(ctx, "many", "nope"); err != nil || info.State != dataplane.StateUnknown {
			t.Fatalf("get of a missing id: %+v, %v", info, err)
		}
	}
}

// The job browser's Redis listing of a partitioned topic merges its
// partitions: pages in due order across them, totals summed, each job with
// its partition and payload; an offset deeper than the merge reads is
// refused naming offset.
func TestListMergesPartitions(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		const topic, jobs = "browse", 300
		if _, err := e.c.SetPartitions(ctx, topic, 4); err != nil {
			t.Fatal(err)
		}
		base := redisNow(t, e) + time.Hour.Milliseconds()
		batch := make([]dataplane.NewJob, jobs)
		for i := range batch {
			batch[i] = dataplane.NewJob{ID: fmt.Sprintf("j%03d", i), RunAt: base + int64(i), Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))}
		}
		if _, err := e.c.EnqueueBatch(ctx, topic, batch); err != nil {
			t.Fatal(err)
		}
		parts := map[string]bool{}
		var got []string
		for offset := 0; offset < jobs; offset += 70 {
			p, err := e.c.List(ctx, topic, dataplane.StateWaiting, offset, 70)
			if err != nil {
				t.Fatal(err)
			}
			if p.Total != jobs {
				t.Fatalf("total %d, want %d", p.Total, jobs)
			}
			for _, info := range p.Jobs {
				n := len(got)
				if info.Job.Topic != topic || string(info.Job.Payload) != fmt.Sprintf(`{"n":%d}`, n) || info.Score != base+int64(n) {
					t.Fatalf("job %d of the listing: %+v (payload %s)", n, info.Job, info.Job.Payload)
				}
				parts[info.Job.Partition] = true
				got = append(got, info.Job.ID)
			}
		}
		if len(got) != jobs || len(parts) != 4 {
			t.Fatalf("listed %d jobs from %d partitions, want %d from 4", len(got), len(parts), jobs)
		}
		_, err := e.c.List(ctx, topic, dataplane.StateWaiting, 10*dataplane.MaxPage+1, 10)
		var ve *dataplane.ValidationError
		if !errors.As(err, &ve) || ve.Field != "offset" {
			t.Fatalf("a page past the merge's depth: %v, want a validation error on offset", err)
		}
		// On 256 partitions the first page of the largest size is served;
		// the next one is past the depth.
		if _, err := e.c.SetPartitions(ctx, "wide", 256); err != nil {
			t.Fatal(err)
		}
		if p, err := e.c.List(ctx, "wide", dataplane.StateWaiting, 0, dataplane.MaxPage); err != nil || p.Total != 0 {
			t.Fatalf("first page of 256 partitions: %+v, %v", p, err)
		}
		if _, err := e.c.List(ctx, "wide", dataplane.StateWaiting, 1, dataplane.MaxPage); !errors.As(err, &ve) || ve.Field != "offset" {
			t.Fatalf("second page of 256 partitions at the largest size: %v, want refused naming offset", err)
		}
	})
}

// Requeueing every dead job of a durable partitioned topic requeues each
// partition's (each page read from its own dead set).
func TestRequeueAllDeadOfAPartitionedDurableTopic(t *testing.T) {
	e := newDurableWEnv(t)
	ctx := testenv.Context(t)
	l, err := e.c.SetPartitions(ctx, durableT, 4)
	if err != nil {
		t.Fatal(err)
	}
	const jobs = 40
	enqueueMany(t, e.c, durableT, "d", jobs, nil)
	ops := ledgerops.Of(e.led)
	buried := 0
	for _, name := range l.Names(durableT) {
		cl, err := e.c.Claim(ctx, name, 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(cl.Jobs) == 0 {
			continue
		}
		if err := ops.Record(ctx, cl.Jobs, "w:1"); err != nil {
			t.Fatal(err)
		}
		dead := make([]dataplane.DeadJob, len(cl.Jobs))
		for i, j := range cl.Jobs {
			dead[i] = dataplane.DeadJob{Job: j, Error: "boom"}
		}
		if err := ops.Bury(ctx, dead); err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.c.Bury(ctx, dead); err != nil {
			t.Fatal(err)
		}
		buried += len(dead)
	}
	if buried != jobs {
		t.Fatalf("buried %d, want %d", buried, jobs)
	}
	n, err := e.c.RequeueAllDead(ctx, durableT)
	if err != nil || n != jobs {
		t.Fatalf("requeue all dead: %d, %v; want %d", n, err, jobs)
	}
	st, err := e.c.Stats(ctx, durableT)
	if err != nil || st.Dead != 0 || st.Due != jobs { // due at the SQL clock's now: maybe a moment ahead of Redis's
		t.Fatalf("stats after the requeue: %+v, %v", st, err)
	}
}

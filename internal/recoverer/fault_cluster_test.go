package recoverer_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// TestFaultClusterMasterKilled: a durable topic on a Redis Cluster of three
// masters with a replica each, two worker processes and a producer, and
// the master that serves the topic's slot SIGKILLed under that load; the
// cluster promotes its replica (cluster-node-timeout 2 s). Asynchronous
// replication loses the master's last writes (pushes, claims, acks), which
// SQL, the truth, brings back: every job whose enqueue was acknowledged
// runs, none before its due time, each with one effect. A job runs more
// than once only if it ran before the cluster served its slot again (its
// claim or its ack may be lost with the master), or an earlier run of it
// outlived its lease without committing (a loaded host).
func TestFaultClusterMasterKilled(t *testing.T) {
	testFaultClusterMasterKilled(t, 1)
}

// TestFaultClusterMasterKilledPartitioned is TestFaultClusterMasterKilled
// with the topic spread over 6 partitions, 2 on each master: the master
// killed (the one of the topic's own slot, which holds its layout key too)
// takes 2 of them and the layout with it; the same jobs run, the same way.
func TestFaultClusterMasterKilledPartitioned(t *testing.T) {
	testFaultClusterMasterKilled(t, 6)
}

func testFaultClusterMasterKilled(t *testing.T, partitions int) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster and worker processes")
	}
	runsBefore, acceptedAfter := scale(300, 5000), scale(1500, 30000)
	cl, rdb := startFaultCluster(t)
	ddb := newDurableDB(t)
	const ns = "dqcluster"

	spec := durableWorkerSpec{RedisAddr: strings.Join(cl.Addrs(), ","), RedisCluster: true, Namespace: ns,
		Topic: durableFaultTopic, Horizon: time.Hour, DSN: ddb.dsn, Concurrency: 50, Lease: 3 * time.Second,
		Schedule: "@every 1s", Grace: 2 * time.Second, MaxConns: 12}
	ws := make([]*child, 2)
	for i := range ws {
		s := spec
		s.WorkerID = fmt.Sprintf("cw%d", i)
		ws[i] = startChild(t, s.WorkerID, "durableworker", s)
	}
	for _, w := range ws {
		testenv.WaitFor(testenv.Context(t), t, w.name+" ready", func() bool {
			return len(w.logLines(`"msg":"durable worker ready"`)) > 0
		})
	}

	q, err := dataplane.New(rdb, queue.Config{Namespace: ns, Store: ddb.led, Horizon: time.Hour,
		TopicDurability: map[string]queue.Durability{durableFaultTopic: queue.DurabilityDurable}})
	if err != nil {
		t.Fatal(err)
	}
	if partitions > 1 {
		l, err := q.SetPartitions(testenv.Context(t), durableFaultTopic, partitions)
		if err != nil {
			t.Fatal(err)
		}
		perMaster := map[string]int{}
		for _, p := range l.Names(durableFaultTopic) {
			slot, err := rdb.ClusterKeySlot(testenv.Context(t), "{"+p+"}").Result()
			if err != nil {
				t.Fatal(err)
			}
			perMaster[cl.MasterOf(t, int(slot)).Addr]++
		}
		t.Logf("partitions (with the topic's own) per master: %v", perMaster)
	}
	// A producer: a batch of 20 jobs every 20 ms, due 0.3-2.2 s after
	// its enqueue. Its pushes to Redis fail while the slot has no master;
	// the enqueues do not (SQL is the truth; the relay pushes the jobs).
	var (
		mu       sync.Mutex
		accepted []string
		failed   int
		stop     = make(chan struct{})
		done     = make(chan struct{})
	)
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for b := 0; ; b++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			now := time.Now().UnixMilli() // the cluster's nodes share this host's clock
			jobs := make([]queue.NewJob, 20)
			for i := range jobs {
				jobs[i] = durableJob(fmt.Sprintf("c-%d-%d", b, i), now+300+int64(i)*100, false)
			}
			res, err := q.EnqueueBatch(testenv.Context(t), durableFaultTopic, jobs)
			mu.Lock()
			if err != nil {
				failed++
			}
			for i, j := range jobs {
				if err == nil && res[i].Status == queue.BatchCreated {
					accepted = append(accepted, j.ID)
				}
			}
			mu.Unlock()
		}
	}()

	testenv.WaitFor(testenv.Context(t), t, fmt.Sprintf("%d runs", runsBefore), func() bool {
		return ddb.count(t, "SELECT COUNT(*) FROM durable_runs") >= int64(runsBefore)
	})
	// The loss made real: the master acknowledges another 200 runs'
	// claims, acks and pushes after its replica's cut, and dies with them.
	var atCut, atKill int
	f := failOver(t, cl, rdb, durableFaultTopic, func() {
		mu.Lock()
		atCut = len(accepted)
		mu.Unlock()
		runsAtCut := ddb.count(t, "SELECT COUNT(*) FROM durable_runs")
		testenv.WaitFor(testenv.Context(t), t, "200 runs after the cut", func() bool {
			return ddb.count(t, "SELECT COUNT(*) FROM durable_runs") >= runsAtCut+200
		})
		mu.Lock()
		atKill = len(accepted)
		mu.Unlock()
	})
	t.Logf("the master of slot %d cut from its replica after %d acknowledged enqueues and SIGKILLed after %d; its replica served the slot %d ms later", f.slot, atCut, atKill, f.servedAgain-f.killedAt)
	testenv.WaitFor(testenv.Context(t), t, fmt.Sprintf("%d more acknowledged enqueues", acceptedAfter), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(accepted) >= atKill+acceptedAfter
	})
	close(stop)
	<-done

	ddb.waitSettled(t, int64(len(accepted)), time.Duration(scale(90, 300))*time.Second, nil)
	for _, w := range ws {
		w.stop(t, 30*time.Second)
		w.checkNoRace(t)
	}

	// The jobs that may run again: those that ran from a lease before the
	// cut until the slot was served again (a claim or an ack the master
	// took with it; a run that started earlier was acked before the cut),
	// and those whose earlier run outlived its lease uncommitted.
	mayRepeat, leaseRan := ddb.mayRepeat(t, "start_ms >= ? AND start_ms < ?", f.cutAt-spec.Lease.Milliseconds(), f.servedAgain)
	got := ddb.jobs(t)
	extra := checkOnce(t, got, accepted, mayRepeat)
	ddb.logRepeats(t, got, mayRepeat)
	var lostRuns int64 // runs whose claim the dead master took with it: run again
	if err := ddb.db.Raw("SELECT COUNT(*) FROM (SELECT job_id FROM durable_runs GROUP BY job_id HAVING COUNT(*) > 1) r").Scan(&lostRuns).Error; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d jobs acknowledged (%d before the cut, %d while the master had no replica, before its kill), %d enqueue calls failed; %d extra runs (%d jobs), of jobs that ran before the slot was served again or whose earlier runs outlived their leases uncommitted (%d)",
		len(accepted), atCut, atKill-atCut, failed, extra, lostRuns, leaseRan)
	if atKill == atCut {
		t.Error("no enqueue was acknowledged between the cut and the kill: the master lost nothing")
	}
}

package recoverer_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// TestFaultGaleraNodeKilled: the ledger of a durable topic on a 3-node
// MariaDB Galera cluster (deployments/README.md, "Galera"), three worker
// processes each connected to another node, producers enqueueing through
// two of the nodes, and one node SIGKILLed under that load. Every job whose
// enqueue was acknowledged runs, none before its due time, each with one
// effect (committed with its ledger row's deletion). A job runs more than
// once only if it was in flight at the kill, or an earlier run of it
// outlived its lease without committing (a loaded host). The worker on the
// killed node lives on without SQL: it holds its jobs for its LedgerHold,
// then lets them go, and the others take them over. An enqueue through the
// killed node that failed may or may not have committed: such a job runs
// once if it did, never if not.
func TestFaultGaleraNodeKilled(t *testing.T) {
	testFaultGaleraNodeKilled(t, 1)
}

// TestFaultGaleraNodeKilledPartitioned is TestFaultGaleraNodeKilled with
// the topic spread over 4 partitions: each coalesced enqueue writes the
// rows of several partitions in one transaction (ScheduleEach), which the
// kill may cut like any other.
func TestFaultGaleraNodeKilledPartitioned(t *testing.T) {
	testFaultGaleraNodeKilled(t, 4)
}

func testFaultGaleraNodeKilled(t *testing.T, partitions int) {
	if testing.Short() {
		t.Skip("starts a Galera cluster and worker processes")
	}
	// The kill comes once dw2 has run this many jobs, and the producers
	// stop once this many more were acknowledged after it.
	runsBefore, acceptedAfter := scale(200, 5000), scale(1000, 30000)
	g := testenv.StartGalera(t, 3)
	g.Nodes[0].Exec(t, "CREATE DATABASE dq")
	dsn := func(i int) string {
		return g.Nodes[i].DSN("root", "", "dq", "interpolateParams=true&tx_isolation=%27READ-COMMITTED%27")
	}
	db, led := openLedgerDB(t, dsn(0),
		"CREATE TABLE durable_runs (token VARCHAR(32) NOT NULL PRIMARY KEY, job_id VARCHAR(64) NOT NULL, attempt INT NOT NULL, "+
			"due_ms BIGINT NOT NULL, start_ms BIGINT NOT NULL, end_ms BIGINT NULL, worker VARCHAR(64) NOT NULL, KEY (job_id)) ENGINE=InnoDB",
		"CREATE TABLE durable_effect (id BIGINT AUTO_INCREMENT PRIMARY KEY, job_id VARCHAR(64) NOT NULL, attempt INT NOT NULL, "+
			"worker VARCHAR(64) NOT NULL, KEY (job_id)) ENGINE=InnoDB",
		"CREATE TABLE galera_probe (id INT PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB",
		"INSERT INTO galera_probe VALUES (1, 0)")
	ddb := durableDB{dsn: dsn(0), db: db, led: led}
	rdb, ns := testenv.Redis(t)

	spec := durableWorkerSpec{RedisAddr: redisAddr(t, rdb), Namespace: ns, Topic: durableFaultTopic, Horizon: time.Hour,
		Concurrency: 50, Lease: 3 * time.Second, Schedule: "@every 1s", Grace: 2 * time.Second, MaxConns: 12,
		LedgerHold: 3 * time.Second}
	ws := make([]*child, 3)
	for i := range ws {
		s := spec
		s.WorkerID, s.DSN = fmt.Sprintf("dw%d", i), dsn(i)
		ws[i] = startChild(t, s.WorkerID, "durableworker", s)
	}
	for _, w := range ws {
		testenv.WaitFor(testenv.Context(t), t, w.name+" ready", func() bool {
			return len(w.logLines(`"msg":"durable worker ready"`)) > 0
		})
	}

	// Producers through node 0 and node 2 (the one killed), each a batch
	// of 20 jobs every 20 ms, due 0.3-2.3 s after their enqueue.
	var (
		mu                  sync.Mutex
		accepted, uncertain []string
		killed              atomic.Bool
		stop                = make(chan struct{})
		wg                  sync.WaitGroup
	)
	for _, node := range []int{0, 2} {
		_, nl := openLedgerDB(t, dsn(node))
		q, err := dataplane.New(rdb, queue.Config{Namespace: ns, Store: nl, Horizon: time.Hour,
			TopicDurability: map[string]queue.Durability{durableFaultTopic: queue.DurabilityDurable}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.SetPartitions(testenv.Context(t), durableFaultTopic, partitions); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for b := 0; ; b++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				now := redisMillis(t, rdb)
				jobs := make([]queue.NewJob, 20)
				for i := range jobs {
					jobs[i] = durableJob(fmt.Sprintf("p%d-%d-%d", node, b, i), now+300+int64(i)*100, false)
				}
				res, err := q.EnqueueBatch(testenv.Context(t), durableFaultTopic, jobs)
				mu.Lock()
				for i, j := range jobs {
					switch {
					case err != nil:
						uncertain = append(uncertain, j.ID)
					case res[i].Status == queue.BatchCreated:
						accepted = append(accepted, j.ID)
					default:
						t.Errorf("enqueue %s: %s", j.ID, res[i].Status)
					}
				}
				mu.Unlock()
				if err != nil && !killed.Load() {
					t.Errorf("enqueue through node %d before any kill: %v", node, err)
				}
			}
		}()
	}
	testenv.WaitFor(testenv.Context(t), t, fmt.Sprintf("%d runs on dw2", runsBefore), func() bool {
		return ddb.count(t, "SELECT COUNT(*) FROM durable_runs WHERE worker = 'dw2'") >= int64(runsBefore)
	})
	killed.Store(true)
	g.Nodes[2].Kill(t)
	killedAt := redisMillis(t, rdb)
	mu.Lock()
	atKill := len(accepted)
	mu.Unlock()
	// The survivors hold their commits until the group has evicted the
	// dead node (evs.suspect_timeout, 5 s by default): a run in flight
	// then may outlast its lease and run again. The stall ends when a
	// write commits again.
	testenv.WaitFor(testenv.Context(t), t, "a commit after the kill", func() bool {
		return db.Exec("UPDATE galera_probe SET n = n + 1 WHERE id = 1").Error == nil
	})
	stallEnd := redisMillis(t, rdb)
	t.Logf("node g2 (dw2's, and a producer's) SIGKILLed after %d acknowledged enqueues", atKill)
	// dw2 lives on without its node: it holds the jobs it was running for
	// its LedgerHold (3 s), then lets them go (their Redis leases run out)
	// and the others recover them. Those it finished keep their leases
	// until it can settle them: their effects and rows are committed.
	testenv.WaitFor(testenv.Context(t), t, fmt.Sprintf("%d more acknowledged enqueues", acceptedAfter), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(accepted) >= atKill+acceptedAfter
	})
	close(stop)
	wg.Wait()

	ddb.waitSettled(t, int64(len(accepted)), time.Duration(scale(90, 300))*time.Second, func() string {
		return fmt.Sprintf("dw2 let go %d times", len(ws[2].logLines("jobs not finished here are let go")))
	})
	for _, w := range ws[:2] {
		w.stop(t, 30*time.Second)
		w.checkNoRace(t)
	}
	ws[2].kill(t) // its node is gone: its shutdown could not settle anything
	ws[2].checkNoRace(t)
	if len(ws[2].logLines("jobs not finished here are let go")) == 0 {
		t.Error("dw2 never let its jobs go")
	}

	got := ddb.jobs(t)
	// The jobs that may run again: those in flight when the node died, on
	// dw2 (it could not settle them) or anywhere until the survivors
	// committed again (a run held past its lease by the stall).
	mayRepeat, leaseRan := ddb.mayRepeat(t, "worker = 'dw2' OR start_ms < ?", stallEnd)
	var onDW2 int64
	if err := db.Raw("SELECT COUNT(*) FROM durable_runs WHERE worker = 'dw2'").Scan(&onDW2).Error; err != nil {
		t.Fatal(err)
	}
	want := accepted
	ranUncertain := 0
	for _, id := range uncertain {
		if got[id] != nil {
			want, ranUncertain = append(want, id), ranUncertain+1
		}
	}
	extra := checkOnce(t, got, want, mayRepeat)
	ddb.logRepeats(t, got, mayRepeat)
	t.Logf("%d jobs acknowledged (%d before the kill), %d enqueues failed at or after it (%d of them had committed and ran); %d extra runs, of jobs in flight at the kill (%d, on dw2 or until the cluster committed again %d ms after it) or whose earlier runs outlived their leases uncommitted (%d more)",
		len(accepted), atKill, len(uncertain), ranUncertain, extra, len(mayRepeat)-leaseRan, stallEnd-killedAt, leaseRan)
	if len(uncertain) == 0 {
		t.Error("no enqueue through the killed node failed: was it under load?")
	}
	if onDW2 == 0 {
		t.Error("dw2 ran nothing before its node died")
	}
}

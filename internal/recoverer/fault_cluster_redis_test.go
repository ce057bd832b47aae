package recoverer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// TestFaultClusterMasterKilledRedisTopic measures what a redis topic
// loses when the master of its slot dies with writes its replica never
// got (replication cut, 200 runs, then SIGKILL; the replica promoted):
// Redis is the only copy of a redis topic's waiting jobs, so what was
// enqueued in that window and not yet claimed is gone; what was claimed
// has a ledger row, and comes back (claimed again from the replica's
// state, or put back by the recoverer). Every job acknowledged before the
// cut or after the promotion runs; the log line reports the window's
// figures (docs/design.md §6, deployments/README.md, "Redis Cluster").
func TestFaultClusterMasterKilledRedisTopic(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	const topic = "rt"
	cl, rdb := startFaultCluster(t)
	_, led := openLedgerDB(t, testenv.MySQLDSN(t))
	q, err := dataplane.New(rdb, queue.Config{Namespace: "dqrc"})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		runs = map[string]int{}
	)
	w, err := dataplane.NewWorker(q, ledgerops.Of(led), queue.WorkerConfig{ID: "w", Logger: testenv.QuietLogger(),
		ErrorBackoffMin: 20 * time.Millisecond, ErrorBackoffMax: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	err = w.Handle(topic, queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		mu.Lock()
		runs[j.ID]++
		mu.Unlock()
		return nil
	}), queue.TopicConfig{Concurrency: 20, BatchSize: 20, Lease: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := recoverer.New(q, ledgerops.Of(led), recoverer.Config{Schedule: "@every 1s", Grace: time.Second,
		HeartbeatInterval: 500 * time.Millisecond, Logger: testenv.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	workerDone := make(chan error, 1)
	go func() { workerDone <- runWorker(ctx, w, rec) }()
	t.Cleanup(func() { cancel(); <-workerDone })

	// A producer: 10 jobs every 20 ms, due 300 ms after their enqueue.
	type acked struct {
		id string
		at int64 // when the enqueue was acknowledged, Unix ms
	}
	var (
		accepted []acked
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
			jobs := make([]queue.NewJob, 10)
			for i := range jobs {
				jobs[i] = queue.NewJob{ID: fmt.Sprintf("r-%d-%d", b, i), Delay: 300 * time.Millisecond}
			}
			res, err := q.EnqueueBatch(testenv.Context(t), topic, jobs)
			now := time.Now().UnixMilli()
			mu.Lock()
			for i, j := range jobs {
				if err == nil && res[i].Status == queue.BatchCreated {
					accepted = append(accepted, acked{j.ID, now})
				}
			}
			mu.Unlock()
		}
	}()
	ran := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(runs)
	}
	testenv.WaitFor(testenv.Context(t), t, "300 jobs run", func() bool { return ran() >= 300 })
	f := failOver(t, cl, rdb, topic, func() {
		atCut := ran()
		testenv.WaitFor(testenv.Context(t), t, "200 runs after the cut", func() bool { return ran() >= atCut+200 })
	})
	cutAt, servedAgain := f.cutAt, f.servedAgain
	mu.Lock()
	atServed := len(accepted)
	mu.Unlock()
	testenv.WaitFor(testenv.Context(t), t, "1000 more acknowledged enqueues", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(accepted) >= atServed+1000
	})
	close(stop)
	<-done

	// Every job acknowledged outside the window runs; the window's may not.
	mu.Lock()
	all := accepted
	mu.Unlock()
	var outside, window []string
	for _, a := range all {
		if a.at >= cutAt && a.at < servedAgain {
			window = append(window, a.id)
		} else {
			outside = append(outside, a.id)
		}
	}
	testenv.WaitFor(testenv.Context(t), t, fmt.Sprintf("the %d jobs acknowledged outside the window to run", len(outside)), func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range outside {
			if runs[id] == 0 {
				return false
			}
		}
		return true
	})
	// The recoverer puts back the window's claimed jobs within its grace
	// and a run or two: the ledger empties once each has run.
	testenv.WaitFor(testenv.Context(t), t, "an empty ledger", func() bool {
		var n int64
		return led.DB().Raw("SELECT COUNT(*) FROM "+led.LedgerTable()).Scan(&n).Error == nil && n == 0
	})
	mu.Lock()
	lost, twice := 0, 0
	for _, id := range window {
		if runs[id] == 0 {
			lost++
		}
	}
	for _, n := range runs {
		if n > 1 {
			twice++
		}
	}
	mu.Unlock()
	t.Logf("redis topic, master of slot %d killed %d ms after its replica was cut, served again %d ms after the kill: %d jobs acknowledged, %d of them in the window from the cut to the promotion, %d of those lost; %d jobs ran more than once",
		f.slot, f.killedAt-cutAt, servedAgain-f.killedAt, len(all), len(window), lost, twice)
	if len(window) == 0 {
		t.Error("no enqueue was acknowledged in the window: the master lost nothing")
	}
}

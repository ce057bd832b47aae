package recoverer_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// TestFaultDurableCancelsRacingRecoveryAndRelay: durable jobs wait, half
// within the horizon (a third of those with their Redis copy deleted: lost
// pushes) and half beyond it, falling due over two seconds. Each odd job is
// cancelled around its due time (±200 ms, when the relay's loader, its
// checker and the recoverer's stale scan act on it) while two recoverers and
// three relays, each under a lock of its own, pass in a loop and the topic's
// epoch marker keeps disappearing (so every recovery run is a data-loss run
// that resets the relay's mark: reloads). Then a worker drains what is
// left: no cancelled job ever runs, every other job runs exactly once.
func TestFaultDurableCancelsRacingRecoveryAndRelay(t *testing.T) {
	const horizon = 2 * time.Second
	n := 2 * scale(1000, 5000)
	span := time.Duration(scale(2, 8)) * time.Second
	e := newDurableEnv(t, horizon)
	ctx := testenv.Context(t)

	// Jobs j0..: even ones due within the horizon, odd ones beyond it.
	base := e.redisNow(t) + 500
	due := make([]int64, n)
	jobs := make([]queue.NewJob, n)
	for i := range jobs {
		due[i] = base + int64(i/2)*span.Milliseconds()/int64(n/2)
		if i%4 >= 2 {
			due[i] += horizon.Milliseconds() + 500
		}
		jobs[i] = queue.NewJob{ID: jobID(i), Payload: []byte(`{}`), RunAt: due[i]}
	}
	for lo := 0; lo < n; lo += 1000 {
		if _, err := e.c.EnqueueBatch(ctx, durableTopic, jobs[lo:min(lo+1000, n)]); err != nil {
			t.Fatal(err)
		}
	}
	// Pushes lost: Redis forgets a third of the jobs it has.
	p := e.ns + ":{" + durableTopic + "}:"
	lost := 0
	for i := range n {
		if i%4 < 2 && i%3 == 0 {
			if err := e.rdb.ZRem(ctx, p+"due", jobID(i)).Err(); err != nil {
				t.Fatal(err)
			}
			if err := e.rdb.HDel(ctx, p+"job", jobID(i)).Err(); err != nil {
				t.Fatal(err)
			}
			lost++
		}
	}
	e.ensureEpoch(t, durableTopic)

	// The passes, each under a lock of its own, in loops until stop.
	loops, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var passMu sync.Mutex
	passes := map[string]int{}
	loop := func(name string, pass func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for loops.Err() == nil {
				if err := pass(loops); err != nil && loops.Err() == nil {
					t.Errorf("%s: %v", name, err)
					return
				}
				passMu.Lock()
				passes[name]++
				passMu.Unlock()
			}
		}()
	}
	for i := range 2 {
		r := e.recoverer(t, recoverer.Config{LockKey: fmt.Sprintf("%s:rlock-%d", e.ns, i), Grace: 2 * time.Millisecond,
			HeartbeatInterval: time.Millisecond, PageSize: 50, Chunk: 10})
		loop(fmt.Sprintf("recoverer %d", i), func(ctx context.Context) error { _, err := r.RunOnce(ctx); return err })
	}
	for i := range 3 {
		r := e.relay(t, recoverer.RelayConfig{LockKey: fmt.Sprintf("%s:relaylock-%d", e.ns, i), PageSize: 50})
		loop(fmt.Sprintf("relay %d", i), func(ctx context.Context) error { _, _, err := r.RunOnce(ctx); return err })
	}
	loop("epoch remover", func(ctx context.Context) error {
		t := time.NewTimer(100 * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil
		}
		return e.rdb.Del(ctx, p+"epoch").Err()
	})

	// The cancels: every odd job, around its due time, from 8 goroutines.
	var toCancel []int
	for i := 1; i < n; i += 2 {
		toCancel = append(toCancel, i)
	}
	at := make(map[int]time.Time, len(toCancel))
	for _, i := range toCancel {
		at[i] = time.UnixMilli(due[i] + rand.Int64N(400) - 200)
	}
	sort.Slice(toCancel, func(a, b int) bool { return at[toCancel[a]].Before(at[toCancel[b]]) })
	cancelled := make(map[string]bool, len(toCancel))
	var cmu sync.Mutex
	next := make(chan int)
	var cwg sync.WaitGroup
	for range 8 {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for i := range next {
				if d := time.Until(at[i]); d > 0 {
					time.Sleep(d) // pacing against the clock: cancel around the due time
				}
				j, err := e.c.Cancel(ctx, ledgerops.Of(e.led), durableTopic, jobID(i))
				if err != nil || j.ID != jobID(i) {
					t.Errorf("cancel %s (due in %d ms): %v, %v", jobID(i), due[i]-time.Now().UnixMilli(), j, err)
					continue
				}
				cmu.Lock()
				cancelled[jobID(i)] = true
				cmu.Unlock()
			}
		}()
	}
	for _, i := range toCancel {
		next <- i
	}
	close(next)
	cwg.Wait()
	stop()
	wg.Wait()
	t.Logf("%d jobs (%d pushes lost), %d cancelled racing %v passes", n, lost, len(cancelled), passes)

	// A worker drains what is left, the relay beside it.
	var mu sync.Mutex
	runs := map[string]int{}
	var ran testenv.Counter
	w, err := dataplane.NewWorker(e.c, ledgerops.Of(e.led), queue.WorkerConfig{Logger: e.log, ID: "drain"})
	if err != nil {
		t.Fatal(err)
	}
	h := queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		mu.Lock()
		runs[j.ID]++
		mu.Unlock()
		ran.Add(1)
		return nil
	})
	if err := w.Handle(durableTopic, h, queue.TopicConfig{Concurrency: 32}); err != nil {
		t.Fatal(err)
	}
	relay := e.relay(t, recoverer.RelayConfig{})
	testenv.Start(t, w.Run)
	testenv.Start(t, relay.Run)
	ran.WaitAtLeast(ctx, t, int64(n-len(cancelled)), "every job not cancelled to run")
	// Whatever a pass brought back would be due by now and in Redis, or
	// pushed by the relay's next passes: wait for three of them, then for
	// Redis and the ledger to be empty.
	after := relay.Totals().Passes
	testenv.WaitFor(ctx, t, "three more relay passes, Redis and the ledger empty", func() bool {
		st, err := e.c.Stats(ctx, durableTopic)
		return relay.Totals().Passes >= after+3 && err == nil && st.Due == 0 && st.InFlight == 0 &&
			len(e.scheduledRows(t, durableTopic)) == 0
	})
	mu.Lock()
	defer mu.Unlock()
	bad := 0
	for i := range n {
		id := jobID(i)
		switch {
		case cancelled[id] && runs[id] > 0:
			bad++
			t.Errorf("%s was cancelled and ran %d times", id, runs[id])
		case !cancelled[id] && runs[id] != 1:
			bad++
			t.Errorf("%s was not cancelled and ran %d times, want once", id, runs[id])
		}
		if bad > 10 {
			t.FailNow()
		}
	}
	if bad == 0 {
		t.Logf("%d cancelled jobs never ran, %d others ran once each", len(cancelled), n-len(cancelled))
	}
}

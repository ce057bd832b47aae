package dataplane_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
)

// stallFirstRecord holds the first Record it gets until the test opens
// gate: a worker stalled (a pause, a GC, a swapped-out process) between
// its claim and its ledger write.
type stallFirstRecord struct {
	dataplane.Ledger
	once                  sync.Once
	entered, gate, landed chan struct{}
}

func (l *stallFirstRecord) Record(ctx context.Context, jobs []*dataplane.Job, worker string) error {
	first := false
	l.once.Do(func() { first = true })
	if !first {
		return l.Ledger.Record(ctx, jobs, worker)
	}
	close(l.entered)
	<-l.gate
	err := l.Ledger.Record(ctx, jobs, worker)
	close(l.landed)
	return err
}

// A worker that stalls between its claim and its record past the lease
// writes its row after another worker ran and settled the job. The stalled
// worker must not run the job, and must not leave that row behind: the
// recoverer would run the job again (settled) or keep the row forever
// (dead in Redis). Found by the soak: one duplicate, one row stuck
// "still tracked".
func TestAStalledClaimLeavesNoRowBehind(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error // the other worker's handler
		max  int   // the job's max attempts
	}{
		{"completed elsewhere", nil, 5},
		{"dead elsewhere", dataplane.ErrSkipRetry, 5},
		// The next claim buries it at the stalled claim's own attempt.
		{"its last attempt, buried by the next claim", nil, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newWEnv(t)
			ctx := testenv.ContextTimeout(t, 30*time.Second)
			stalled := &stallFirstRecord{Ledger: ledgerops.Of(e.led), entered: make(chan struct{}), gate: make(chan struct{}),
				landed: make(chan struct{})}
			var ranStalled testenv.Counter
			a := newWorkerWith(t, e, stalled, dataplane.WorkerConfig{ID: "stalled"})
			if err := a.Handle("t", dataplane.HandlerFunc(func(context.Context, *dataplane.Job) error {
				ranStalled.Add(1)
				return nil
				// One slot, taken by the stalled job: this worker cannot
				// claim the job again itself once its lease runs out.
			}), dataplane.TopicConfig{Lease: 300 * time.Millisecond, Concurrency: 1}); err != nil {
				t.Fatal(err)
			}
			mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "j", Payload: []byte("p"), MaxAttempts: c.max})
			// As a recoverer does: the marker tells a settled job from one
			// Redis lost.
			if _, err := e.c.EnsureEpoch(ctx, []string{"t"}, "test"); err != nil {
				t.Fatal(err)
			}
			startWorker(t, a)
			t.Cleanup(func() {
				select {
				case <-stalled.gate:
				default:
					close(stalled.gate) // a failed test lets the worker stop
				}
			})
			select {
			case <-stalled.entered:
			case <-ctx.Done():
				t.Fatal("the worker never recorded its claim")
			}

			obs := &settled{}
			b := newWorker(t, e, dataplane.WorkerConfig{ID: "other", Observer: obs})
			if err := b.Handle("t", dataplane.HandlerFunc(func(context.Context, *dataplane.Job) error { return c.err }),
				dataplane.TopicConfig{Lease: 5 * time.Second}); err != nil {
				t.Fatal(err)
			}
			startWorker(t, b)
			if c.err == nil && c.max > 1 {
				obs.completed.WaitAtLeast(ctx, t, 1, "the other worker's run settled")
			} else {
				obs.dead.WaitAtLeast(ctx, t, 1, "the other worker's run buried")
			}

			close(stalled.gate)
			select {
			case <-stalled.landed:
			case <-ctx.Done():
				t.Fatal("the stalled record never landed")
			}
			testenv.WaitFor(ctx, t, "the stalled claim's ledger row dropped", func() bool {
				_, err := e.led.Row(ctx, "t", "j")
				return errors.Is(err, ledger.ErrNotFound)
			}, func() string {
				r, err := e.led.Row(testenv.Context(t), "t", "j")
				return fmt.Sprintf("row %s %s, %v", r.Worker, r.State, err)
			})
			if n := ranStalled.Load(); n != 0 {
				t.Errorf("the stalled worker ran the job %d times after its lease ran out", n)
			}
		})
	}
}

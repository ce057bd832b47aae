package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/queue"
)

// runningWorker is a worker a scenario started.
type runningWorker struct {
	cancel context.CancelFunc
	done   chan error
	ledger *countingLedger
}

// startWorker runs a worker of the sandbox with h on topic, concurrency
// handlers and claims of at most claimBatch jobs, until stop.
func (s *sandbox) startWorker(ctx context.Context, topic string, h queue.Handler, tc queue.TopicConfig) (*runningWorker, error) {
	led := &countingLedger{Ledger: s.steps}
	wc := queue.WorkerConfig{
		ID:              fmt.Sprintf("bench:%d", os.Getpid()),
		ShutdownTimeout: 10 * time.Second,
		Logger:          s.log,
	}
	if s.tracer != nil {
		wc.TracerProvider = s.tracer
	}
	if s.pool {
		wc.Pools = []queue.Pool{{Name: "bench", Concurrency: tc.Concurrency, Weights: map[string]int{queue.TopicOf(topic): 1}}}
	}
	w, err := dataplane.NewWorker(s.q, led, wc)
	if err != nil {
		return nil, err
	}
	if err := w.Handle(topic, h, tc); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &runningWorker{cancel: cancel, done: make(chan error, 1), ledger: led}
	go func() { r.done <- w.Run(ctx) }()
	return r, nil
}

// stop shuts the worker down gracefully and waits for it.
func (r *runningWorker) stop() error {
	r.cancel()
	if err := <-r.done; err != nil {
		return fmt.Errorf("bench: worker: %w", err)
	}
	return nil
}

// handleAll runs a worker over topic until every job t accepted ran (or
// the run stalled), stops it, and writes the counts and what is left over
// into r. It is how the scenarios that only enqueue check their jobs: by
// what a handler saw.
func (s *sandbox) handleAll(ctx context.Context, topic string, t *tracker, o Options, r *Result) error {
	start := time.Now()
	w, err := s.startWorker(ctx, topic, t, o.topicConfig(50))
	if err != nil {
		return err
	}
	done := o.Progress.show("verify: handling", t.want, t.handled)
	all, waitErr := t.wait(ctx, time.Time{}, o.Stall)
	done()
	if !all && waitErr == nil {
		r.Notes = append(r.Notes, "verify stalled: no job ran for "+o.Stall.String()+"; the rest count as missing")
	}
	r.VerifySeconds = seconds(time.Since(start))
	if err := w.stop(); err != nil {
		return err
	}
	if waitErr != nil {
		return waitErr
	}
	t.tally(r)
	left, err := s.leftover(ctx, topic)
	if err != nil {
		return err
	}
	r.Leftover = left
	return nil
}

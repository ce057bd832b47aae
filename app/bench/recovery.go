package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/recovery"
)

// recoveryRowsPerRecord is how many ledger rows one Record call writes
// while the scenario sets up (under MySQL's 65,535 placeholders).
const recoveryRowsPerRecord = 4000

// Recovery measures how fast lost jobs come back: Jobs ledger rows are
// written as a worker that claimed the jobs and died would have left them
// (stale for a minute), while Redis has no trace of the jobs, nor, unless
// KeepEpoch, of the topic's epoch marker (a Redis that lost its data). One
// recovery run (recoverer.Recoverer.RunOnce) then puts them back; Seconds is
// its duration, Rate rows per second. A worker then handles every job.
func Recovery(ctx context.Context, o Options) (Result, error) {
	return run(ctx, "recovery", o, recoveryBody)
}

func recoveryBody(ctx context.Context, s *sandbox, o Options, r *Result) error {
	const topic = "bench.recovery"
	if err := s.writeLostRows(ctx, topic, o); err != nil {
		return err
	}
	if o.KeepEpoch {
		if _, err := s.q.EnsureEpoch(ctx, []string{topic}, "written by delayq bench"); err != nil {
			return err
		}
	}
	// The loss is staged: the recoverer's loud "Redis lost data" error
	// would only alarm; its report says the same in the result's notes.
	quiet := logrus.New()
	quiet.SetOutput(discard{})
	rec, err := recoverer.New(s.q, ledgerops.Of(s.led), recovery.Config{
		Grace:             2 * time.Second,
		HeartbeatInterval: time.Second,
		Logger:            quiet,
	})
	if err != nil {
		return err
	}
	before := s.probe(ctx)
	start := time.Now()
	rep, err := rec.RunOnce(ctx)
	elapsed := time.Since(start)
	r.Usage = usageBetween(before, s.probe(ctx))
	if err != nil {
		return err
	}
	if rep.Skipped {
		return fmt.Errorf("bench: recovery run skipped: another recoverer holds the sandbox's lock")
	}
	r.Seconds = seconds(elapsed)
	r.Rate, r.Unit = perSecond(rep.Reenqueued, elapsed), "rows/s"
	r.Notes = append(r.Notes, fmt.Sprintf("recovery report: scanned %d, re-enqueued %d, still tracked %d, data loss detected: %v",
		rep.Scanned, rep.Reenqueued, rep.StillTracked, rep.DataLossDetected()))
	if rep.Reenqueued != o.Jobs {
		r.Notes = append(r.Notes, fmt.Sprintf("the run re-enqueued %d of %d rows", rep.Reenqueued, o.Jobs))
	}
	t := newTracker(o.Jobs, true, false, s.offset)
	return s.handleAll(ctx, topic, t, o, r)
}

// writeLostRows writes the ledger rows of jobs 0..Jobs-1 as claimed a
// minute ago by a worker that died, their leases long expired.
func (s *sandbox) writeLostRows(ctx context.Context, topic string, o Options) error {
	now, err := s.redisNowMs(ctx)
	if err != nil {
		return err
	}
	var written atomic.Int64
	done := o.Progress.show("ledger rows", int64(o.Jobs), written.Load)
	defer done()
	payload := []byte(payloadJSON)
	jobs := make([]*queue.Job, 0, recoveryRowsPerRecord)
	for lo := 0; lo < o.Jobs; lo += recoveryRowsPerRecord {
		hi := min(lo+recoveryRowsPerRecord, o.Jobs)
		jobs = jobs[:0]
		for k := lo; k < hi; k++ {
			jobs = append(jobs, &queue.Job{
				Topic: topic, ID: jobID(k), Payload: payload,
				Attempt: 1, MaxAttempts: 25,
				EnqueuedAt: now - 120_000, RunAt: now - 90_000, LeaseUntil: now - 60_000,
			})
		}
		if err := ledgerops.Of(s.led).Record(ctx, jobs, "bench-dead-worker:1"); err != nil {
			return err
		}
		written.Add(int64(hi - lo))
	}
	return nil
}

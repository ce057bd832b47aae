package bench

import (
	"context"
	"time"
)

// idleWarmup lets a new worker's start-up work pass before the watch.
const idleWarmup = 500 * time.Millisecond

// Idle measures what a worker costs with nothing to do: one worker on an
// empty topic, watched for Duration. Rate is this process's CPU time in %
// of one core (with an embedded Redis, that one's work counts too).
func Idle(ctx context.Context, o Options) (Result, error) {
	return run(ctx, "idle", o, idleBody)
}

func idleBody(ctx context.Context, s *sandbox, o Options, r *Result) error {
	const topic = "bench.idle"
	t := newTracker(0, true, false, s.offset)
	w, err := s.startWorker(ctx, topic, t, o.Concurrency, o.ClaimBatch)
	if err != nil {
		return err
	}
	sleep(ctx, idleWarmup)
	before := s.probe(ctx)
	start := time.Now()
	// No progress display here: its redraws would count in the figure.
	sleep(ctx, o.Duration)
	after := s.probe(ctx)
	r.Ledger = w.ledger.stats()
	if err := w.stop(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r.Usage = usageBetween(before, after)
	r.Costs = costsBetween(before, after, 0)
	r.Seconds = seconds(after.at.Sub(start))
	r.Rate, r.Unit = r.Usage.ProcessCPU, "%core"
	r.Notes = append(r.Notes, s.cpuSources(), perSecondNote(r.Costs))
	t.tally(r)
	left, err := s.leftover(ctx, topic)
	r.Leftover = left
	return err
}

// cpuSources says where the servers' CPU figures come from.
func (s *sandbox) cpuSources() string {
	sql := "SQL server CPU: - (not a MySQL/MariaDB server on this host)"
	if s.sqlProc.found() {
		sql = "SQL server CPU: " + s.sqlProc.describe()
	}
	return "Redis CPU: INFO cpu (used_cpu_sys + used_cpu_user, the whole server); " + sql
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

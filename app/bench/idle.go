package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/recoverer"
)

// idleWarmup lets a new worker's start-up work pass before the watch (and
// with Durable, the recoverer's first run and the relay's first, full,
// pass).
const idleWarmup = 500 * time.Millisecond

// Idle measures what a worker costs with nothing to do: one worker on an
// empty topic, watched for Duration. Rate is this process's CPU time in %
// of one core (with an embedded Redis, that one's work counts too); Usage
// has Redis's (INFO cpu) and the SQL server's (its process's
// /proc/<pid>/stat, when local) over the same time.
//
// With Durable the topic is durable, and a relay and a recoverer (Env.Relay
// and Env.Recovery) run beside the worker, as `delayq serve` runs them: the
// figure is then what a serving process costs with nothing to do.
func Idle(ctx context.Context, o Options) (Result, error) {
	return run(ctx, "idle", o, idleBody)
}

func idleBody(ctx context.Context, s *sandbox, o Options, r *Result) error {
	const topic = "bench.idle"
	t := newTracker(0, true, false, s.offset)
	w, err := s.startWorker(ctx, topic, t, o.topicConfig(o.Concurrency))
	if err != nil {
		return err
	}
	var relay *recoverer.Relay
	stopRecovery := func() error { return nil }
	if o.Durable {
		if relay, stopRecovery, err = s.startRecovery(ctx); err != nil {
			return errors.Join(err, w.stop())
		}
	}
	sleep(ctx, idleWarmup)
	var passes0 int64
	if relay != nil {
		passes0 = relay.Totals().Passes
	}
	before := s.probe(ctx)
	start := time.Now()
	// No progress display here: its redraws would count in the figure.
	sleep(ctx, o.Duration)
	after := s.probe(ctx)
	if relay != nil {
		tot := relay.Totals()
		r.Notes = append(r.Notes, fmt.Sprintf("the relay made %d passes in the watch (%d failed over its life)", tot.Passes-passes0, tot.Failed))
	}
	r.Ledger = w.ledger.stats()
	if err := errors.Join(stopRecovery(), w.stop()); err != nil {
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

// startRecovery runs a relay and a recoverer over the sandbox, with the
// Env's settings as `delayq serve` would, until the returned stop.
func (s *sandbox) startRecovery(ctx context.Context) (*recoverer.Relay, func() error, error) {
	rc := s.env.Relay
	rc.LockKey, rc.OnPass, rc.Logger = "", nil, s.log
	relay, err := recoverer.NewRelay(s.q, ledgerops.Of(s.led), rc)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: relay: %w", err)
	}
	cc := s.env.Recovery
	cc.LockKey, cc.OnReport, cc.Logger = "", nil, s.log
	rec, err := recoverer.New(s.q, ledgerops.Of(s.led), cc)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: recoverer: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 2)
	go func() { done <- wrapErr("relay", relay.Run(ctx)) }()
	go func() { done <- wrapErr("recoverer", rec.Run(ctx)) }()
	return relay, func() error {
		cancel()
		return errors.Join(<-done, <-done)
	}, nil
}

// cpuSources says where the servers' CPU figures come from.
func (s *sandbox) cpuSources() string {
	sql := "SQL server CPU: - (not a MySQL/MariaDB server on this host)"
	if s.sqlProc.found() {
		sql = "SQL server CPU: " + s.sqlProc.describe()
	}
	return "Redis CPU: INFO cpu (used_cpu_sys + used_cpu_user, the whole server); " + sql
}

// wrapErr names what failed, or passes nil on.
func wrapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("bench: %s: %w", what, err)
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

package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue/periodic"
	"github.com/delayq/delayq/recovery"
)

// Recover runs recovery once now, whether or not Run runs the recoverer,
// and returns its report; with dryRun it changes nothing and reports what
// it would put back. While another process holds the recovery lock the
// report says Skipped; the error is non-nil when anything went wrong, and
// the report then says how far the run got. With ledger shards, each
// shard's recoverer runs in turn and the report sums theirs (Skipped when
// every one was).
func (e *Engine) Recover(ctx context.Context, dryRun bool) (recovery.Report, error) {
	recs := e.recs
	if dryRun {
		recs = e.dryRecs
	}
	if len(recs) == 1 {
		return recs[0].RunOnce(ctx)
	}
	reps := make([]recovery.Report, len(recs))
	var errs []error
	for i, r := range recs {
		rep, err := r.RunOnce(ctx)
		reps[i] = rep
		if err != nil {
			errs = append(errs, fmt.Errorf("shard %d: %w", i, err))
		}
	}
	return sumReports(reps), errors.Join(errs...)
}

// RecoveryReports lists the latest recovery runs of this process, dry
// runs included, newest first: every shard's.
func (e *Engine) RecoveryReports() []recovery.Report {
	var all []recovery.Report
	for i := range e.recs {
		all = append(all, e.recs[i].Reports()...)
		all = append(all, e.dryRecs[i].Reports()...)
	}
	slices.SortFunc(all, func(x, y recovery.Report) int { return y.Start.Compare(x.Start) })
	return all
}

// RecoveryCounters are this process's recovery totals, for metrics: every
// shard's recoverer's, summed.
func (e *Engine) RecoveryCounters() recovery.Counters {
	var c recovery.Counters
	for _, r := range e.recs {
		n := r.Counters()
		c.Runs += n.Runs
		c.Skipped += n.Skipped
		c.Failed += n.Failed
		c.Scanned += n.Scanned
		c.Reenqueued += n.Reenqueued
		c.DataLoss += n.DataLoss
	}
	return c
}

// RelayTotals are this process's relay totals, for metrics (zero with
// NoRecovery): every shard's relay's, summed, with the latest of each
// time. Over ledger shards the latest LastOK hides a shard whose passes
// fail while another's succeed: watch each with RelayTotalsByShard.
func (e *Engine) RelayTotals() recovery.RelayTotals {
	if len(e.relays) == 1 {
		return e.relays[0].Totals()
	}
	t := recovery.RelayTotals{Wakes: map[string]int64{}}
	for _, r := range e.relays {
		n := r.Totals()
		t.Passes += n.Passes
		t.Failed += n.Failed
		t.Loaded += n.Loaded
		t.Relayed += n.Relayed
		t.Reloaded += n.Reloaded
		t.IdleWaits += n.IdleWaits
		t.HandOvers += n.HandOvers
		t.LastPass = latest(t.LastPass, n.LastPass)
		t.LastReload = latest(t.LastReload, n.LastReload)
		t.LastErr = latest(t.LastErr, n.LastErr)
		t.LastOK = latest(t.LastOK, n.LastOK)
		for k, v := range n.Wakes {
			t.Wakes[k] += v
		}
	}
	return t
}

// RelayTotalsByShard are this process's relay totals of each ledger
// shard, shard order (none with NoRecovery).
func (e *Engine) RelayTotalsByShard() []recovery.RelayTotals {
	out := make([]recovery.RelayTotals, len(e.relays))
	for i, r := range e.relays {
		out[i] = r.Totals()
	}
	return out
}

// RecoveryConfig is the recoverer's configuration, defaults filled in
// (shard 0's: another shard's lock key is suffixed ":<shard>").
func (e *Engine) RecoveryConfig() recovery.Config { return e.recs[0].Config() }

// RelayConfig is the relay's configuration, defaults filled in (shard
// 0's); the zero value with NoRecovery (this process runs no relay).
func (e *Engine) RelayConfig() recovery.RelayConfig {
	if len(e.relays) == 0 {
		return recovery.RelayConfig{}
	}
	return e.relays[0].Config()
}

// DurableCounts are the durable topics' jobs waiting in SQL, by topic, as
// the relays last counted them (summed over the shards), and when (the
// oldest shard's count; zero before every relay's first count or when
// Run runs no relay).
func (e *Engine) DurableCounts() (map[string]ledger.ScheduledCount, time.Time) {
	if len(e.relays) == 0 {
		return nil, time.Time{}
	}
	if len(e.relays) == 1 {
		return e.relays[0].Counts()
	}
	out := map[string]ledger.ScheduledCount{}
	var at time.Time
	for i, r := range e.relays {
		m, when := r.Counts()
		if when.IsZero() {
			return nil, time.Time{}
		}
		if i == 0 || when.Before(at) {
			at = when
		}
		addCounts(out, m, sameName)
	}
	return out, at
}

// Schedules lists the periodic schedules with their next run and the last
// tick any process enqueued; none without Config.Schedules.
func (e *Engine) Schedules(ctx context.Context) ([]periodic.Info, error) {
	if e.sched == nil {
		return []periodic.Info{}, nil
	}
	return e.sched.List(ctx)
}

// Store is the store given to New.
func (e *Engine) Store() *ledger.Ledger { return e.store }

// sumReports is the report of one recovery over every shard: the shards'
// reports (shard order) summed, their errors and losses together.
func sumReports(reps []recovery.Report) recovery.Report {
	out := reps[0]
	out.ByTopic = maps.Clone(out.ByTopic)
	out.ErrorMessages, out.DataLoss = slices.Clone(out.ErrorMessages), slices.Clone(out.DataLoss)
	out.Sample, out.EpochsWritten = slices.Clone(out.Sample), slices.Clone(out.EpochsWritten)
	out.Skipped = true
	var errs []error
	end := out.Start
	for i, r := range reps {
		out.Skipped = out.Skipped && r.Skipped
		end = latest(end, r.Start.Add(r.Duration))
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("shard %d: %w", i, r.Err))
		}
		for _, m := range r.ErrorMessages {
			if i > 0 {
				out.ErrorMessages = append(out.ErrorMessages, fmt.Sprintf("shard %d: %s", i, m))
			}
		}
		if i == 0 {
			continue
		}
		out.Topics += r.Topics
		out.Scanned += r.Scanned
		out.StillTracked += r.StillTracked
		out.Reenqueued += r.Reenqueued
		out.Moved += r.Moved
		out.Errors += r.Errors
		out.DataLoss = append(out.DataLoss, r.DataLoss...)
		out.Sample = append(out.Sample, r.Sample...)
		out.HistoryDeleted += r.HistoryDeleted
		out.EpochsWritten = append(out.EpochsWritten, r.EpochsWritten...)
		out.KeysHandedOn += r.KeysHandedOn
		for t, c := range r.ByTopic {
			if out.ByTopic == nil {
				out.ByTopic = map[string]recovery.TopicCounts{}
			}
			sum := out.ByTopic[t]
			sum.Scanned += c.Scanned
			sum.StillTracked += c.StillTracked
			sum.Reenqueued += c.Reenqueued
			sum.Moved += c.Moved
			out.ByTopic[t] = sum
		}
	}
	out.Duration = end.Sub(out.Start)
	out.Err = errors.Join(errs...)
	return out
}

// latest is the later of a and b.
func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

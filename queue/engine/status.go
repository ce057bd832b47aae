package engine

import (
	"context"
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
// the report then says how far the run got.
func (e *Engine) Recover(ctx context.Context, dryRun bool) (recovery.Report, error) {
	if dryRun {
		return e.dryRec.RunOnce(ctx)
	}
	return e.rec.RunOnce(ctx)
}

// RecoveryReports lists the latest recovery runs of this process, dry
// runs included, newest first.
func (e *Engine) RecoveryReports() []recovery.Report {
	all := append(e.rec.Reports(), e.dryRec.Reports()...)
	slices.SortFunc(all, func(x, y recovery.Report) int { return y.Start.Compare(x.Start) })
	return all
}

// RecoveryCounters are this process's recovery totals, for metrics.
func (e *Engine) RecoveryCounters() recovery.Counters { return e.rec.Counters() }

// RelayTotals are this process's relay totals, for metrics (zero with
// NoRecovery).
func (e *Engine) RelayTotals() recovery.RelayTotals {
	if e.relay == nil {
		return recovery.RelayTotals{}
	}
	return e.relay.Totals()
}

// RecoveryConfig is the recoverer's configuration, defaults filled in.
func (e *Engine) RecoveryConfig() recovery.Config { return e.rec.Config() }

// RelayConfig is the relay's configuration, defaults filled in; the zero
// value with NoRecovery (this process runs no relay).
func (e *Engine) RelayConfig() recovery.RelayConfig {
	if e.relay == nil {
		return recovery.RelayConfig{}
	}
	return e.relay.Config()
}

// DurableCounts are the durable topics' jobs waiting in SQL, by topic, as
// the relay last counted them, and when (zero before its first count or
// when Run runs no relay).
func (e *Engine) DurableCounts() (map[string]ledger.ScheduledCount, time.Time) {
	if e.relay == nil {
		return nil, time.Time{}
	}
	return e.relay.Counts()
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

package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/delayq/delayq/ledger"
)

// WriteStatser is what the ledger write metrics read (*ledger.Ledger):
// its commit counts, kept in memory, so a scrape costs no query.
type WriteStatser interface {
	WriteStats() ledger.WriteStats
}

// WatchLedgerWrites registers the counters of what this process's ledger
// committed: delayq_ledger_commits_total (its write transactions; each
// waits for the log's flush, so on a slow disk they bound a worker),
// delayq_ledger_writes_total (the worker's write calls: writes / commits is
// what group commit achieves) and delayq_ledger_deadlocks_total (commits
// the server chose as deadlock victims, then run again) and
// delayq_ledger_not_ready_total (writes a Galera node refused as not
// ready, then tried again). Call it once.
func (m *Metrics) WatchLedgerWrites(l WriteStatser) error {
	if l == nil {
		return errors.New("metrics: WatchLedgerWrites needs the ledger")
	}
	name := func(n string) string { return prometheus.BuildFQName(namespace, "ledger", n) }
	for _, c := range []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name("commits_total"),
			Help: "Write transactions this process's ledger committed on its own connections (docs/design.md §4.5): a grouped transaction or an autocommitted statement."},
			func() float64 { return float64(l.WriteStats().Commits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name("writes_total"),
			Help: "The worker's ledger write calls (record, complete, unclaim, extend, retry, bury); writes per commit is what group commit achieves."},
			func() float64 { return float64(l.WriteStats().Writes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name("deadlocks_total"),
			Help: "Ledger commits the SQL server chose as deadlock victims; each ran again, up to five times."},
			func() float64 { return float64(l.WriteStats().Deadlocks) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name("not_ready_total"),
			Help: "Ledger writes a Galera node refused as not ready (error 1047, out of the primary component); each was tried again for up to sql.not_ready_wait."},
			func() float64 { return float64(l.WriteStats().NotReady) }),
	} {
		if err := m.reg.Register(c); err != nil {
			return fmt.Errorf("metrics: register the ledger write metrics: %w", err)
		}
	}
	return nil
}

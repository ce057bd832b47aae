package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Sweep results, the values of delayq_orderclose_sweeps_total's result
// label.
const (
	sweepOK      = "ok"
	sweepSkipped = "skipped"
	sweepFailed  = "failed"
)

// sweepMetrics are the order sweeper's: made with the Metrics (so that
// OrderSweep always has somewhere to count) and exported once
// WatchSweeper registers them.
type sweepMetrics struct {
	sweeps      *prometheus.CounterVec
	enqueued    prometheus.Counter
	lastSuccess prometheus.Gauge
	interval    prometheus.Gauge
}

func newSweepMetrics() sweepMetrics {
	name := func(n string) string { return prometheus.BuildFQName(namespace, "orderclose", n) }
	return sweepMetrics{
		sweeps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: name("sweeps_total"),
			Help: "Order sweeps this process tried, by result: ok, failed (an error, a sweep cut short by shutdown included) or skipped (another process held the sweeper lock)."},
			[]string{"result"}),
		enqueued: prometheus.NewCounter(prometheus.CounterOpts{Name: name("sweep_enqueued_total"),
			Help: "Close jobs the order sweeper found missing (pending orders past deadline plus grace with no close job) and enqueued."}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: name("sweep_last_success_timestamp_seconds"),
			Help: "Unix time the last order sweep of this process without errors ended; before the first, the time the sweeper's metrics were set up."}),
		interval: prometheus.NewGauge(prometheus.GaugeOpts{Name: name("sweep_interval_seconds"),
			Help: "The period of the order sweeper's cron schedule."}),
	}
}

// OrderSweep takes a sweep's outcome (the program passes on the orders
// module's report, so that metrics does not depend on the module): the
// close jobs it enqueued, when it ended, whether it ran (false: another
// process held the sweeper lock) and its error. It counts the sweep by
// result and the close jobs it enqueued, and a sweep that ran without
// errors moves the last success time on.
func (m *Metrics) OrderSweep(enqueued int, ended time.Time, ran bool, err error) {
	s := &m.sweep
	switch {
	case err != nil:
		s.sweeps.WithLabelValues(sweepFailed).Inc()
	case !ran:
		s.sweeps.WithLabelValues(sweepSkipped).Inc()
	default:
		s.sweeps.WithLabelValues(sweepOK).Inc()
		s.lastSuccess.Set(float64(ended.UnixNano()) / 1e9)
		m.sweepSucceeded.Add(1)
	}
	// A failed sweep may have enqueued some pages before it failed.
	if enqueued > 0 {
		s.enqueued.Add(float64(enqueued))
	}
}

// WatchSweeper registers the order sweeper's metrics: its sweeps by
// result, the close jobs they enqueued (each one was missing), the time of
// the last successful sweep, and the period of its cron schedule, so that
// alerts can say "no sweep for 3 periods". Call it once, in a process that
// runs a sweeper.
//
// The last success starts at the time of the call, not 0: the sweeper
// first runs a period after it starts, and a fresh process is not one that
// has failed to sweep.
func (m *Metrics) WatchSweeper(schedule string) error {
	now := time.Now()
	period, err := SchedulePeriod(schedule, now)
	if err != nil {
		return err
	}
	s := &m.sweep
	s.interval.Set(period.Seconds())
	if m.sweepSucceeded.Load() == 0 {
		s.lastSuccess.Set(float64(now.UnixNano()) / 1e9)
	}
	for _, r := range []string{sweepOK, sweepSkipped, sweepFailed} {
		s.sweeps.WithLabelValues(r)
	}
	for _, c := range []prometheus.Collector{s.sweeps, s.enqueued, s.lastSuccess, s.interval} {
		if err := m.reg.Register(c); err != nil {
			return fmt.Errorf("metrics: register the order sweeper's metrics: %w", err)
		}
	}
	return nil
}

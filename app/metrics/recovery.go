package metrics

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/robfig/cron/v3"

	"github.com/delayq/delayq/recovery"
)

// recoveryTimes are the end times of the last run and of the last
// successful one, Unix ns (0: none yet).
type recoveryTimes struct {
	lastRun, lastSuccess atomic.Int64
}

// RecoveryReport takes a recoverer's report (recovery.Config.OnReport):
// the jobs it re-enqueued count per topic in delayq_jobs_recovered_total
// (dry runs re-enqueue nothing), and a run without errors moves the last
// success time on. Skipped runs (another recoverer held the lock) change
// nothing.
func (m *Metrics) RecoveryReport(rep recovery.Report) {
	if rep.Skipped {
		return
	}
	end := rep.Start.Add(rep.Duration).UnixNano()
	m.recoveryTimes().lastRun.Store(end)
	if rep.Errors == 0 {
		m.recoveryTimes().lastSuccess.Store(end)
	}
	if rep.DryRun {
		return
	}
	for topic, c := range rep.ByTopic {
		if c.Reenqueued > 0 {
			m.recovered.WithLabelValues(topic).Add(float64(c.Reenqueued))
		}
	}
}

// recoveryMetrics exports a recoverer's counters and times.
type recoveryMetrics struct {
	times    recoveryTimes
	counters func() recovery.Counters // nil until WatchRecoverer
	interval float64                  // seconds

	runs, scanned, dataLoss, lastRun, lastSuccess, period *prometheus.Desc
}

func (m *Metrics) recoveryTimes() *recoveryTimes {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.recovery == nil {
		m.recovery = &recoveryMetrics{}
	}
	return &m.recovery.times
}

// WatchRecoverer registers the recoverer's metrics: its runs by result,
// rows scanned and data-loss detections (read from counters at scrape
// time, e.g. (*recoverer.Recoverer).Counters), the times of its last run and
// last successful run (fed by RecoveryReport), and the period of its cron
// schedule, so that alerts can say "not run for 3 periods". Call it once.
func (m *Metrics) WatchRecoverer(counters func() recovery.Counters, schedule string) error {
	if counters == nil {
		return errors.New("metrics: WatchRecoverer needs the recoverer's counters")
	}
	period, err := SchedulePeriod(schedule, time.Now())
	if err != nil {
		return err
	}
	m.recoveryTimes() // make sure m.recovery exists
	m.mu.Lock()
	r := m.recovery
	m.mu.Unlock()
	name := func(n string) string { return prometheus.BuildFQName(namespace, "recovery", n) }
	r.counters = counters
	r.interval = period.Seconds()
	r.runs = prometheus.NewDesc(name("runs_total"), "Recoverer runs in this process by result: ok, failed (had errors) or skipped (another recoverer held the lock).", []string{"result"}, nil)
	r.scanned = prometheus.NewDesc(name("rows_scanned_total"), "Ledger rows the recoverer looked at.", nil, nil)
	r.dataLoss = prometheus.NewDesc(name("data_loss_total"), "Times the recoverer found a topic whose data Redis had lost (epoch marker gone).", nil, nil)
	r.lastRun = prometheus.NewDesc(name("last_run_timestamp_seconds"), "Unix time the last recoverer run of this process ended (0: none yet).", nil, nil)
	r.lastSuccess = prometheus.NewDesc(name("last_success_timestamp_seconds"), "Unix time the last recoverer run of this process without errors ended (0: none yet).", nil, nil)
	r.period = prometheus.NewDesc(name("interval_seconds"), "The period of the recoverer's cron schedule.", nil, nil)
	if err := m.reg.Register(r); err != nil {
		return fmt.Errorf("metrics: register the recoverer's metrics: %w", err)
	}
	return nil
}

func (r *recoveryMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{r.runs, r.scanned, r.dataLoss, r.lastRun, r.lastSuccess, r.period} {
		ch <- d
	}
}

func (r *recoveryMetrics) Collect(ch chan<- prometheus.Metric) {
	c := r.counters()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(r.runs, c.Runs-c.Failed, "ok")
	counter(r.runs, c.Failed, "failed")
	counter(r.runs, c.Skipped, "skipped")
	counter(r.scanned, c.Scanned)
	counter(r.dataLoss, c.DataLoss)
	seconds := func(ns int64) float64 { return float64(ns) / 1e9 }
	ch <- prometheus.MustNewConstMetric(r.lastRun, prometheus.GaugeValue, seconds(r.times.lastRun.Load()))
	ch <- prometheus.MustNewConstMetric(r.lastSuccess, prometheus.GaugeValue, seconds(r.times.lastSuccess.Load()))
	ch <- prometheus.MustNewConstMetric(r.period, prometheus.GaugeValue, r.interval)
}

// SchedulePeriod is the time between two runs of a cron schedule (the
// recoverer's parser: five fields, six with seconds, or a descriptor such
// as "@every 30s"), measured from the first run after from. For a schedule
// whose gaps vary it is the longest of the next few.
func SchedulePeriod(spec string, from time.Time) (time.Duration, error) {
	p := cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
	s, err := p.Parse(spec)
	if err != nil {
		return 0, fmt.Errorf("metrics: schedule %q: %w", spec, err)
	}
	longest := time.Duration(0)
	t := s.Next(from)
	for range 4 {
		next := s.Next(t)
		if next.IsZero() {
			break
		}
		longest = max(longest, next.Sub(t))
		t = next
	}
	if longest <= 0 || longest > time.Duration(math.MaxInt64/2) {
		return 0, fmt.Errorf("metrics: schedule %q: no period", spec)
	}
	return longest, nil
}

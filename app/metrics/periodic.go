package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/delayq/delayq/queue/periodic"
)

// periodicMetrics are the periodic schedules' (periodic.Observer).
type periodicMetrics struct {
	enqueued *prometheus.CounterVec
	nextRun  *prometheus.GaugeVec
}

// Periodic registers the periodic schedules' metrics and returns the
// scheduler's observer (periodic.Options.Observer). Every schedule's series
// start at zero, so the first error shows in increase(). Call it once, for
// the process that runs the schedules.
//
//   - delayq_periodic_enqueued_total{schedule,result}: claims of ticks by
//     this process: enqueued (it enqueued the tick's job), duplicate
//     (another process or an earlier run had), error (the claim failed:
//     no process may have enqueued the tick).
//   - delayq_periodic_next_run_timestamp_seconds{schedule}: the next tick.
func (m *Metrics) Periodic(schedules []string) periodic.Observer {
	p := &periodicMetrics{
		enqueued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "periodic_enqueued_total",
			Help: "Ticks of periodic schedules this process claimed, by result: enqueued (it enqueued the tick's job), duplicate (another process, or an earlier claim, had), error (the claim failed).",
		}, []string{"schedule", "result"}),
		nextRun: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "periodic_next_run_timestamp_seconds",
			Help: "Unix time of the periodic schedule's next tick.",
		}, []string{"schedule"}),
	}
	m.reg.MustRegister(p.enqueued, p.nextRun)
	for _, s := range schedules {
		for _, r := range []periodic.Result{periodic.ResultEnqueued, periodic.ResultDuplicate, periodic.ResultError} {
			p.enqueued.WithLabelValues(s, string(r))
		}
	}
	return p
}

func (p *periodicMetrics) Tick(schedule string, r periodic.Result) {
	p.enqueued.WithLabelValues(schedule, string(r)).Inc()
}

func (p *periodicMetrics) NextRun(schedule string, next time.Time) {
	p.nextRun.WithLabelValues(schedule).Set(float64(next.UnixMilli()) / 1e3)
}

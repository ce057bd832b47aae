package metrics

import "github.com/prometheus/client_golang/prometheus"

// newReschedules registers delayq_reschedules_total (docs/design.md §4.14).
func newReschedules(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "reschedules_total",
		Help: "Reschedules of waiting jobs asked of this process (API, CLI, orders), by result: ok, in_flight (refused: a worker holds the job), dead (refused), not_found, invalid (a time out of range), error (Redis or SQL failed).",
	}, []string{"topic", "result"})
	reg.MustRegister(c)
	return c
}

// Rescheduled counts one reschedule and its result (queue.RescheduleObserver).
func (m *Metrics) Rescheduled(topic, result string) {
	m.reschedules.WithLabelValues(topic, result).Inc()
}

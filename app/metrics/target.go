package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/delayq/delayq/jobs/httptarget"
)

var _ httptarget.Observer = (*Metrics)(nil)

// targetClasses are the values of delayq_target_requests_total's class
// label.
var targetClasses = []string{"2xx", "3xx", "4xx", "5xx", httptarget.ClassTimeout, httptarget.ClassError}

// targetMetrics are the HTTP targets' requests.
type targetMetrics struct {
	requests *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
}

func newTargetMetrics() targetMetrics {
	return targetMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "target_requests_total",
			Help: "Requests of HTTP-target topics to their endpoints, by the answer's status class (2xx..5xx), timeout (no answer within the target's timeout) or error (no answer: connection, TLS, the job's lease or shutdown).",
		}, []string{"topic", "class"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "target_request_seconds",
			Help:    "How long the requests of HTTP-target topics took, answered or not.",
			Buckets: DurationBuckets,
		}, []string{"topic"}),
	}
}

// InitTarget creates an HTTP-target topic's series at zero (see
// InitTopic).
func (m *Metrics) InitTarget(topic string) {
	for _, c := range targetClasses {
		m.target.requests.WithLabelValues(topic, c)
	}
	m.target.seconds.WithLabelValues(topic)
}

// TargetRequest counts one request of an HTTP-target topic
// (httptarget.Observer).
func (m *Metrics) TargetRequest(topic, class string, took time.Duration) {
	m.target.requests.WithLabelValues(topic, class).Inc()
	m.target.seconds.WithLabelValues(topic).Observe(took.Seconds())
}

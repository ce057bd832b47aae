package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/delayq/delayq/queue"
)

var _ queue.RateLimitObserver = (*Metrics)(nil)

// rateMetrics are the topics' rate limits (docs/design.md §4.16).
type rateMetrics struct {
	perSecond *prometheus.GaugeVec
	limited   *prometheus.CounterVec
}

func newRateMetrics() rateMetrics {
	return rateMetrics{
		perSecond: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "rate_limit_per_second",
			Help: "The topic's rate limit as this process's workers apply it: handler starts per second across the cluster (worker.topics.<t>.rate_limit).",
		}, []string{"topic"}),
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "rate_limited_claims_total",
			Help: "Claims of this process's workers that the topic's rate limit held back: due jobs left waiting for lack of tokens.",
		}, []string{"topic"}),
	}
}

func (r rateMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.perSecond, r.limited}
}

// InitRateLimit shows the rate limit of a topic this process's workers
// handle, and creates its held-back counter at zero (see InitTopic).
func (m *Metrics) InitRateLimit(topic string, perSecond float64) {
	m.rate.perSecond.WithLabelValues(topic).Set(perSecond)
	m.rate.limited.WithLabelValues(topic)
}

// RateLimited counts a claim the rate limit held back
// (queue.RateLimitObserver).
func (m *Metrics) RateLimited(topic string) {
	m.rate.limited.WithLabelValues(topic).Inc()
}

package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/delayq/delayq/recovery"
)

// relayMetrics counts what the durable topics' relay did: jobs it pushed,
// by topic and kind, and its passes.
type relayMetrics struct {
	pushed *prometheus.CounterVec // topic, kind = loaded | relayed | reloaded
	passes *prometheus.CounterVec // result = ok | failed
}

func newRelayMetrics(reg prometheus.Registerer) *relayMetrics {
	r := &relayMetrics{
		pushed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "relay_pushed_total",
			Help: "Durable jobs the relay pushed to Redis: loaded (entered the horizon), relayed (due and missing: a lost push), reloaded (the horizon reloaded after Redis lost the relay's mark).",
		}, []string{"topic", "kind"}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "relay_passes_total",
			Help: "Relay passes that pushed something or failed, by result.",
		}, []string{"result"}),
	}
	reg.MustRegister(r.pushed, r.passes)
	return r
}

// RelayPass counts one relay pass (recovery.RelayConfig.OnPass).
func (m *Metrics) RelayPass(rep recovery.RelayReport) {
	r := m.relayMetrics()
	result := "ok"
	if rep.Err != nil {
		result = "failed"
	}
	r.passes.WithLabelValues(result).Inc()
	for kind, byTopic := range map[string]map[string]int{"loaded": rep.Loaded, "relayed": rep.Relayed, "reloaded": rep.Reloaded} {
		for topic, n := range byTopic {
			r.pushed.WithLabelValues(topic, kind).Add(float64(n))
		}
	}
}

func (m *Metrics) relayMetrics() *relayMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.relay == nil {
		m.relay = newRelayMetrics(m.reg)
	}
	return m.relay
}

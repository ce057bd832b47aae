package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/delayq/delayq/jobs/httptarget"
)

var _ httptarget.FailureObserver = (*Metrics)(nil)

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

// RecentTargetFailures is how many of its latest failures each target
// keeps for the dashboard.
const RecentTargetFailures = 10

// targetLive is one target as the dashboard shows it.
type targetLive struct {
	mu       sync.Mutex
	method   string
	url      string
	failures []httptarget.Failure // oldest first, at most RecentTargetFailures
}

func (m *Metrics) targetLive(topic string) *targetLive {
	if t, ok := m.targets.Load(topic); ok {
		return t.(*targetLive)
	}
	t, _ := m.targets.LoadOrStore(topic, &targetLive{})
	return t.(*targetLive)
}

// DescribeTarget says where an HTTP-target topic's jobs go, for the
// dashboard: the method and the URL without its query (Target.URL; the
// configuration refuses credentials in it).
func (m *Metrics) DescribeTarget(topic, method, url string) {
	t := m.targetLive(topic)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.method, t.url = method, url
}

// TargetFailure keeps one of the latest failures of an HTTP-target topic
// (httptarget.FailureObserver).
func (m *Metrics) TargetFailure(topic string, f httptarget.Failure) {
	t := m.targetLive(topic)
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.failures) == RecentTargetFailures {
		t.failures = append(t.failures[:0], t.failures[1:]...)
	}
	t.failures = append(t.failures, f)
}

// TargetState is an HTTP-target topic as the dashboard shows it.
type TargetState struct {
	Method, URL string
	// Failures are the latest requests that did not succeed, newest first.
	Failures []httptarget.Failure
}

// Targets returns the HTTP-target topics of this process by topic.
func (m *Metrics) Targets() map[string]TargetState {
	out := make(map[string]TargetState)
	m.targets.Range(func(k, v any) bool {
		t := v.(*targetLive)
		t.mu.Lock()
		s := TargetState{Method: t.method, URL: t.url, Failures: make([]httptarget.Failure, 0, len(t.failures))}
		for i := len(t.failures) - 1; i >= 0; i-- {
			s.Failures = append(s.Failures, t.failures[i])
		}
		t.mu.Unlock()
		out[k.(string)] = s
		return true
	})
	return out
}

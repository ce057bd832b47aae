package metrics_test

import (
	"testing"

	"github.com/delayq/delayq/app/metrics"
	"github.com/delayq/delayq/queue"
)

// The queue client's observer hears every reschedule with its result.
var _ queue.RescheduleObserver = (*metrics.Metrics)(nil)

func TestReschedulesCounted(t *testing.T) {
	m := metrics.New(nil)
	m.Rescheduled("orders", "ok")
	m.Rescheduled("orders", "ok")
	m.Rescheduled("orders", "in_flight")
	for _, c := range []struct {
		result string
		want   float64
	}{{"ok", 2}, {"in_flight", 1}} {
		if got := value(t, m, "delayq_reschedules_total", map[string]string{"topic": "orders", "result": c.result}); got != c.want {
			t.Errorf("%s: %v, want %v", c.result, got, c.want)
		}
	}
}

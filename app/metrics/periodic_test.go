package metrics_test

import (
	"testing"
	"time"

	"github.com/delayq/delayq/app/metrics"
	"github.com/delayq/delayq/queue/periodic"
)

func TestPeriodicMetrics(t *testing.T) {
	m := metrics.New(nil)
	obs := m.Periodic([]string{"report"})
	lbl := func(r string) map[string]string { return map[string]string{"schedule": "report", "result": r} }
	if v := value(t, m, "delayq_periodic_enqueued_total", lbl("error")); v != 0 {
		t.Fatalf("error series starts at %v", v)
	}
	obs.Tick("report", periodic.ResultEnqueued)
	obs.Tick("report", periodic.ResultDuplicate)
	obs.Tick("report", periodic.ResultDuplicate)
	if v := value(t, m, "delayq_periodic_enqueued_total", lbl("duplicate")); v != 2 {
		t.Fatalf("duplicates %v", v)
	}
	next := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	obs.NextRun("report", next)
	if v := value(t, m, "delayq_periodic_next_run_timestamp_seconds", map[string]string{"schedule": "report"}); v != float64(next.Unix()) {
		t.Fatalf("next run %v", v)
	}
}

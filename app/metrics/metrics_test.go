package metrics_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/delayq/delayq/app/metrics"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/recovery"
)

// family returns the gathered family called name, failing if it is absent.
func family(t *testing.T, m *metrics.Metrics, name string) *dto.MetricFamily {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}

// labelled returns the metric of f whose labels are exactly want.
func labelled(t *testing.T, f *dto.MetricFamily, want map[string]string) *dto.Metric {
	t.Helper()
next:
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(want) {
			continue
		}
		for _, l := range m.GetLabel() {
			if want[l.GetName()] != l.GetValue() {
				continue next
			}
		}
		return m
	}
	t.Fatalf("%s has no series %v", f.GetName(), want)
	return nil
}

func value(t *testing.T, m *metrics.Metrics, name string, labels map[string]string) float64 {
	t.Helper()
	s := labelled(t, family(t, m, name), labels)
	switch {
	case s.Counter != nil:
		return s.Counter.GetValue()
	case s.Gauge != nil:
		return s.Gauge.GetValue()
	}
	t.Fatalf("%s is neither a counter nor a gauge", name)
	return 0
}

func topic(name string) map[string]string { return map[string]string{"topic": name} }

// The observer methods feed the per-topic counters, the histograms (whose
// buckets tell 1 ms from 10 ms from 1 s) and the heartbeat.
func TestObserverFeedsCountersAndHistograms(t *testing.T) {
	m := metrics.New(testenv.QuietLogger())
	m.InitTopic("idle")
	m.Enqueued("t", 5)
	m.Claimed("t", 4)
	m.Completed("t", 2)
	m.Retried("t", 1)
	m.Dead("t", 1)
	m.Released("t", 3)
	m.CancelledRunning("t", 2)
	m.Taken("t", 6)
	for _, d := range []time.Duration{time.Millisecond, 10 * time.Millisecond, time.Second} {
		m.Started("t", d)
		m.Handled("t", d, nil)
	}
	at := time.Unix(1700000000, 500_000_000)
	m.Heartbeat("host:1", at)
	m.Heartbeat("host:1", at)
	m.Unsettled("host:1", 7)

	for name, want := range map[string]float64{
		"delayq_jobs_enqueued_total": 5, "delayq_jobs_claimed_total": 4, "delayq_jobs_completed_total": 2,
		"delayq_jobs_retried_total": 1, "delayq_jobs_dead_total": 1, "delayq_jobs_released_total": 3,
		"delayq_enqueue_taken_total":          6,
		"delayq_jobs_cancelled_running_total": 2,
	} {
		if got := value(t, m, name, topic("t")); got != want {
			t.Errorf("%s{topic=t} = %v, want %v", name, got, want)
		}
		if got := value(t, m, name, topic("idle")); got != 0 {
			t.Errorf("%s{topic=idle} = %v, want a zero series", name, got)
		}
	}
	for _, name := range []string{"delayq_job_lateness_seconds", "delayq_handler_duration_seconds"} {
		h := labelled(t, family(t, m, name), topic("t")).GetHistogram()
		if h.GetSampleCount() != 3 || h.GetSampleSum() < 1.011 || h.GetSampleSum() > 1.0111 {
			t.Errorf("%s: count %d, sum %v", name, h.GetSampleCount(), h.GetSampleSum())
		}
		cum := map[float64]uint64{}
		for _, b := range h.GetBucket() {
			cum[b.GetUpperBound()] = b.GetCumulativeCount()
		}
		// 1 ms is in le=0.001; 10 ms is in le=0.01 but not le=0.005; 1 s in le=1 but not le=0.5.
		if cum[0.001] != 1 || cum[0.005] != 1 || cum[0.01] != 2 || cum[0.5] != 2 || cum[1] != 3 {
			t.Errorf("%s buckets: %v", name, cum)
		}
	}
	m.EnqueueCall("t", 1)
	m.EnqueueCall("t", 40)
	calls := labelled(t, family(t, m, "delayq_enqueue_call_jobs"), topic("t")).GetHistogram()
	cum := map[float64]uint64{}
	for _, b := range calls.GetBucket() {
		cum[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	if calls.GetSampleCount() != 2 || calls.GetSampleSum() != 41 || cum[1] != 1 || cum[20] != 1 || cum[50] != 2 {
		t.Errorf("enqueue_call_jobs: count %d, sum %v, buckets %v", calls.GetSampleCount(), calls.GetSampleSum(), cum)
	}
	w := map[string]string{"worker": "host:1"}
	if got := value(t, m, "delayq_worker_heartbeat_timestamp_seconds", w); got != 1700000000.5 {
		t.Errorf("heartbeat timestamp %v", got)
	}
	if got := value(t, m, "delayq_worker_heartbeats_total", w); got != 2 {
		t.Errorf("heartbeats %v", got)
	}
	if got := value(t, m, "delayq_worker_unsettled_jobs", w); got != 7 {
		t.Errorf("unsettled jobs %v", got)
	}
	// The dashboard's sample: totals, and the lateness since the last one.
	s := m.SampleLive()["t"]
	if s.Enqueued != 5 || s.Completed != 2 || s.Dead != 1 || s.Retried != 1 || s.Started != 3 ||
		s.LatenessMax != time.Second || s.LatenessAvg != 337*time.Millisecond {
		t.Errorf("live sample %+v", s)
	}
	if s := m.SampleLive()["t"]; s.Started != 0 || s.LatenessMax != 0 || s.Completed != 2 {
		t.Errorf("second live sample %+v: want lateness reset, totals kept", s)
	}
}

// fakeQueue counts its reads.
type fakeQueue struct {
	mu     sync.Mutex
	reads  int
	stats  map[string]queue.Stats
	failed error
}

func (f *fakeQueue) Topics(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.failed != nil {
		return nil, f.failed
	}
	return []string{"a", "b"}, nil
}

func (f *fakeQueue) Stats(_ context.Context, topic string) (queue.Stats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats[topic], nil
}

type fakeLedger struct{ olderThan int64 }

func (f *fakeLedger) Count(context.Context) (int64, error) { return 7, nil }
func (f *fakeLedger) CountStale(_ context.Context, olderThan int64) (int64, error) {
	f.olderThan = olderThan
	return 2, nil
}

// The state gauges are read at scrape time, once per scrape however many
// gauges there are, and a failed Redis read says so instead of reporting
// zeros.
func TestStateGaugesReadAtScrapeTime(t *testing.T) {
	m := metrics.New(testenv.QuietLogger())
	q := &fakeQueue{stats: map[string]queue.Stats{
		"a": {Topic: "a", Due: 10, DueNow: 4, InFlight: 3, Dead: 2, OldestOverdueMs: 1500, ByPriority: [queue.MaxPriority + 1]int64{6, 0, 1, 3}, Parked: 5},
		"b": {Topic: "b", Due: 1},
	}}
	led := &fakeLedger{}
	if err := m.WatchState(metrics.StateConfig{Queue: q, Ledger: led, StaleAfter: time.Minute, MaxAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Minute).UnixMilli()
	for name, want := range map[string]float64{
		"delayq_jobs_due": 10, "delayq_jobs_overdue": 4, "delayq_jobs_in_flight": 3, "delayq_jobs_dead": 2,
		"delayq_oldest_overdue_seconds": 1.5, "delayq_jobs_parked": 5,
	} {
		if got := value(t, m, name, topic("a")); got != want {
			t.Errorf("%s{topic=a} = %v, want %v", name, got, want)
		}
	}
	for p, want := range []float64{6, 0, 1, 3} {
		labels := map[string]string{"topic": "a", "priority": strconv.Itoa(p)}
		if got := value(t, m, "delayq_jobs_due_by_priority", labels); got != want {
			t.Errorf("delayq_jobs_due_by_priority%v = %v, want %v", labels, got, want)
		}
	}
	for name, want := range map[string]float64{"delayq_ledger_rows": 7, "delayq_ledger_stale_rows": 2, "delayq_redis_up": 1, "delayq_ledger_up": 1} {
		if got := value(t, m, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if q.reads != 1 {
		t.Errorf("%d Redis readings for scrapes within MaxAge, want 1", q.reads)
	}
	if after := time.Now().Add(-time.Minute).UnixMilli(); led.olderThan < before || led.olderThan > after {
		t.Errorf("stale rows counted with lease before %d, want now - 1m", led.olderThan)
	}

	m2 := metrics.New(testenv.QuietLogger())
	failing := &fakeQueue{failed: errors.New("redis down")}
	if err := m2.WatchState(metrics.StateConfig{Queue: failing, MaxAge: time.Nanosecond}); err != nil {
		t.Fatal(err)
	}
	if got := value(t, m2, "delayq_redis_up", nil); got != 0 {
		t.Errorf("redis_up %v with Redis down", got)
	}
	fams, err := m2.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		switch f.GetName() {
		case "delayq_jobs_due", "delayq_jobs_overdue", "delayq_jobs_in_flight", "delayq_jobs_dead", "delayq_ledger_rows":
			t.Errorf("%s reported while Redis is down (and no ledger is watched)", f.GetName())
		}
	}
}

// The recoverer's counters are read at scrape time; its reports feed the
// per-topic recovered counter and the last success time.
func TestRecoveryMetrics(t *testing.T) {
	m := metrics.New(testenv.QuietLogger())
	counters := recovery.Counters{Runs: 5, Failed: 1, Skipped: 2, Scanned: 40, Reenqueued: 9, DataLoss: 1}
	if err := m.WatchRecoverer(func() recovery.Counters { return counters }, "@every 30s"); err != nil {
		t.Fatal(err)
	}
	start := time.Unix(1700000000, 0)
	m.RecoveryReport(recovery.Report{Start: start, Duration: 2 * time.Second,
		ByTopic: map[string]recovery.TopicCounts{"a": {Scanned: 5, Reenqueued: 3}}})
	m.RecoveryReport(recovery.Report{Start: start.Add(time.Minute), Errors: 1,
		ByTopic: map[string]recovery.TopicCounts{"a": {Reenqueued: 1}}})
	m.RecoveryReport(recovery.Report{Start: start.Add(2 * time.Minute), DryRun: true,
		ByTopic: map[string]recovery.TopicCounts{"a": {Reenqueued: 100}}})
	m.RecoveryReport(recovery.Report{Start: start.Add(time.Hour), Skipped: true})

	if got := value(t, m, "delayq_jobs_recovered_total", topic("a")); got != 4 {
		t.Errorf("recovered %v, want 4 (dry runs re-enqueue nothing)", got)
	}
	if got := value(t, m, "delayq_recovery_last_success_timestamp_seconds", nil); got != float64(start.Add(2*time.Minute).Unix()) {
		t.Errorf("last success %v", got)
	}
	if got := value(t, m, "delayq_recovery_last_run_timestamp_seconds", nil); got != float64(start.Add(2*time.Minute).Unix()) {
		t.Errorf("last run %v (skipped runs do not count)", got)
	}
	for result, want := range map[string]float64{"ok": 4, "failed": 1, "skipped": 2} {
		if got := value(t, m, "delayq_recovery_runs_total", map[string]string{"result": result}); got != want {
			t.Errorf("runs{result=%s} = %v, want %v", result, got, want)
		}
	}
	for name, want := range map[string]float64{"delayq_recovery_data_loss_total": 1, "delayq_recovery_rows_scanned_total": 40, "delayq_recovery_interval_seconds": 30} {
		if got := value(t, m, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if err := m.WatchRecoverer(func() recovery.Counters { return counters }, "not a spec"); err == nil {
		t.Error("a bad schedule was accepted")
	}
}

// The order sweeper's outcomes count by result; enqueued close jobs add
// up, those of a failed sweep too; only a sweep that ran without errors
// moves the last success on. Nothing is exported before WatchSweeper.
func TestOrderSweepMetrics(t *testing.T) {
	m := metrics.New(testenv.QuietLogger())
	start := time.Unix(1700000000, 0)
	m.OrderSweep(3, start.Add(time.Second), true, nil)
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "delayq_orderclose_") {
			t.Errorf("%s exported before WatchSweeper", f.GetName())
		}
	}
	if err := m.WatchSweeper("@every 1m"); err != nil {
		t.Fatal(err)
	}
	fresh := metrics.New(testenv.QuietLogger())
	before := time.Now()
	if err := fresh.WatchSweeper("@every 1m"); err != nil {
		t.Fatal(err)
	}
	if got := value(t, fresh, "delayq_orderclose_sweep_last_success_timestamp_seconds", nil); got < float64(before.Unix()) || got > float64(time.Now().Unix()+1) {
		t.Errorf("last success before any sweep %v, want the time WatchSweeper was called (%d)", got, before.Unix())
	}
	for result, want := range map[string]float64{"ok": 1, "skipped": 0, "failed": 0} {
		if got := value(t, m, "delayq_orderclose_sweeps_total", map[string]string{"result": result}); got != want {
			t.Errorf("before more sweeps: sweeps{result=%s} = %v, want %v", result, got, want)
		}
	}
	m.OrderSweep(0, start.Add(time.Minute+time.Second), true, nil)
	m.OrderSweep(2, start.Add(2*time.Minute), true, errors.New("sql down"))
	m.OrderSweep(0, start.Add(3*time.Minute), false, errors.New("redis down"))
	m.OrderSweep(0, start.Add(4*time.Minute), false, nil) // another process held the lock
	for result, want := range map[string]float64{"ok": 2, "skipped": 1, "failed": 2} {
		if got := value(t, m, "delayq_orderclose_sweeps_total", map[string]string{"result": result}); got != want {
			t.Errorf("sweeps{result=%s} = %v, want %v", result, got, want)
		}
	}
	for name, want := range map[string]float64{
		"delayq_orderclose_sweep_enqueued_total": 5,
		// Not the time of WatchSweeper: a sweep had succeeded before it.
		"delayq_orderclose_sweep_last_success_timestamp_seconds": float64(start.Add(time.Minute + time.Second).Unix()),
		"delayq_orderclose_sweep_interval_seconds":               60,
	} {
		if got := value(t, m, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if err := metrics.New(testenv.QuietLogger()).WatchSweeper("not a spec"); err == nil {
		t.Error("a bad schedule was accepted")
	}
}

func TestSchedulePeriod(t *testing.T) {
	from := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for spec, want := range map[string]time.Duration{
		"@every 30s": 30 * time.Second, "*/10 * * * * *": 10 * time.Second, "*/5 * * * *": 5 * time.Minute, "@hourly": time.Hour,
	} {
		got, err := metrics.SchedulePeriod(spec, from)
		if err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", spec, got, err, want)
		}
	}
}

// Every delayq metric follows Prometheus conventions (promlint), and the
// exposition at /metrics holds them.
func TestNamesFollowConventions(t *testing.T) {
	m := metrics.New(testenv.QuietLogger())
	m.InitTopic("t")
	m.Heartbeat("w", time.Now())
	m.Unsettled("w", 0)
	if err := m.WatchState(metrics.StateConfig{Queue: &fakeQueue{stats: map[string]queue.Stats{}}, Ledger: &fakeLedger{}}); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchRecoverer(func() recovery.Counters { return recovery.Counters{} }, "@every 30s"); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchSweeper("@every 1m"); err != nil {
		t.Fatal(err)
	}
	m.InitDurableTopic("t")
	m.InitTarget("t")
	m.InitRateLimit("t", 500)
	m.RateLimited("t")
	if err := m.WatchRelay(&fakeRelay{counts: map[string]ledger.ScheduledCount{"t": {Total: 3, Beyond: 1}}}, time.Second); err != nil {
		t.Fatal(err)
	}
	m.Periodic([]string{"s"}).NextRun("s", time.Unix(60, 0))
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var ours []*dto.MetricFamily
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "delayq_") {
			ours = append(ours, f)
		}
	}
	if len(ours) < 25 {
		t.Errorf("only %d delayq_ families", len(ours))
	}
	problems, err := promlint.NewWithMetricFamilies(ours).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`delayq_jobs_completed_total{topic="t"} 0`, `delayq_job_lateness_seconds_bucket{topic="t",le="0.001"} 0`,
		"delayq_ledger_stale_rows 2", "delayq_recovery_interval_seconds 30", "go_goroutines", "process_start_time_seconds",
		`delayq_orderclose_sweeps_total{result="skipped"} 0`, "delayq_orderclose_sweep_interval_seconds 60",
		`delayq_durable_waiting_jobs{topic="t",where="beyond"} 1`, `delayq_relay_pushed_total{kind="relayed",topic="t"} 0`,
		`delayq_durable_pushes_total{result="deferred",topic="t"} 0`, "delayq_relay_interval_seconds 1",
		`delayq_rate_limit_per_second{topic="t"} 500`, `delayq_rate_limited_claims_total{topic="t"} 1`,
		`delayq_periodic_enqueued_total{result="error",schedule="s"} 0`, `delayq_periodic_next_run_timestamp_seconds{schedule="s"} 60`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

package metrics_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/delayq/delayq/app/metrics"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/jobs/httptarget"
)

func TestTargetRequests(t *testing.T) {
	m := metrics.New(testenv.QuietLogger())
	m.InitTarget("hooks")
	for _, c := range []string{"2xx", "4xx", "5xx", "timeout", "error"} {
		if v := value(t, m, "delayq_target_requests_total", map[string]string{"topic": "hooks", "class": c}); v != 0 {
			t.Errorf("class %s starts at %v", c, v)
		}
	}
	m.TargetRequest("hooks", "2xx", 3*time.Millisecond)
	m.TargetRequest("hooks", "2xx", 4*time.Millisecond)
	m.TargetRequest("hooks", "timeout", 2*time.Second)
	if v := value(t, m, "delayq_target_requests_total", map[string]string{"topic": "hooks", "class": "2xx"}); v != 2 {
		t.Errorf("2xx = %v, want 2", v)
	}
	if v := value(t, m, "delayq_target_requests_total", map[string]string{"topic": "hooks", "class": "timeout"}); v != 1 {
		t.Errorf("timeout = %v, want 1", v)
	}
	h := labelled(t, family(t, m, "delayq_target_request_seconds"), topic("hooks")).GetHistogram()
	if h.GetSampleCount() != 3 || h.GetSampleSum() < 2 {
		t.Errorf("histogram count %d sum %v, want 3 and over 2s", h.GetSampleCount(), h.GetSampleSum())
	}
}

// Targets shows each target and its latest RecentTargetFailures failures,
// newest first.
func TestTargetFailures(t *testing.T) {
	m := metrics.New(testenv.QuietLogger())
	m.DescribeTarget("hooks", "POST", "https://api.example.com/hook")
	if got := m.Targets()["hooks"]; got.Method != "POST" || got.URL != "https://api.example.com/hook" || len(got.Failures) != 0 {
		t.Fatalf("a target without failures: %+v", got)
	}
	at := time.Unix(1767225600, 0)
	for i := range metrics.RecentTargetFailures + 3 {
		m.TargetFailure("hooks", httptarget.Failure{At: at.Add(time.Duration(i) * time.Second), JobID: fmt.Sprintf("j%d", i), Status: 500})
	}
	got := m.Targets()["hooks"].Failures
	if len(got) != metrics.RecentTargetFailures {
		t.Fatalf("%d failures kept, want %d", len(got), metrics.RecentTargetFailures)
	}
	for i, f := range got {
		if want := fmt.Sprintf("j%d", metrics.RecentTargetFailures+2-i); f.JobID != want {
			t.Errorf("failure %d is %s, want %s (newest first)", i, f.JobID, want)
		}
	}
}

// Package prometheus_test checks alerts.yml: with promtool (check rules,
// then the unit tests of alerts_test.yml) where it is installed, and its
// invariants everywhere (every alert the operator needs is there, with a
// severity, a summary and a description, and only names metrics that
// delayq exports).
package prometheus_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"go.yaml.in/yaml/v3"

	"github.com/delayq/delayq/app/metrics"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/recovery"
)

// promtool runs promtool with args in this directory, skipping the test
// when it is not installed.
func promtool(t *testing.T, args ...string) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed: scripts/test-services.sh installs Debian's prometheus package, which ships it (make test, as root)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
}

func TestPromtoolCheckRules(t *testing.T) {
	promtool(t, "check", "rules", "alerts.yml")
}

func TestPromtoolTestRules(t *testing.T) {
	promtool(t, "test", "rules", "alerts_test.yml")
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func loadRules(t *testing.T) []rule {
	t.Helper()
	b, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var rules []rule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

// The alerts the issue asks for are all there, each with a severity, a
// summary and a description, and each unit-tested in alerts_test.yml.
func TestAlertsAreComplete(t *testing.T) {
	want := []string{
		"DelayqOverdueBacklogHigh", "DelayqOverdueBacklogCritical", "DelayqCompletionsBehindEnqueues",
		"DelayqDeadLettersIncreasing", "DelayqStaleLedgerRows", "DelayqRedisDataLoss",
		"DelayqNoWorkerHeartbeat", "DelayqRecovererNotRunning",
		"DelayqOrderCloseJobsMissing", "DelayqOrderSweeperNotRunning",
		"DelayqRelayNotPassing", "DelayqDurableJobsRelayed",
		"DelayqPeriodicTicksFailing", "DelayqSchemaMigrationPending", "DelayqTopicUnconsumed",
	}
	tests, err := os.ReadFile("alerts_test.yml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range loadRules(t) {
		got = append(got, r.Alert)
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
		}
		if len(r.Annotations["summary"]) < 15 || len(r.Annotations["description"]) < 100 {
			t.Errorf("%s: summary %q and description %q: both are needed, the description telling what to look at",
				r.Alert, r.Annotations["summary"], r.Annotations["description"])
		}
		if !strings.Contains(string(tests), "alertname: "+r.Alert+"\n") {
			t.Errorf("%s has no promtool unit test in alerts_test.yml", r.Alert)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("alerts %v, want %v", got, want)
	}
}

// Every metric an expression names is one delayq exports.
func TestAlertsNameExportedMetrics(t *testing.T) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	m := metrics.New(log)
	m.InitTopic("t")
	m.Heartbeat("w", time.Now())
	if err := m.WatchState(metrics.StateConfig{Queue: oneTopic{}, Ledger: noRows{}}); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchRecoverer(func() recovery.Counters { return recovery.Counters{} }, "@every 30s"); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchSweeper("@every 1m"); err != nil {
		t.Fatal(err)
	}
	m.InitDurableTopic("t")
	if err := m.WatchRelay(noRelay{}, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	m.Periodic([]string{"s"})
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, f := range fams {
		exported[f.GetName()] = true
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			exported[f.GetName()+suffix] = true
		}
	}
	name := regexp.MustCompile(`\bdelayq_[a-z_]+\b`)
	for _, r := range loadRules(t) {
		for _, n := range name.FindAllString(r.Expr, -1) {
			if !exported[n] {
				t.Errorf("%s: expression names %s, which delayq does not export", r.Alert, n)
			}
		}
	}
}

type oneTopic struct{}

func (oneTopic) Topics(context.Context) ([]string, error) { return []string{"t"}, nil }
func (oneTopic) Stats(context.Context, string) (queue.Stats, error) {
	return queue.Stats{Topic: "t"}, nil
}

// Workers makes it a metrics.WorkersReader: the consumers gauges are
// exported.
func (oneTopic) Workers(context.Context) ([]queue.WorkerInfo, error) { return nil, nil }

type noRows struct{}

func (noRows) Count(context.Context) (int64, error)             { return 0, nil }
func (noRows) CountStale(context.Context, int64) (int64, error) { return 0, nil }
func (noRows) MigrationStatus(context.Context) (ledger.SchemaStatus, error) {
	return ledger.SchemaStatus{Version: 1, Latest: 1}, nil
}

type noRelay struct{}

func (noRelay) Totals() recovery.RelayTotals { return recovery.RelayTotals{} }
func (noRelay) Counts() (map[string]ledger.ScheduledCount, time.Time) {
	return map[string]ledger.ScheduledCount{"t": {}}, time.Time{}
}

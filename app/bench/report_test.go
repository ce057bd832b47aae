package bench_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/delayq/delayq/app/bench"
)

// The suite's enqueue and http targets are checked on the ratio to the
// same-minute baseline, the rate, the Redis CPU per job and the p99.
func TestSuiteTargets(t *testing.T) {
	find := func(scenario string, c, b int) bench.Case {
		for _, k := range bench.Suite() {
			if k.Scenario == scenario && k.Options.Concurrency == c && k.Options.Batch == b {
				return k
			}
		}
		t.Fatalf("no %s case with concurrency %d batch %d", scenario, c, b)
		return bench.Case{}
	}
	perJob := func(v float64) *float64 { return &v }
	baseline := &bench.Baseline{Rates: bench.Rates{Ping: 20_000, EvalSha: 10_000}, Concurrency: 1}
	limit := 0.6 * bench.RedisCPUPerJobBefore14
	for _, c := range []struct {
		name string
		k    bench.Case
		r    bench.Result
		want bool
	}{
		{"one goroutine at 0.95x", find("enqueue", 1, 1), bench.Result{Rate: 1, Ratio: 0.95, Baseline: baseline}, true},
		{"one goroutine at 0.85x", find("enqueue", 1, 1), bench.Result{Rate: 1e6, Ratio: 0.85, Baseline: baseline}, false},
		{"one goroutine, no baseline", find("enqueue", 1, 1), bench.Result{Rate: 1e6, Ratio: 2}, false},
		{"50 goroutines, fast and cheap", find("enqueue", 50, 1),
			bench.Result{Rate: 100_000, Usage: bench.Usage{RedisCPUPerJob: perJob(limit)}}, true},
		{"50 goroutines, fast but dear", find("enqueue", 50, 1),
			bench.Result{Rate: 150_000, Usage: bench.Usage{RedisCPUPerJob: perJob(limit * 1.01)}}, false},
		{"50 goroutines, cheap but slow", find("enqueue", 50, 1),
			bench.Result{Rate: 99_000, Usage: bench.Usage{RedisCPUPerJob: perJob(limit / 2)}}, false},
		{"50 goroutines, Redis CPU unknown", find("enqueue", 50, 1), bench.Result{Rate: 150_000}, false},
		{"batches of 100", find("enqueue", 8, 100), bench.Result{Rate: 250_000}, true},
		{"batches of 100, short", find("enqueue", 8, 100), bench.Result{Rate: 249_000}, false},
		{"http", find("http", 400, 0), bench.Result{Rate: 40_000, Latency: &bench.Latency{P99: 30}}, true},
		{"http, slow tail", find("http", 400, 0), bench.Result{Rate: 45_000, Latency: &bench.Latency{P99: 31}}, false},
		{"http, short", find("http", 400, 0), bench.Result{Rate: 39_000, Latency: &bench.Latency{P99: 10}}, false},
	} {
		if got := c.k.Target.Met(c.r); got != c.want {
			t.Errorf("%s: target %q met = %v, want %v", c.name, c.k.Target.Text, got, c.want)
		}
	}
	if bench.RedisCPUPerJobBefore14 <= 0 {
		t.Errorf("RedisCPUPerJobBefore14 = %v: want the measured figure", bench.RedisCPUPerJobBefore14)
	}
}

// The tables show the ratio, the Redis cost per job and the baselines.
func TestWriteResultsBaseline(t *testing.T) {
	perJob := 8.25
	r := bench.Result{
		Scenario: "enqueue", Params: "jobs=10 concurrency=50 batch=1", Seconds: 1, Rate: 30_000, Unit: "jobs/s",
		CallsPerSec: 30_000, Ratio: 0.5,
		Baseline: &bench.Baseline{
			Rates: bench.Rates{Ping: 20_000, EvalSha: 12_000, EvalShaC: 60_000}, Concurrency: 50,
			Before: bench.Rates{Ping: 19_000, EvalSha: 11_000, EvalShaC: 59_000},
			After:  bench.Rates{Ping: 21_000, EvalSha: 13_000, EvalShaC: 61_000},
		},
		Usage: bench.Usage{RedisCPUPerJob: &perJob, RedisCommands: map[string]bench.CommandStats{"evalsha": {Calls: 4, Usec: 50, UsecPerCall: 12.5}}},
	}
	var out bytes.Buffer
	if err := bench.WriteResults(&out, []bench.Result{r}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"RATIO", "0.50x", "REDIS µs/JOB", "8.25", "EVALSHA µs/CALL", "12.5",
		"C=50: 60,000 [59,000 / 61,000]", "12,000 [11,000 / 13,000]", "20,000 [19,000 / 21,000]"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// The costs table shows each run's figures per job next to its rate, "-"
// for what the backends did not count, and the JSON has the stable names.
func TestWriteResultsCosts(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	n := func(v int64) *int64 { return &v }
	mysql := bench.Result{
		Scenario: "drain", Params: "jobs=50000 concurrency=50 claim-batch=100", Seconds: 2, Rate: 25_000, Unit: "jobs/s",
		Costs: &bench.Costs{Jobs: 50_000, LedgerCommits: 4_125, LedgerCommitsPer1k: f(82.5), ServerCommits: n(4_200), ServerCommitsPer1k: f(84),
			ServerFsyncsPer1k: f(71.25), RedisCommandsPerJob: f(8.45), RedisScriptCallsPerJob: f(0.081), ProcessCPUUsPerJob: f(92.1),
			RedisCPUUsPerJob: f(28.1), SQLCPUUsPerJob: f(100)},
	}
	sqlite := bench.Result{
		Scenario: "enqueue", Params: "jobs=10 concurrency=1 batch=1 durable", Seconds: 1, Rate: 10, Unit: "jobs/s",
		Costs: &bench.Costs{Jobs: 10, LedgerCommits: 10, LedgerCommitsPer1k: f(1000), ProcessCPUUsPerJob: f(55)},
	}
	idle := bench.Result{Scenario: "idle", Params: "duration=10s concurrency=10", Rate: 0.07, Unit: "%core", Costs: &bench.Costs{Seconds: 10}}
	var out bytes.Buffer
	if err := bench.WriteResults(&out, []bench.Result{mysql, sqlite, idle}); err != nil {
		t.Fatal(err)
	}
	var costs []string
	inCosts := false
	for _, line := range strings.Split(out.String(), "\n") {
		inCosts = inCosts && line != "" || strings.Contains(line, "LEDGER COMMITS/1k JOBS")
		if inCosts {
			costs = append(costs, strings.Join(strings.Fields(line), " "))
		}
	}
	want := []string{
		"SCENARIO PARAMS RATE LEDGER COMMITS/1k JOBS SERVER COMMITS/1k FSYNCS/1k REDIS CMDS/JOB SCRIPT CALLS/JOB PROCESS CPU µs/JOB REDIS CPU µs/JOB SQL CPU µs/JOB",
		"drain jobs=50000 concurrency=50 claim-batch=100 25,000 jobs/s 82.5 84.0 71.2 8.45 0.081 92.1 28.1 100.0",
		"enqueue jobs=10 concurrency=1 batch=1 durable 10 jobs/s 1000.0 - - - - 55.0 - -",
	}
	if !slices.Equal(costs, want) {
		t.Errorf("costs table:\n%s\nwant:\n%s\n(whole output:\n%s)", strings.Join(costs, "\n"), strings.Join(want, "\n"), out.String())
	}

	b, err := json.Marshal(sqlite.Costs)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"ledger_commits_per_1k_jobs":1000`, `"server_commits_per_1k_jobs":null`, `"redis_commands_per_job":null`,
		`"process_cpu_us_per_job":55`, `"server_fsyncs_per_1k_jobs":null`, `"sql_server_cpu_us_per_job":null`} {
		if !strings.Contains(string(b), field) {
			t.Errorf("JSON %s lacks %s", b, field)
		}
	}
}

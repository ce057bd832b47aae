package bench_test

import (
	"bytes"
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

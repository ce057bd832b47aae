package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/app/bench"
	"github.com/delayq/delayq/internal/testenv"
)

// runCLI runs the command line with args and returns its exit code and
// output.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code := Main(ctx, args, &out, &errOut, "test")
	return code, out.String(), errOut.String()
}

// bench on the embedded backends (the default configuration) and on real
// Redis and MariaDB: a JSON report with the machine and every job handled
// once.
func TestBenchCommand(t *testing.T) {
	for name, backendArgs := range map[string][]string{
		"embedded": nil,
		"real":     {"--redis", testenv.DefaultRedisAddr, "--sql-dsn", testenv.MySQLDSN(t)},
	} {
		t.Run(name, func(t *testing.T) {
			for _, sub := range [][]string{
				{"enqueue", "-n", "300", "-c", "3", "-b", "10"},
				{"drain", "-n", "300"},
				{"lateness", "-n", "200", "--window", "500ms", "--lead", "500ms"},
				{"drain", "-n", "200", "--target"},
				{"drain", "-n", "200", "--pool"},
				{"drain", "-n", "200", "--priorities"},
			} {
				args := append(append([]string{"bench"}, sub...), "--json", "--baseline-for", "100ms")
				code, out, errOut := runCLI(t, append(args, backendArgs...)...)
				if code != ExitOK {
					t.Fatalf("%v: exit %d\nstdout: %s\nstderr: %s", sub, code, out, errOut)
				}
				var rep bench.Report
				if err := json.Unmarshal([]byte(out), &rep); err != nil {
					t.Fatalf("%v: not JSON: %v\n%s", sub, err, out)
				}
				if len(rep.Results) != 1 || rep.Machine.CPUs < 1 || rep.Machine.Redis == "" || rep.Machine.SQL == "" {
					t.Fatalf("%v: report %+v", sub, rep)
				}
				r := rep.Results[0]
				if r.Scenario != sub[0] || r.Jobs == 0 || r.Handled != r.Jobs || r.Missing != 0 || r.Duplicates != 0 {
					t.Errorf("%v: result %+v", sub, r)
				}
				if target := sub[len(sub)-1] == "--target"; target != (r.NoopBaseline != nil && strings.HasSuffix(r.Params, " target")) {
					t.Errorf("%v: params %q, no-op baseline %+v: want both iff --target", sub, r.Params, r.NoopBaseline)
				}
				if b := r.Baseline; (sub[0] == "enqueue") != (b != nil && b.EvalSha > 0 && b.EvalShaC > 0 && r.Ratio > 0) {
					t.Errorf("%v: baseline %+v, ratio %v: want rates and a ratio for enqueue only", sub, b, r.Ratio)
				}
				// The costs per job, under their stable names; the server's
				// commits are null on SQLite.
				if c := r.Costs; c == nil || c.Jobs != r.Jobs || c.LedgerCommitsPer1k == nil || c.ProcessCPUUsPerJob == nil {
					t.Errorf("%v: costs %+v: want per-job figures for %d jobs", sub, c, r.Jobs)
				}
				serverNull := strings.Contains(out, `"server_commits_per_1k_jobs": null`)
				for _, field := range []string{`"ledger_commits_per_1k_jobs": `, `"server_commits_per_1k_jobs": `, `"redis_commands_per_job": `, `"process_cpu_us_per_job": `} {
					if !strings.Contains(out, field) {
						t.Errorf("%v: JSON lacks %s", sub, field)
					}
				}
				if serverNull != (name == "embedded") {
					t.Errorf("%v: server_commits_per_1k_jobs null = %v, want null on SQLite only", sub, serverNull)
				}
			}
		})
	}
}

// Without --json: the machine header, then the tables.
func TestBenchTable(t *testing.T) {
	code, out, errOut := runCLI(t, "bench", "enqueue", "-n", "100", "--baseline-for", "100ms")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"delayq bench,", "Redis:  miniredis", "Ledger: SQLite", "SCENARIO", "enqueue", "jobs=100 concurrency=1 batch=1", "PROCESS CPU %", "RATIO", "EMPTY EVALSHA/s, 1 conn",
		"SQL CPU %", "LEDGER COMMITS/1k JOBS", "SERVER COMMITS/1k", "PROCESS CPU µs/JOB"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// --durable on real Redis and MariaDB: the run says it is durable and what
// the server's commits are, in the table and in JSON; and the horizon
// scenario, small.
func TestBenchDurable(t *testing.T) {
	backendArgs := []string{"--redis", testenv.DefaultRedisAddr, "--sql-dsn", testenv.MySQLDSN(t)}
	code, out, errOut := runCLI(t, append([]string{"bench", "enqueue", "--durable", "-n", "200", "-c", "4", "--baseline-for", "50ms"}, backendArgs...)...)
	if code != ExitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	for _, want := range []string{"batch=1 durable", "REDIS-TOPIC ENQUEUE", "durable topic: every enqueue commits", "innodb_flush_log_at_trx_commit="} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = runCLI(t, append([]string{"bench", "horizon", "-n", "2400", "-b", "200", "--relay-for", "200ms", "--json"}, backendArgs...)...)
	if code != ExitOK {
		t.Fatalf("horizon: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("horizon: not JSON: %v\n%s", err, out)
	}
	if len(rep.Results) != 1 || rep.Results[0].Horizon == nil || !rep.Results[0].Durable || rep.Results[0].Horizon.CompareJobs != 2400 {
		t.Errorf("horizon report: %+v", rep.Results)
	}

	// The durable idle run: the relay runs beside the worker, and the
	// servers' CPU is there (the SQL server's only when it is local).
	code, out, errOut = runCLI(t, append([]string{"bench", "idle", "--durable", "-d", "300ms", "--json"}, backendArgs...)...)
	if code != ExitOK {
		t.Fatalf("idle: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	rep = bench.Report{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("idle: not JSON: %v\n%s", err, out)
	}
	if len(rep.Results) != 1 || !rep.Results[0].Durable || rep.Results[0].Usage.RedisCPU == nil || rep.Results[0].Costs == nil ||
		!strings.Contains(strings.Join(rep.Results[0].Notes, "\n"), "the relay made") {
		t.Errorf("idle report: %+v", rep.Results)
	}
}

// Bad flags are usage errors (exit 2), before anything runs.
func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "enqueue", "-n", "0"},
		{"bench", "enqueue", "--batch", "5000"},
		{"bench", "lateness", "--preset", "fast"},
		{"bench", "drain", "--no-such-flag"},
		{"bench", "enqueue", "extra-arg"},
		{"bench", "enqueue", "--baseline-for", "0s"},
		{"bench", "all", "--baseline-for", "-1s"},
		{"bench", "idle", "--durable", "-d", "0s"},
		{"bench", "enqueue", "--target"},
		{"bench", "drain", "--target", "--durable"},
		{"bench", "lateness", "--target", "-c", "0"},
		{"bench", "recovery", "--durable"},
		{"bench", "horizon", "--horizon", "0s"},
		{"bench", "horizon", "-n", "100", "--compare-jobs", "200"},
	} {
		if code, _, errOut := runCLI(t, args...); code != ExitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, ExitUsage, errOut)
		}
	}
}

// The classic preset: 50,000 jobs with a 1 s delay, unless flags say
// otherwise.
func TestLatenessPreset(t *testing.T) {
	a := &app{}
	cmd := a.benchScenarioCmd(&benchFlags{}, mustScenario(t, "lateness"))
	if err := cmd.ParseFlags([]string{"--preset", "classic", "--jobs", "10"}); err != nil {
		t.Fatal(err)
	}
	o := bench.Options{Jobs: 10}
	if err := latenessPreset(cmd, "classic", &o); err != nil {
		t.Fatal(err)
	}
	if o.Jobs != 10 || o.Delay != time.Second {
		t.Errorf("preset with --jobs 10: %+v; want 10 jobs, 1s delay", o)
	}
}

func mustScenario(t *testing.T, name string) bench.Scenario {
	t.Helper()
	sc, ok := bench.Lookup(name)
	if !ok {
		t.Fatalf("no scenario %s", name)
	}
	return sc
}

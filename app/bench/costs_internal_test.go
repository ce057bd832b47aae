package bench

import (
	"strings"
	"testing"
	"time"
)

// The costs are the counters' deltas over the window, per job (commits per
// 1,000): the probes' own INFO is not a command of the run's, script calls
// are counted apart, and a counter a backend does not have stays unknown.
func TestCostsBetween(t *testing.T) {
	now := time.Now()
	a := probe{at: now, cpu: 2 * time.Second, redisCPU: 10, commits: 500, fsyncs: 300, ledgerCommits: 7, sqlCPU: time.Second,
		cmds: map[string]CommandStats{"evalsha": {Calls: 10}, "info": {Calls: 4}, "zadd": {Calls: 100}}}
	b := probe{at: now.Add(2 * time.Second), cpu: 2*time.Second + 400*time.Millisecond, redisCPU: 10.1, commits: 560, fsyncs: 340,
		ledgerCommits: 57, sqlCPU: 1300 * time.Millisecond,
		cmds: map[string]CommandStats{"evalsha": {Calls: 60}, "eval": {Calls: 2}, "info": {Calls: 6}, "zadd": {Calls: 1100}, "hset": {Calls: 200}}}
	c := costsBetween(a, b, 1000)
	eq := func(name string, got *float64, want float64) {
		t.Helper()
		if got == nil || !closeTo(*got, want) {
			t.Errorf("%s = %v, want %v", name, deref(got), want)
		}
	}
	if c.Jobs != 1000 || !closeTo(c.Seconds, 2) || c.LedgerCommits != 50 || c.ProcessCPUUs != 400_000 {
		t.Errorf("costs %+v: want 1,000 jobs over 2 s, 50 ledger commits, 400,000 µs of CPU", c)
	}
	eq("ledger commits per 1k", c.LedgerCommitsPer1k, 50)
	eq("server commits per 1k", c.ServerCommitsPer1k, 60)
	eq("fsyncs per 1k", c.ServerFsyncsPer1k, 40)
	eq("Redis commands per job", c.RedisCommandsPerJob, (50+2+1000+200)/1000.0)
	eq("script calls per job", c.RedisScriptCallsPerJob, 52/1000.0)
	eq("process CPU µs per job", c.ProcessCPUUsPerJob, 400)
	eq("Redis CPU µs per job", c.RedisCPUUsPerJob, 100)
	eq("SQL CPU µs per job", c.SQLCPUUsPerJob, 300)

	// SQLite, miniredis, a remote SQL server: unknown, not zero.
	a.commits, a.fsyncs, a.redisCPU, a.sqlCPU, a.cmds = -1, -1, -1, -1, nil
	c = costsBetween(a, b, 1000)
	if c.ServerCommits != nil || c.ServerCommitsPer1k != nil || c.ServerFsyncsPer1k != nil || c.RedisCommandsPerJob != nil ||
		c.RedisScriptCallsPerJob != nil || c.RedisCPUUsPerJob != nil || c.SQLCPUUsPerJob != nil {
		t.Errorf("unknown counters gave figures: %+v", c)
	}
	eq("ledger commits per 1k, the rest unknown", c.LedgerCommitsPer1k, 50)

	// No jobs (idle): the counts, no per-job figure, and a note per second.
	c = costsBetween(a, b, 0)
	if c.LedgerCommits != 50 || c.LedgerCommitsPer1k != nil || c.ProcessCPUUsPerJob != nil {
		t.Errorf("idle costs %+v: want the counts without per-job figures", c)
	}
	if n := perSecondNote(c); !strings.Contains(n, "ledger commits 25.0/s") || !strings.Contains(n, "server commits (Handler_commit) -") {
		t.Errorf("note %q: want 25 ledger commits a second and no server figure", n)
	}
}

func closeTo(a, b float64) bool { d := a - b; return d < 1e-9 && d > -1e-9 }

func deref(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}

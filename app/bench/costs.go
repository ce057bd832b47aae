package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Costs is what a measured phase's jobs cost, counted rather than timed:
// commits, Redis commands and CPU time per job stay put when the machine's
// speed changes from minute to minute, where jobs/s does not. The window
// is the measured phase (enqueue, http: the enqueue calls), or for a worker
// (drain, lateness) from the worker's start, or from the start of the
// enqueue for lateness, to its stop, so that the completions it flushes
// last count too.
//
// Each count is the delta over the window; a per-job figure is the count
// over Jobs (per 1,000 jobs for commits), nil when the count is unknown
// (no MySQL server, a Redis without INFO) or there are no jobs (idle).
// Server-wide counts (ServerCommits, ServerFsyncs, the Redis ones and the
// servers' CPU) include other clients' work on a shared server.
type Costs struct {
	// Jobs is what the per-job figures divide by: the jobs accepted
	// (enqueue, http) or handled (drain, lateness); 0 for idle.
	Jobs    int     `json:"jobs"`
	Seconds float64 `json:"seconds"`

	// LedgerCommits is the write transactions the run's ledger committed
	// itself (ledger.WriteStats: an autocommitted write statement, or a
	// transaction): the worker's Record and Complete, a durable enqueue's
	// Schedule. What a durable database pays an fsync for.
	LedgerCommits      int64    `json:"ledger_commits"`
	LedgerCommitsPer1k *float64 `json:"ledger_commits_per_1k_jobs"`
	// ServerCommits is MySQL/MariaDB's Handler_commit, the cross-check of
	// LedgerCommits: it also counts reads of InnoDB tables in autocommit
	// mode and each statement of a multi-statement transaction, so it is
	// at least LedgerCommits. ServerFsyncs is Innodb_os_log_fsyncs (or
	// Innodb_data_fsyncs, MariaDB 10.8+). Nil on SQLite.
	ServerCommits      *int64   `json:"server_commits"`
	ServerCommitsPer1k *float64 `json:"server_commits_per_1k_jobs"`
	ServerFsyncs       *int64   `json:"server_fsyncs"`
	ServerFsyncsPer1k  *float64 `json:"server_fsyncs_per_1k_jobs"`
	// RedisCommands is every command INFO commandstats counted, those the
	// scripts ran included, the probes' own INFO excluded; RedisScriptCalls
	// the script calls among them (EVALSHA, EVAL, FCALL and their _RO
	// forms): the round trips that do the work. Nil when Redis does not
	// say (miniredis); on a Redis Cluster, the sum of its masters'.
	RedisCommands          *int64   `json:"redis_commands"`
	RedisCommandsPerJob    *float64 `json:"redis_commands_per_job"`
	RedisScriptCalls       *int64   `json:"redis_script_calls"`
	RedisScriptCallsPerJob *float64 `json:"redis_script_calls_per_job"`
	// ProcessCPUUs is this process's CPU time, in µs: the worker, the
	// bench's producers and handlers (a few atomic operations per job),
	// and an embedded Redis when there is one.
	ProcessCPUUs       int64    `json:"process_cpu_us"`
	ProcessCPUUsPerJob *float64 `json:"process_cpu_us_per_job"`
	// RedisCPUUs is redis-server's CPU time (INFO cpu), SQLCPUUs the SQL
	// server process's (/proc/<pid>/stat, in 10 ms ticks; a local MySQL or
	// MariaDB only).
	RedisCPUUs       *int64   `json:"redis_cpu_us"`
	RedisCPUUsPerJob *float64 `json:"redis_cpu_us_per_job"`
	SQLCPUUs         *int64   `json:"sql_server_cpu_us"`
	SQLCPUUsPerJob   *float64 `json:"sql_server_cpu_us_per_job"`
	// RedisNodes are the same Redis figures per master of a Redis
	// Cluster, by address (nil for one server): what each node does per
	// job, and its share of the commands. A master that appeared during
	// the window (a failover) is left out.
	RedisNodes []NodeCosts `json:"redis_nodes,omitempty"`
	// SQLShards are each ledger shard's part of the window, shard order
	// (nil for a ledger of one shard, Env.Shards).
	SQLShards []ShardCosts `json:"sql_shards,omitempty"`
}

// ShardCosts is one ledger shard's part of a window's work.
type ShardCosts struct {
	Shard int `json:"shard"`
	// Commits are the shard's ledger's own (ledger.WriteStats), per 1,000
	// jobs of the window (all of them, wherever their rows live).
	Commits      int64    `json:"ledger_commits"`
	CommitsPer1k *float64 `json:"ledger_commits_per_1k_jobs"`
	// RowsInserted is the shard's SQL server's own count of row inserts
	// (Handler_write, server-wide: the ledger's rows and an upsert's, the
	// history's and dead letters', and any other insert the server made
	// meanwhile, its internal temporary tables' included; MariaDB 10.x has
	// no Innodb_rows_inserted), and RowsShare its share of all the
	// shards' (0-1); nil when the server does not say.
	RowsInserted *int64   `json:"rows_inserted"`
	RowsShare    *float64 `json:"rows_share"`
}

// NodeCosts is one Redis Cluster master's share of a window's work.
type NodeCosts struct {
	Addr     string  `json:"addr"`
	Commands int64   `json:"commands"`
	Share    float64 `json:"commands_share"` // of all the masters' commands, 0-1
	// CommandsPerJob and CPUUsPerJob divide by every job of the window,
	// wherever its keys live.
	CommandsPerJob *float64 `json:"commands_per_job"`
	CPUUs          int64    `json:"cpu_us"`
	CPUUsPerJob    *float64 `json:"cpu_us_per_job"`
}

// costsBetween counts from a to b for jobs jobs.
func costsBetween(a, b probe, jobs int) *Costs {
	c := &Costs{Jobs: jobs, Seconds: b.at.Sub(a.at).Seconds()}
	per := func(n int64, scale float64) *float64 {
		if jobs <= 0 {
			return nil
		}
		v := float64(n) * scale / float64(jobs)
		return &v
	}
	known := func(a, b int64) *int64 {
		if a < 0 || b < 0 {
			return nil
		}
		d := b - a
		return &d
	}
	perKnown := func(n *int64, scale float64) *float64 {
		if n == nil {
			return nil
		}
		return per(*n, scale)
	}

	c.LedgerCommits = b.ledgerCommits - a.ledgerCommits
	if a.ledgerCommits >= 0 && b.ledgerCommits >= 0 {
		c.LedgerCommitsPer1k = per(c.LedgerCommits, 1000)
	}
	c.ServerCommits = known(a.commits, b.commits)
	c.ServerCommitsPer1k = perKnown(c.ServerCommits, 1000)
	c.ServerFsyncs = known(a.fsyncs, b.fsyncs)
	c.ServerFsyncsPer1k = perKnown(c.ServerFsyncs, 1000)

	if a.cmds != nil && b.cmds != nil {
		var all, scripts int64
		for name, sb := range b.cmds {
			d := sb.Calls - a.cmds[name].Calls
			if name == "info" || d <= 0 { // the probes' own, or not called (or the stats were reset)
				continue
			}
			all += d
			if isScript(name) {
				scripts += d
			}
		}
		c.RedisCommands, c.RedisScriptCalls = &all, &scripts
		c.RedisCommandsPerJob = per(all, 1)
		c.RedisScriptCallsPerJob = per(scripts, 1)
	}

	c.ProcessCPUUs = (b.cpu - a.cpu).Microseconds()
	c.ProcessCPUUsPerJob = per(c.ProcessCPUUs, 1)
	if a.redisCPU >= 0 && b.redisCPU >= 0 {
		us := int64(math.Round((b.redisCPU - a.redisCPU) * 1e6))
		c.RedisCPUUs = &us
		c.RedisCPUUsPerJob = per(us, 1)
	}
	if a.sqlCPU >= 0 && b.sqlCPU >= 0 {
		us := (b.sqlCPU - a.sqlCPU).Microseconds()
		c.SQLCPUUs = &us
		c.SQLCPUUsPerJob = per(us, 1)
	}
	c.RedisNodes = nodeCosts(a, b, per)
	c.SQLShards = shardCosts(a, b, per)
	return c
}

// shardCosts is each ledger shard's part of the window.
func shardCosts(a, b probe, per func(n int64, scale float64) *float64) []ShardCosts {
	if len(a.shards) == 0 || len(a.shards) != len(b.shards) {
		return nil
	}
	out := make([]ShardCosts, len(b.shards))
	var total int64
	known := true
	for i := range b.shards {
		sa, sb := a.shards[i], b.shards[i]
		out[i] = ShardCosts{Shard: i, Commits: sb.commits - sa.commits}
		out[i].CommitsPer1k = per(out[i].Commits, 1000)
		if sa.rowsInserted < 0 || sb.rowsInserted < 0 {
			known = false
			continue
		}
		n := sb.rowsInserted - sa.rowsInserted
		out[i].RowsInserted = &n
		total += n
	}
	for i := range out {
		if known && total > 0 {
			v := float64(*out[i].RowsInserted) / float64(total)
			out[i].RowsShare = &v
		}
	}
	return out
}

// nodeCosts is each master's part of the window, sorted by address.
func nodeCosts(a, b probe, per func(n int64, scale float64) *float64) []NodeCosts {
	if a.nodes == nil || b.nodes == nil {
		return nil
	}
	var out []NodeCosts
	var total int64
	for addr, nb := range b.nodes {
		na, ok := a.nodes[addr]
		if !ok {
			continue
		}
		n := NodeCosts{Addr: addr, Commands: max(nb.calls-na.calls, 0), CPUUs: int64(math.Round((nb.cpu - na.cpu) * 1e6))}
		n.CommandsPerJob, n.CPUUsPerJob = per(n.Commands, 1), per(n.CPUUs, 1)
		total += n.Commands
		out = append(out, n)
	}
	for i := range out {
		if total > 0 {
			out[i].Share = float64(out[i].Commands) / float64(total)
		}
	}
	slices.SortFunc(out, func(x, y NodeCosts) int { return strings.Compare(x.Addr, y.Addr) })
	return out
}

// perSecondNote sums up costs with no jobs (idle) per second, for a note.
func perSecondNote(c *Costs) string {
	if c == nil || c.Seconds <= 0 {
		return ""
	}
	rate := func(n int64) string { return fmt.Sprintf("%.1f/s", float64(n)/c.Seconds) }
	optRate := func(n *int64) string {
		if n == nil {
			return "-"
		}
		return rate(*n)
	}
	return fmt.Sprintf("over %.1f s: ledger commits %s, server commits (Handler_commit) %s, fsyncs %s, Redis commands %s (script calls %s)",
		c.Seconds, rate(c.LedgerCommits), optRate(c.ServerCommits), optRate(c.ServerFsyncs), optRate(c.RedisCommands), optRate(c.RedisScriptCalls))
}

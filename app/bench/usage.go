package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
)

// Usage is what a measured phase cost the machine.
type Usage struct {
	// ProcessCPU is this process's CPU time (bench, worker, API server, and
	// the embedded Redis when there is one) in % of one core.
	ProcessCPU float64 `json:"process_cpu_pct"`
	// HostCPU is the whole host's busy CPU time in % of one core (up to
	// 100 × CPUs): this process, Redis and MySQL when they are local, and
	// anything else running. Linux only; nil elsewhere.
	HostCPU *float64 `json:"host_cpu_pct,omitempty"`
	// RedisCPU is redis-server's CPU time in % of one core (INFO cpu: the
	// whole server, other clients' work included); nil when Redis does not
	// say (miniredis); on a Redis Cluster, the sum of its masters'.
	RedisCPU *float64 `json:"redis_cpu_pct,omitempty"`
	// SQLCommits and SQLFsyncs are the MySQL server's statement commits
	// (Handler_commit) and InnoDB fsyncs (Innodb_os_log_fsyncs, or on
	// MariaDB 10.8 and later, which no longer has it, Innodb_data_fsyncs)
	// per second, server-wide; nil on SQLite.
	SQLCommits *float64 `json:"sql_commits_per_s,omitempty"`
	SQLFsyncs  *float64 `json:"sql_fsyncs_per_s,omitempty"`
	// SQLCPU is the SQL server process's CPU time in % of one core, read
	// from /proc/<pid>/stat of the process listening on the DSN's address
	// (10 ms ticks; all its threads): a local MySQL or MariaDB on Linux
	// only, nil otherwise. Server-wide, like RedisCPU.
	SQLCPU *float64 `json:"sql_server_cpu_pct,omitempty"`
	// RedisCPUPerJob is RedisCPU spread over the accepted jobs, in µs of
	// redis-server CPU per job (enqueue, http); nil when RedisCPU is.
	RedisCPUPerJob *float64 `json:"redis_cpu_us_per_job,omitempty"`
	// RedisCommands is what INFO commandstats counted in the phase, by
	// command ("evalsha": the scripts' calls and the µs they ran in
	// Redis), server-wide like RedisCPU; the commands a script runs count
	// too, under their own names; commands not called are left out. Nil
	// when Redis does not say.
	RedisCommands map[string]CommandStats `json:"redis_commands,omitempty"`
}

// CommandStats is one command's share of INFO commandstats over a phase.
type CommandStats struct {
	Calls       int64   `json:"calls"`
	Usec        int64   `json:"usec"`
	UsecPerCall float64 `json:"usec_per_call"`
}

// setPerJob sets RedisCPUPerJob for jobs accepted over seconds.
func (u *Usage) setPerJob(jobs int, seconds float64) {
	if u.RedisCPU == nil || jobs <= 0 {
		return
	}
	v := *u.RedisCPU / 100 * seconds / float64(jobs) * 1e6
	u.RedisCPUPerJob = &v
}

// probe is one reading of the counters Usage is computed from.
type probe struct {
	at       time.Time
	cpu      time.Duration // this process
	hostBusy time.Duration // the host, all CPUs; <0 when unknown
	redisCPU float64       // seconds; <0 when unknown
	commits  int64         // <0 when unknown
	fsyncs   int64
	cmds     map[string]CommandStats // INFO commandstats totals; nil when unknown
	// ledgerCommits is the sandbox's ledger's commits so far
	// (ledger.WriteStats), sqlCPU the SQL server process's CPU time; <0
	// when unknown.
	ledgerCommits int64
	sqlCPU        time.Duration
	// nodes are the Redis Cluster masters' own readings, by address (nil
	// for one server); redisCPU and cmds are their sums.
	nodes map[string]nodeReading
	// shards are the ledger shards' own readings, shard order (nil for a
	// ledger of one shard); ledgerCommits is their sum.
	shards []shardReading
}

// shardReading is one ledger shard's commits (its ledger's own
// WriteStats) and its SQL server's Handler_write (<0 when
// unknown).
type shardReading struct {
	commits, rowsInserted int64
}

// nodeReading is one Redis server's CPU time (seconds) and the commands it
// counted (INFO commandstats, its INFO and CLUSTER calls left out: the
// probes' and the cluster client's own).
type nodeReading struct {
	cpu   float64
	calls int64
}

// probe takes one reading, the sandbox's ledger's commits and its SQL
// server's CPU included.
func (s *sandbox) probe(ctx context.Context) probe {
	p := readProbe(ctx, s.env.Redis, s.env.DB)
	p.ledgerCommits = 0
	for _, led := range s.leds {
		p.ledgerCommits += led.WriteStats().Commits
	}
	if len(s.leds) > 1 {
		for _, led := range s.leds {
			p.shards = append(p.shards, shardReading{commits: led.WriteStats().Commits, rowsInserted: rowsInserted(ctx, led.DB())})
		}
	}
	p.sqlCPU = s.sqlProc.cpu()
	return p
}

// rowsInserted is db's server's Handler_write, -1 when it does
// not say (SQLite).
func rowsInserted(ctx context.Context, db *gorm.DB) int64 {
	if db.Dialector.Name() != "mysql" {
		return -1
	}
	var rows []variableRow
	if err := db.WithContext(ctx).Raw("SHOW GLOBAL STATUS WHERE Variable_name = 'Handler_write'").Scan(&rows).Error; err != nil || len(rows) != 1 {
		return -1
	}
	v, err := strconv.ParseInt(rows[0].Value, 10, 64)
	if err != nil {
		return -1
	}
	return v
}

// read takes one reading; counters a backend does not offer are marked
// unknown rather than failing the run.
func readProbe(ctx context.Context, rdb redis.UniversalClient, db *gorm.DB) probe {
	p := probe{at: time.Now(), redisCPU: -1, commits: -1, fsyncs: -1, ledgerCommits: -1, sqlCPU: -1}
	p.cpu, _ = processCPU()
	p.hostBusy = hostBusy()
	switch c := rdb.(type) {
	case *redis.Client:
		p.redisCPU, p.cmds = readRedis(ctx, c)
	case *redis.ClusterClient:
		readCluster(ctx, c, &p)
	}
	if db.Dialector.Name() == "mysql" {
		var rows []variableRow
		if err := db.WithContext(ctx).Raw("SHOW GLOBAL STATUS WHERE Variable_name IN " +
			"('Handler_commit', 'Innodb_os_log_fsyncs', 'Innodb_data_fsyncs')").Scan(&rows).Error; err == nil {
			logFsyncs, dataFsyncs := int64(-1), int64(-1)
			for _, r := range rows {
				v, err := strconv.ParseInt(r.Value, 10, 64)
				if err != nil {
					continue
				}
				switch r.Name {
				case "Handler_commit":
					p.commits = v
				case "Innodb_os_log_fsyncs":
					logFsyncs = v
				case "Innodb_data_fsyncs":
					dataFsyncs = v
				}
			}
			p.fsyncs = logFsyncs
			if p.fsyncs < 0 {
				p.fsyncs = dataFsyncs
			}
		}
	}
	return p
}

// readRedis reads one server's CPU time (seconds; -1 when it does not
// say) and command counts (nil when it does not say).
func readRedis(ctx context.Context, c *redis.Client) (cpu float64, cmds map[string]CommandStats) {
	cpu = -1
	if info, err := c.Info(ctx, "cpu").Result(); err == nil {
		f := infoFields(info)
		sys, err1 := strconv.ParseFloat(f["used_cpu_sys"], 64)
		usr, err2 := strconv.ParseFloat(f["used_cpu_user"], 64)
		if err1 == nil && err2 == nil {
			cpu = sys + usr
		}
	}
	if info, err := c.Info(ctx, "commandstats").Result(); err == nil {
		cmds = commandStats(info)
	}
	return cpu, cmds
}

// readCluster reads every master of a Redis Cluster into p: each one's
// own figures, and their sums. A master that does not answer makes the
// sums unknown.
func readCluster(ctx context.Context, c *redis.ClusterClient, p *probe) {
	var mu sync.Mutex
	nodes := map[string]nodeReading{}
	cmds := map[string]CommandStats{}
	complete := true
	err := c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		cpu, st := readRedis(ctx, node)
		mu.Lock()
		defer mu.Unlock()
		if cpu < 0 || st == nil {
			complete = false
			return nil
		}
		var calls int64
		for name, s := range st {
			sum := cmds[name]
			sum.Calls += s.Calls
			sum.Usec += s.Usec
			cmds[name] = sum
			if name != "info" && name != "cluster" {
				calls += s.Calls
			}
		}
		nodes[node.Options().Addr] = nodeReading{cpu: cpu, calls: calls}
		return nil
	})
	if err != nil || !complete || len(nodes) == 0 {
		return
	}
	p.nodes, p.cmds, p.redisCPU = nodes, cmds, 0
	for _, n := range nodes {
		p.redisCPU += n.cpu
	}
}

// usageBetween computes the usage from a to b.
func usageBetween(a, b probe) Usage {
	wall := b.at.Sub(a.at).Seconds()
	if wall <= 0 {
		return Usage{}
	}
	u := Usage{ProcessCPU: 100 * (b.cpu - a.cpu).Seconds() / wall}
	if a.hostBusy >= 0 && b.hostBusy >= 0 {
		v := 100 * (b.hostBusy - a.hostBusy).Seconds() / wall
		u.HostCPU = &v
	}
	if a.redisCPU >= 0 && b.redisCPU >= 0 {
		v := 100 * (b.redisCPU - a.redisCPU) / wall
		u.RedisCPU = &v
	}
	if a.commits >= 0 && b.commits >= 0 {
		v := float64(b.commits-a.commits) / wall
		u.SQLCommits = &v
	}
	if a.fsyncs >= 0 && b.fsyncs >= 0 {
		v := float64(b.fsyncs-a.fsyncs) / wall
		u.SQLFsyncs = &v
	}
	if a.sqlCPU >= 0 && b.sqlCPU >= 0 {
		v := 100 * (b.sqlCPU - a.sqlCPU).Seconds() / wall
		u.SQLCPU = &v
	}
	if a.cmds != nil && b.cmds != nil {
		u.RedisCommands = make(map[string]CommandStats)
		for name, sb := range b.cmds {
			sa := a.cmds[name]
			d := CommandStats{Calls: sb.Calls - sa.Calls, Usec: sb.Usec - sa.Usec}
			if d.Calls <= 0 || d.Usec < 0 { // not called, or the stats were reset
				continue
			}
			d.UsecPerCall = float64(d.Usec) / float64(d.Calls)
			u.RedisCommands[name] = d
		}
	}
	return u
}

// noteOtherClients adds a note to r when INFO commandstats counted clearly
// more script calls in the phase than the run made (each of its calls is
// at most one script call): other clients shared the Redis, and their work
// is in its CPU figures. Script calls only: the commands a script runs are
// counted in commandstats too.
func noteOtherClients(r *Result, calls int) {
	var n int64
	for name, st := range r.Usage.RedisCommands {
		if isScript(name) {
			n += st.Calls
		}
	}
	if extra := n - int64(calls); extra > 100 && extra > int64(calls)/100 {
		r.Notes = append(r.Notes, fmt.Sprintf("Redis ran %d script calls in the phase for the run's %d calls: other clients used it too, "+
			"and their work is in REDIS CPU %% and µs/JOB", n, calls))
	}
}

// isScript reports whether the command (INFO commandstats's name) runs a
// script.
func isScript(name string) bool {
	switch name {
	case "evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro":
		return true
	}
	return false
}

// commandStats parses INFO commandstats: lines like
// "cmdstat_evalsha:calls=12,usec=40,usec_per_call=3.33,...".
func commandStats(info string) map[string]CommandStats {
	out := make(map[string]CommandStats)
	for k, v := range infoFields(info) {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		var st CommandStats
		for _, kv := range strings.Split(v, ",") {
			f, val, _ := strings.Cut(kv, "=")
			switch f {
			case "calls":
				st.Calls, _ = strconv.ParseInt(val, 10, 64)
			case "usec":
				st.Usec, _ = strconv.ParseInt(val, 10, 64)
			}
		}
		out[name] = st
	}
	return out
}

// clockTick is the unit of /proc/stat: USER_HZ, 100 on every Linux
// architecture Go supports.
const clockTick = 10 * time.Millisecond

// hostBusy reads the time all CPUs spent not idle (Linux /proc/stat), or
// -1 when it cannot.
func hostBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return -1
	}
	var busy int64
	for i, v := range f[1:8] { // user nice system idle iowait irq softirq
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return -1
		}
		if i != 3 && i != 4 { // idle and iowait are not busy
			busy += n
		}
	}
	if len(f) > 8 { // steal: taken by the hypervisor, not ours to use
		if n, err := strconv.ParseInt(f[8], 10, 64); err == nil {
			busy += n
		}
	}
	return time.Duration(busy) * clockTick
}

// variableRow is a row of MySQL's SHOW VARIABLES and SHOW STATUS.
type variableRow struct {
	Name  string `gorm:"column:Variable_name"`
	Value string `gorm:"column:Value"`
}

// infoFields parses an INFO reply into its key:value fields.
func infoFields(info string) map[string]string {
	out := make(map[string]string)
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			out[k] = v
		}
	}
	return out
}

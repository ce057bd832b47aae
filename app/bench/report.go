package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Report is a whole bench session: where it ran and what each run found.
type Report struct {
	Machine Machine  `json:"machine"`
	Results []Result `json:"results"`
}

// OK reports whether every run finished with no job missing.
func (r Report) OK() bool {
	for _, res := range r.Results {
		if !res.OK() {
			return false
		}
	}
	return true
}

// RunCase runs one case of a suite with env and p, and says whether it met
// its target.
func RunCase(ctx context.Context, env Env, c Case, p Progress) (Result, error) {
	sc, ok := Lookup(c.Scenario)
	if !ok {
		return Result{Scenario: c.Scenario, Error: "no such scenario"}, fmt.Errorf("%w: no scenario %q", ErrOptions, c.Scenario)
	}
	o := c.Options
	o.Env, o.Progress = env, p
	r, err := sc.Run(ctx, o)
	if c.Target.Text != "" {
		r.Target = c.Target.Text
		if c.Target.Met != nil && err == nil {
			met := c.Target.Met(r)
			r.TargetMet = &met
		}
	}
	return r, err
}

// WriteMachine prints the machine's details for people.
func WriteMachine(w io.Writer, m Machine) {
	cpu := fmt.Sprintf("%d CPUs", m.CPUs)
	if m.CPUModel != "" {
		cpu += " (" + m.CPUModel + ")"
	}
	fmt.Fprintf(w, "delayq bench, %s on %s: %s, %s, GOMAXPROCS %d, %s", m.Time, m.Host, m.OS, cpu, m.GOMAXPROCS, m.Go)
	if m.LoadAvg != "" {
		fmt.Fprintf(w, ", load average %s", m.LoadAvg)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Redis:  %s", m.Redis)
	if m.RedisPersistence != "" {
		fmt.Fprintf(w, " (%s)", m.RedisPersistence)
	}
	if m.PingRTT > 0 {
		fmt.Fprintf(w, "; PING on one connection: %.0f µs median, %.0f/s", m.PingRTT, m.PingsPerSec)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Ledger: %s", m.SQL)
	if m.SQLDurability != "" {
		fmt.Fprintf(w, " (%s)", m.SQLDurability)
	}
	fmt.Fprintln(w)
}

// WriteResults prints the results as two tables, the figures and what
// they cost, then every run's notes and errors.
func WriteResults(w io.Writer, results []Result) error {
	withTargets := false
	for _, r := range results {
		withTargets = withTargets || r.Target != ""
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := []string{"SCENARIO", "PARAMS", "SECONDS", "RATE", "RATIO", "P50 ms", "P90 ms", "P99 ms", "MAX ms", "JOBS", "HANDLED", "DUP", "MISSING", "EARLY", "FAILED"}
	if withTargets {
		head = append(head, "TARGET", "MET")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, r := range results {
		cells := []string{r.Scenario, r.Params, fmt.Sprintf("%.2f", r.Seconds), rate(r), ratio(r)}
		if l := r.Latency; l != nil {
			cells = append(cells, ms(l.P50), ms(l.P90), ms(l.P99), ms(l.Max))
		} else {
			cells = append(cells, "-", "-", "-", "-")
		}
		cells = append(cells, fmt.Sprint(r.Jobs), fmt.Sprint(r.Handled), fmt.Sprint(r.Duplicates),
			fmt.Sprint(r.Missing), fmt.Sprint(r.Early), fmt.Sprint(r.Failed))
		if withTargets {
			met := "-"
			if r.TargetMet != nil {
				met = map[bool]string{true: "yes", false: "NO"}[*r.TargetMet]
			}
			cells = append(cells, r.Target, met)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tPARAMS\tHOST CPU %\tPROCESS CPU %\tREDIS CPU %\tSQL CPU %\tREDIS µs/JOB\tEVALSHA µs/CALL\tSQL COMMITS/s\tSQL FSYNCS/s\tROWS/RECORD\tROWS/COMPLETE\tLATENCY OF\tVERIFY s\tLEFTOVER")
	for _, r := range results {
		u := r.Usage
		verify := "-"
		if r.VerifySeconds > 0 {
			verify = fmt.Sprintf("%.1f", r.VerifySeconds)
		}
		of := r.LatencyOf
		if of == "" {
			of = "-"
		}
		perRecord, perComplete := "-", "-"
		if l := r.Ledger; l != nil && l.Records > 0 {
			perRecord = fmt.Sprintf("%.1f", l.RowsPerRecord)
			perComplete = fmt.Sprintf("%.1f", l.RowsPerDelete)
		}
		evalsha := "-"
		if st, ok := u.RedisCommands["evalsha"]; ok {
			evalsha = fmt.Sprintf("%.1f", st.UsecPerCall)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", r.Scenario, r.Params, opt(u.HostCPU, "%.0f"), pct(u.ProcessCPU),
			optPct(u.RedisCPU), optPct(u.SQLCPU), opt(u.RedisCPUPerJob, "%.2f"), evalsha, opt(u.SQLCommits, "%.0f"), opt(u.SQLFsyncs, "%.0f"), perRecord, perComplete, of, verify, r.Leftover)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := writeCosts(w, results); err != nil {
		return err
	}
	if err := writeBaselines(w, results); err != nil {
		return err
	}
	if err := writeNoopBaselines(w, results); err != nil {
		return err
	}
	if err := writeHorizons(w, results); err != nil {
		return err
	}
	for _, r := range results {
		for _, n := range r.Notes {
			fmt.Fprintf(w, "note: %s (%s): %s\n", r.Scenario, r.Params, n)
		}
		if r.Error != "" {
			fmt.Fprintf(w, "ERROR: %s (%s): %s\n", r.Scenario, r.Params, r.Error)
		}
		if r.Missing > 0 {
			fmt.Fprintf(w, "FAILED: %s (%s): %d accepted jobs were never handled\n", r.Scenario, r.Params, r.Missing)
		}
	}
	return nil
}

// writeCosts prints what the runs' jobs cost, per job, next to their
// rate, if any run counted it.
func writeCosts(w io.Writer, results []Result) error {
	tw := baselineTable(w, results, func(r Result) bool { return r.Costs != nil && r.Costs.Jobs > 0 },
		"SCENARIO\tPARAMS\tRATE\tLEDGER COMMITS/1k JOBS\tSERVER COMMITS/1k\tFSYNCS/1k\tREDIS CMDS/JOB\tSCRIPT CALLS/JOB\tPROCESS CPU µs/JOB\tREDIS CPU µs/JOB\tSQL CPU µs/JOB")
	if tw == nil {
		return nil
	}
	for _, r := range results {
		c := r.Costs
		if c == nil || c.Jobs == 0 {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Scenario, r.Params, rate(r),
			opt(c.LedgerCommitsPer1k, "%.1f"), opt(c.ServerCommitsPer1k, "%.1f"), opt(c.ServerFsyncsPer1k, "%.1f"),
			opt(c.RedisCommandsPerJob, "%.2f"), opt(c.RedisScriptCallsPerJob, "%.3f"),
			opt(c.ProcessCPUUsPerJob, "%.1f"), opt(c.RedisCPUUsPerJob, "%.1f"), opt(c.SQLCPUUsPerJob, "%.1f"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := writeNodeCosts(w, results); err != nil {
		return err
	}
	return writeShardCosts(w, results)
}

// writeShardCosts prints each ledger shard's share of the runs' work, if
// any run was over ledger shards.
func writeShardCosts(w io.Writer, results []Result) error {
	tw := baselineTable(w, results, func(r Result) bool { return r.Costs != nil && len(r.Costs.SQLShards) > 0 },
		"SCENARIO\tPARAMS\tLEDGER SHARD\tCOMMITS\tCOMMITS/1k JOBS\tROWS INSERTED (server)\tSHARE")
	if tw == nil {
		return nil
	}
	for _, r := range results {
		if r.Costs == nil {
			continue
		}
		for _, sh := range r.Costs.SQLShards {
			rows, share := "-", "-"
			if sh.RowsInserted != nil && sh.RowsShare != nil {
				rows, share = fmt.Sprint(*sh.RowsInserted), fmt.Sprintf("%.1f%%", 100**sh.RowsShare)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", r.Scenario, r.Params, sh.Shard, sh.Commits,
				opt(sh.CommitsPer1k, "%.1f"), rows, share)
		}
	}
	return tw.Flush()
}

// writeNodeCosts prints each Redis Cluster master's share of the runs'
// work, if any run was on a cluster.
func writeNodeCosts(w io.Writer, results []Result) error {
	tw := baselineTable(w, results, func(r Result) bool { return r.Costs != nil && len(r.Costs.RedisNodes) > 0 },
		"SCENARIO\tPARAMS\tREDIS MASTER\tCOMMANDS\tSHARE\tCMDS/JOB\tCPU µs/JOB")
	if tw == nil {
		return nil
	}
	for _, r := range results {
		if r.Costs == nil {
			continue
		}
		for _, n := range r.Costs.RedisNodes {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.1f%%\t%s\t%s\n", r.Scenario, r.Params, n.Addr, n.Commands, 100*n.Share,
				opt(n.CommandsPerJob, "%.2f"), opt(n.CPUUsPerJob, "%.1f"))
		}
	}
	return tw.Flush()
}

// writeBaselines prints the runs' round-trip baselines, if any: each
// rate's mean, then the one before and the one after the run in brackets.
func writeBaselines(w io.Writer, results []Result) error {
	tw := baselineTable(w, results, func(r Result) bool { return r.Baseline != nil },
		"SCENARIO\tPARAMS\tCALLS/s\tRATIO\tREDIS-TOPIC ENQUEUE jobs/s [before / after]\tEMPTY HTTP req/s, C [before / after]\tEMPTY EVALSHA/s, C [before / after]\tEMPTY EVALSHA/s, 1 conn\tPING/s, 1 conn")
	if tw == nil {
		return nil
	}
	for _, r := range results {
		b := r.Baseline
		if b == nil {
			continue
		}
		pair := func(mean, before, after float64) string {
			return fmt.Sprintf("%s [%s / %s]", thousands(mean), thousands(before), thousands(after))
		}
		c := "-"
		if b.Concurrency > 1 {
			c = fmt.Sprintf("C=%d: %s", b.Concurrency, pair(b.EvalShaC, b.Before.EvalShaC, b.After.EvalShaC))
		}
		h := "-"
		if b.EmptyHTTP > 0 {
			h = fmt.Sprintf("C=%d: %s", b.Concurrency, pair(b.EmptyHTTP, b.Before.EmptyHTTP, b.After.EmptyHTTP))
		}
		rt := "-"
		if b.Before.RedisTopic > 0 || b.After.RedisTopic > 0 {
			rt = pair(b.RedisTopic, b.Before.RedisTopic, b.After.RedisTopic)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Scenario, r.Params, thousands(r.CallsPerSec), ratio(r), rt, h, c,
			pair(b.EvalSha, b.Before.EvalSha, b.After.EvalSha), pair(b.Ping, b.Before.Ping, b.After.Ping))
	}
	return tw.Flush()
}

// baselineTable starts a table under header, after a blank line, if any
// of results has what it shows (has); nil if none has.
func baselineTable(w io.Writer, results []Result, has func(Result) bool, header string) *tabwriter.Writer {
	if !slices.ContainsFunc(results, has) {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	return tw
}

// writeNoopBaselines prints the HTTP-target runs' no-op baselines, if
// any: the run's figure, then the same run's with a no-op handler before
// and after it.
func writeNoopBaselines(w io.Writer, results []Result) error {
	tw := baselineTable(w, results, func(r Result) bool { return r.NoopBaseline != nil },
		"SCENARIO\tPARAMS\tRATE\tRATIO\tNO-OP RATE [before / after]\tP99 ms\tNO-OP P99 ms [before / after]")
	if tw == nil {
		return nil
	}
	for _, r := range results {
		b := r.NoopBaseline
		if b == nil {
			continue
		}
		p99, noopP99 := "-", "-"
		if r.Latency != nil {
			p99 = ms(r.Latency.P99)
		}
		if b.Before.Latency != nil && b.After.Latency != nil {
			noopP99 = fmt.Sprintf("[%s / %s]", ms(b.Before.Latency.P99), ms(b.After.Latency.P99))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t[%s / %s]\t%s\t%s\n", r.Scenario, r.Params, rate(r), ratio(r),
			thousands(b.Before.Rate), thousands(b.After.Rate), p99, noopP99)
	}
	return tw.Flush()
}

// writeHorizons prints the horizon runs' figures, if any.
func writeHorizons(w io.Writer, results []Result) error {
	for _, r := range results {
		h := r.Horizon
		if h == nil {
			continue
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "horizon (%s):\n", r.Params)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		row := func(k, v string) { fmt.Fprintf(tw, "  %s\t%s\n", k, v) }
		row("durable enqueue", fmt.Sprintf("%s jobs in %.1f s: %s jobs/s; %s ledger rows", thousands(float64(r.Jobs)), h.EnqueueSeconds, thousands(h.EnqueueRate), thousands(float64(h.Rows))))
		row("jobs in Redis", fmt.Sprintf("%s (%.2f%% of the jobs; %s rows due within the horizon)", thousands(float64(h.InRedis)), 100*float64(h.InRedis)/float64(max(r.Jobs, 1)), thousands(float64(h.InHorizon))))
		cmp := fmt.Sprintf("%s jobs on a redis topic", thousands(float64(h.CompareJobs)))
		if h.CompareJobs != r.Jobs {
			cmp += fmt.Sprintf(", extrapolated to %s", thousands(float64(r.Jobs)))
		}
		row("Redis memory, durable", fmt.Sprintf("%s (MEMORY USAGE of the topic's keys); used_memory %s", bytesText(h.RedisBytes), deltaText(h.UsedMemoryDelta)))
		row("Redis memory, redis topic", fmt.Sprintf("%s for %s (%s measured); used_memory %s; enqueue %s jobs/s", bytesText(h.CompareBytesForJobs), cmp, bytesText(h.CompareBytes), deltaText(h.CompareUsedMemoryDelta), thousands(h.CompareRate)))
		if h.RedisBytes > 0 && h.CompareBytesForJobs > 0 {
			row("durable / redis topic", fmt.Sprintf("%.3f", float64(h.RedisBytes)/float64(h.CompareBytesForJobs)))
		}
		row("relay's first pass", fmt.Sprintf("%.2f s (no mark: checks the whole horizon)", h.FirstPassSeconds))
		row("relay running", fmt.Sprintf("%.2f%% of a core over %.1f s; %d passes, %d jobs loaded as they entered the horizon", h.RelayCPU, h.RelaySeconds, h.RelayPasses, h.RelayLoaded))
		row("after a wipe: relay pass", fmt.Sprintf("%.2f s: %s jobs pushed; %s in Redis, %s rows due within the horizon", h.ReloadSeconds, thousands(float64(h.Reloaded)), thousands(float64(h.InRedisAfter)), thousands(float64(h.InHorizonAfter))))
		row("after a wipe: recoverer run", fmt.Sprintf("%.2f s over %s rows", h.RecovererSeconds, thousands(float64(h.RecovererScanned))))
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// bytesText formats a byte count in MiB ("-" when unknown, i.e. < 0).
func bytesText(n int64) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// deltaText formats a change of used_memory in MiB ("-" when unknown).
func deltaText(n int64) string {
	if n == -1 {
		return "-"
	}
	return fmt.Sprintf("%+.1f MiB", float64(n)/(1<<20))
}

// ratio formats r's calls/s over the empty script's rate: "0.87x".
func ratio(r Result) string {
	if r.Ratio <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", r.Ratio)
}

func rate(r Result) string {
	if r.Unit == "%core" {
		return fmt.Sprintf("%.2f %s", r.Rate, r.Unit)
	}
	return fmt.Sprintf("%s %s", thousands(r.Rate), r.Unit)
}

func ms(v float64) string {
	if v >= 100 || v <= -100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// pct formats a CPU share in % of a core: two decimals below 10 (an idle
// process's), none above.
func pct(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func optPct(v *float64) string {
	if v == nil {
		return "-"
	}
	return pct(*v)
}

func opt(v *float64, format string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}

// thousands formats v rounded, with comma separators: 18,234.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

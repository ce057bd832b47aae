package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"gorm.io/gorm"

	"github.com/delayq/delayq/app/backend"
	"github.com/delayq/delayq/app/bench"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// benchFlags are the flags every bench subcommand takes.
type benchFlags struct {
	keep        bool
	noHistory   bool
	trace       bool
	pool        bool
	priorities  bool
	orderKeys   int
	partitions  int
	sqlShards   []string
	stall       time.Duration
	baselineFor time.Duration
	cpuProfile  string
}

// maxBenchOrderingKeys bounds --ordering-keys: a key per job of a large
// run is as many as a benchmark needs.
const maxBenchOrderingKeys = 1_000_000

func (a *app) benchCmd() *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load tool: enqueue, drain, lateness, HTTP and recovery figures on the configured (or embedded) backends",
		Long: `bench measures delayq on the configured Redis and SQL ledger (--redis,
--sql-dsn, --config), or on the embedded ones when none is configured.

Each run works in a sandbox of its own: the Redis key namespace
dqbench_<hex> and the ledger tables dqbench_<hex>_ledger and
dqbench_<hex>_dead_letter (and its other tables), removed when the run ends (--keep leaves them).
Nothing else is touched. Every run counts what its handlers saw: jobs
handled twice (DUP), accepted but never handled (MISSING: the command then
exits 1) and started before their due time (EARLY). enqueue and http also
measure the machine's own round trip right before and after the run (PING
and an empty script's EVALSHA, on one connection and from C goroutines)
and report the run's calls/s as a RATIO to the empty script's rate. What
the jobs cost is counted too, per job: the ledger's commits and the SQL
server's per 1,000 jobs, Redis commands and CPU µs (JSON "costs").

Progress bars are drawn when stderr is a terminal; --json prints the whole
report as JSON. "bench all" runs the reference suite of docs/benchmarks.md.`,
		Args: args(cobra.NoArgs),
	}
	pf := cmd.PersistentFlags()
	pf.BoolVar(&f.keep, "keep", false, "keep each run's Redis keys and ledger tables (to look at them)")
	pf.BoolVar(&f.noHistory, "no-history", false, "the run's jobs leave no history rows (to compare a drain with history on and off)")
	pf.BoolVar(&f.trace, "trace", false, "tracing on: jobs enqueued in a span, each run in a span of its trace, exported in batches and dropped (to measure what tracing costs)")
	pf.BoolVar(&f.pool, "pool", false, "run the topic alone in a shared pool of handlers of its concurrency (worker.pools: to measure what a pool costs)")
	pf.BoolVar(&f.priorities, "priorities", false, "give the loaded jobs every priority, 0 to 3 in turn (to measure what claiming by priority costs)")
	pf.IntVar(&f.orderKeys, "ordering-keys", 0, "give the loaded jobs this many ordering keys in turn, 0 for none (to measure per-key ordering against the same jobs without keys)")
	pf.IntVar(&f.partitions, "partitions", 1, "spread the run's topic over this many partitions (1-256), over a Redis Cluster's masters")
	pf.StringArrayVar(&f.sqlShards, "sql-shard", nil, "MySQL DSN of a further ledger shard, repeated for each (the configured sql.dsn is shard 0), each best on a server of its own (default: the configured sql.shards): enqueue, drain and lateness report each shard's commits and rows")
	pf.DurationVar(&f.stall, "stall", 20*time.Second, "give up waiting for handlers when no new job ran for this long; the rest count as missing")
	pf.DurationVar(&f.baselineFor, "baseline-for", time.Second, "enqueue and http: how long each round-trip baseline (PING, empty EVALSHA) runs, before and after the run")
	pf.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile (pprof) of the whole command to this file")
	for _, sc := range bench.Scenarios() {
		cmd.AddCommand(a.benchScenarioCmd(f, sc))
	}
	cmd.AddCommand(a.benchAllCmd(f))
	return cmd
}

// benchScenarioCmd is the subcommand of one scenario, with the flags it
// uses.
func (a *app) benchScenarioCmd(f *benchFlags, sc bench.Scenario) *cobra.Command {
	o := sc.Defaults
	var preset string
	cmd := &cobra.Command{
		Use:   sc.Name,
		Short: sc.Short,
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A zero would silently mean "the default" to the bench package.
			if err := positiveFlags(cmd, "jobs", "rows", "max-requests", "concurrency", "connections", "batch",
				"claim-batch", "window", "duration", "baseline-for", "over", "horizon", "relay-for", "compare-jobs"); err != nil {
				return err
			}
			if sc.Name == "horizon" && !cmd.Flags().Changed("compare-jobs") {
				o.CompareJobs = o.Jobs
			}
			if sc.Name == "lateness" {
				if err := latenessPreset(cmd, preset, &o); err != nil {
					return err
				}
			}
			return a.runBench(cmd, f, []bench.Case{{Scenario: sc.Name, Options: o}})
		},
	}
	fl := cmd.Flags()
	d := sc.Defaults
	if sc.DurableOK && !d.Durable {
		usage := "make the topic durable: every enqueue commits its jobs to the SQL ledger first (the SQL server's durability settings are reported)"
		if sc.Name == "idle" {
			usage = "make the topic durable, and run the relay and the recoverer beside the worker (the configured recovery.* settings), as delayq serve does"
		}
		fl.BoolVar(&o.Durable, "durable", false, usage)
	}
	if sc.TargetOK {
		fl.BoolVar(&o.HTTPTarget, "target", false, "deliver each job to an HTTP target (signed) on a loopback receiver that answers 200 at once; the same run with a no-op handler runs right before and after")
	}
	switch sc.Name {
	case "enqueue":
		fl.IntVarP(&o.Jobs, "jobs", "n", d.Jobs, "jobs to enqueue")
		fl.IntVarP(&o.Concurrency, "concurrency", "c", d.Concurrency, "producer goroutines")
		fl.IntVarP(&o.Batch, "batch", "b", d.Batch, "jobs per call: 1 calls Enqueue, more call EnqueueBatch (at most 1000)")
		fl.Float64Var(&o.Rate, "rate", 0, "pace the producers to this many jobs/s in all, to compare runs at the same total rate (0: as fast as they go)")
	case "drain":
		fl.IntVarP(&o.Jobs, "jobs", "n", d.Jobs, "jobs due before the worker starts")
		fl.IntVarP(&o.Concurrency, "concurrency", "c", d.Concurrency, "handlers")
		fl.IntVar(&o.ClaimBatch, "claim-batch", 100, "most jobs per claim")
		fl.DurationVar(&o.ClaimAhead, "claim-ahead", 0, claimAheadUsage())
		fl.DurationVar(&o.HandlerTime, "handler-time", 0, "each handler works this long before it succeeds (0: a no-op; at most 10s)")
	case "lateness":
		fl.IntVarP(&o.Jobs, "jobs", "n", d.Jobs, "jobs")
		fl.DurationVar(&o.Window, "window", d.Window, "due times spread uniformly over this window")
		fl.DurationVar(&o.Lead, "lead", d.Lead, "the window starts this far ahead")
		fl.DurationVar(&o.Delay, "delay", 0, "instead of a window: each job due this long after its own enqueue, one goroutine enqueueing")
		fl.IntVarP(&o.Batch, "batch", "b", d.Batch, "with --delay: jobs per enqueue call")
		fl.IntVarP(&o.Concurrency, "concurrency", "c", d.Concurrency, "handlers")
		fl.IntVar(&o.ClaimBatch, "claim-batch", 100, "most jobs per claim")
		fl.DurationVar(&o.ClaimAhead, "claim-ahead", 0, claimAheadUsage())
		fl.StringVar(&preset, "preset", "", `"classic": 50,000 jobs with a 1 s delay (other flags still override)`)
	case "http":
		fl.IntVarP(&o.Concurrency, "connections", "c", d.Concurrency, "client connections, each sending one request at a time")
		fl.DurationVarP(&o.Duration, "duration", "d", d.Duration, "how long to send requests")
		fl.IntVarP(&o.Jobs, "max-requests", "n", d.Jobs, "stop after this many requests")
	case "recovery":
		fl.IntVarP(&o.Jobs, "rows", "n", d.Jobs, "ledger rows whose jobs Redis lost")
		fl.BoolVar(&o.KeepEpoch, "keep-epoch", false, "keep the topic's epoch marker: restore stale rows only, without the data-loss check")
	case "horizon":
		fl.IntVarP(&o.Jobs, "jobs", "n", d.Jobs, "durable jobs to enqueue")
		fl.IntVarP(&o.Concurrency, "concurrency", "c", d.Concurrency, "enqueue goroutines")
		fl.IntVarP(&o.Batch, "batch", "b", d.Batch, "jobs per EnqueueBatch call (at most 1000)")
		fl.DurationVar(&o.Window, "over", d.Window, "due times spread uniformly over this long")
		fl.DurationVar(&o.Horizon, "horizon", d.Horizon, "the durable topic's horizon: jobs due further ahead stay in SQL only")
		fl.DurationVar(&o.Duration, "relay-for", d.Duration, "how long to watch the running relay's CPU")
		fl.IntVar(&o.CompareJobs, "compare-jobs", d.Jobs, "jobs on a redis topic to compare Redis memory with (default: --jobs; fewer are extrapolated)")
	case "retention":
		fl.IntVar(&o.HistoryRows, "rows", d.HistoryRows, "history rows past their retention to delete")
		fl.IntVar(&o.Purge.Batch, "purge-batch", ledger.DefaultPurgeBatch, "rows per DELETE (recovery.history_purge_batch)")
		fl.Float64Var(&o.Purge.Duty, "purge-duty", ledger.DefaultPurgeDuty, "largest share of the time the purge deletes (recovery.history_purge_duty)")
		fl.IntVarP(&o.Jobs, "jobs", "n", d.Jobs, "jobs of the drain that runs alone, then during the purge")
		fl.IntVarP(&o.Concurrency, "concurrency", "c", d.Concurrency, "handlers")
	case "idle":
		fl.DurationVarP(&o.Duration, "duration", "d", d.Duration, "how long to watch the idle worker")
		fl.IntVarP(&o.Concurrency, "concurrency", "c", d.Concurrency, "handlers of the idle worker")
	}
	return cmd
}

// positiveFlags refuses a zero or negative value in any of the named flags
// the command has.
func positiveFlags(cmd *cobra.Command, names ...string) error {
	for _, name := range names {
		f := cmd.Flags().Lookup(name)
		if f == nil {
			continue
		}
		if v := f.Value.String(); strings.HasPrefix(v, "-") || strings.Trim(v, "0smh.") == "" {
			return usageError{fmt.Errorf("--%s %s: must be positive", name, v)}
		}
	}
	return nil
}

// latenessPreset applies --preset to the flags the command line left alone.
func latenessPreset(cmd *cobra.Command, preset string, o *bench.Options) error {
	switch preset {
	case "":
	case "classic":
		if !cmd.Flags().Changed("jobs") {
			o.Jobs = 50_000
		}
		if !cmd.Flags().Changed("delay") {
			o.Delay = time.Second
		}
	default:
		return usageError{fmt.Errorf("--preset %q: the only preset is classic", preset)}
	}
	return nil
}

func (a *app) benchAllCmd(f *benchFlags) *cobra.Command {
	var durable bool
	cmd := &cobra.Command{
		Use:   "all",
		Short: "Run the reference suite (docs/benchmarks.md) and compare each figure with its target",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := positiveFlags(cmd, "baseline-for"); err != nil {
				return err
			}
			if durable {
				return a.runBench(cmd, f, bench.DurableSuite())
			}
			return a.runBench(cmd, f, bench.Suite())
		},
	}
	cmd.Flags().BoolVar(&durable, "durable", false, "run the durable topics' suite instead (docs/benchmarks.md, issue 15)")
	return cmd
}

// runBench opens the backends, describes the machine, runs the cases one
// after the other and prints the report. A missing job or a failed run
// makes it fail.
func (a *app) runBench(cmd *cobra.Command, f *benchFlags, cases []bench.Case) (err error) {
	if f.orderKeys < 0 || f.orderKeys > maxBenchOrderingKeys {
		return usageError{fmt.Errorf("--ordering-keys %d: want 0 (none) to %d", f.orderKeys, maxBenchOrderingKeys)}
	}
	if f.partitions < 1 || f.partitions > queue.MaxPartitions {
		return usageError{fmt.Errorf("--partitions %d: want 1-%d", f.partitions, queue.MaxPartitions)}
	}
	for i, dsn := range f.sqlShards {
		if strings.TrimSpace(dsn) == "" {
			return usageError{fmt.Errorf("--sql-shard: DSN %d is empty", i+1)}
		}
	}
	if len(f.sqlShards) > 0 {
		for _, c := range cases {
			if sc, ok := bench.Lookup(c.Scenario); ok && !sc.ShardsOK {
				return usageError{fmt.Errorf("--sql-shard: the %s scenario runs on one ledger shard (shards: enqueue, drain, lateness)", c.Scenario)}
			}
		}
	}
	cfg, err := a.loadConfig(cmd)
	if err != nil {
		return err
	}
	if len(f.sqlShards) > 0 && cfg.SQL.Driver != "mysql" {
		return usageError{fmt.Errorf("--sql-shard: ledger shards need a MySQL ledger (--sql-dsn or sql.dsn), not %s", cfg.SQL.Driver)}
	}
	if cfg.SQL.Driver == "sqlite" {
		// The embedded ledger goes to a file of the bench's own, never to
		// the configured one.
		dir, err := os.MkdirTemp("", "delayq-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cfg.SQL.SQLitePath = filepath.Join(dir, "bench.db")
	}
	cfg.SQL.AutoMigrate = false // each run creates (and drops) tables of its own
	if !cmd.Flags().Changed("log-level") && os.Getenv("DELAYQ_LOG_LEVEL") == "" {
		cfg.Log.Level = "warn" // the workers' start and stop lines would drown the figures
	}
	log := newLogger(cfg.Log, a.errOut)
	ctx := cmd.Context()
	b, err := backend.OpenWith(ctx, cfg, log, backend.Options{NoShardCheck: true})
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.Ready(ctx); err != nil {
		return err
	}
	var shards []*gorm.DB
	for i, dsn := range f.sqlShards {
		db, err := b.OpenSQLShard(cfg.SQL, dsn, log)
		if err == nil {
			err = db.WithContext(ctx).Exec("SELECT 1").Error
		}
		if err != nil {
			return fmt.Errorf("--sql-shard: shard %d: %w", i+1, err)
		}
		shards = append(shards, db)
	}
	configured := len(shards) == 0 && b.Shards.Len() > 1
	if configured {
		// sql.shards: the sandboxes' tables go to the configured shards.
		for _, l := range b.Shards.All()[1:] {
			shards = append(shards, l.DB())
		}
	}

	if f.cpuProfile != "" {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, stop()) }()
	}
	// The durable idle run's relay and recoverer take the configured
	// settings, as `delayq serve` runs them.
	env := bench.Env{Redis: b.Redis, DB: b.DB, Queue: b.Queue.Config(), Logger: log, Keep: f.keep, NoHistory: f.noHistory, Trace: f.trace, Pool: f.pool, Priorities: f.priorities, OrderingKeys: f.orderKeys, Partitions: f.partitions,
		Shards: shards, ShardsConfigured: configured, Recovery: recoveryConfig(cfg, log), Relay: relayConfig(cfg, log, nil)}
	rep := bench.Report{Machine: bench.Describe(ctx, env)}
	if !a.json {
		bench.WriteMachine(a.out, rep.Machine)
		fmt.Fprintln(a.out)
	}
	var progress bench.Progress
	if isTerminal(a.errOut) {
		progress = bench.Bars(a.errOut)
	}
	for _, c := range cases {
		c.Options.Stall, c.Options.BaselineFor = f.stall, f.baselineFor
		r, err := bench.RunCase(ctx, env, c, progress)
		if errors.Is(err, bench.ErrOptions) {
			return usageError{err}
		}
		rep.Results = append(rep.Results, r)
		if len(cases) > 1 && !a.json {
			fmt.Fprintf(a.errOut, "done: %s %s\n", r.Scenario, r.Params)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if err := a.emit(rep, func(w io.Writer) { _ = bench.WriteResults(w, rep.Results) }); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("bench: interrupted: %w", err)
	}
	if !rep.OK() {
		missing, failed := 0, 0
		for _, r := range rep.Results {
			missing += r.Missing
			if r.Error != "" {
				failed++
			}
		}
		return withCode(ExitFailure, fmt.Errorf("bench: %d jobs missing, %d runs failed", missing, failed))
	}
	return nil
}

// startCPUProfile writes a CPU profile to path until the returned function
// is called.
func startCPUProfile(path string) (func() error, error) {
	out, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("bench: --cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("bench: --cpuprofile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return out.Close()
	}, nil
}

// claimAheadUsage is the --claim-ahead flag's help, for drain and lateness.
func claimAheadUsage() string {
	return fmt.Sprintf("claim and record jobs this long before they are due (handlers still start at the due time); 0 = the worker's default (%s), negative = none", queue.DefaultClaimAhead)
}

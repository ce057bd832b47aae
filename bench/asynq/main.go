// Command asynq-bench measures asynq (github.com/hibiken/asynq) the way
// `delayq bench drain` and `delayq bench lateness` measure delayq, on the
// same Redis, for the side-by-side of docs/benchmarks.md
// (scripts/bench-vs-asynq.sh):
//
//	asynq-bench drain    [-n JOBS] [-c HANDLERS] [--redis ADDR] [--json]
//	asynq-bench lateness [-n JOBS] [-c HANDLERS] [--window W] [--lead L] [--delayed-check D] [--redis ADDR] [--json]
//
// drain: N tasks already due, enqueued with asynq's client from
// --fill-concurrency goroutines (the client has no batch call), then an
// asynq server with C no-op handlers starts; jobs/s from the server's start
// to the last handler. lateness: the server starts first, idle; then N
// tasks due uniformly over W starting L ahead (asynq.ProcessAt); handler
// start minus due time.
//
// Each run uses a queue of its own (dqbench_asynq_<hex>: asynq's keys are
// asynq:{<queue>}:...) and deletes its keys afterwards. It lives in a
// module of its own so that asynq never enters delayq's go.mod.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"text/tabwriter"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are a run's flags.
type options struct {
	scenario     string
	jobs         int
	concurrency  int
	fill         int
	redis        string
	redisDB      int
	window, lead time.Duration
	delayedCheck time.Duration
	stall        time.Duration
	json         bool
}

func run(ctx context.Context, args []string, out, errOut io.Writer) int {
	if len(args) == 0 || (args[0] != "drain" && args[0] != "lateness") {
		fmt.Fprintln(errOut, "usage: asynq-bench drain|lateness [flags] (-h for the flags)")
		return 2
	}
	o := options{scenario: args[0]}
	fs := flag.NewFlagSet("asynq-bench "+o.scenario, flag.ContinueOnError)
	fs.SetOutput(errOut)
	defJobs := 50_000
	if o.scenario == "lateness" {
		defJobs = 20_000
	}
	for _, name := range []string{"n", "jobs"} {
		fs.IntVar(&o.jobs, name, defJobs, "tasks")
	}
	for _, name := range []string{"c", "concurrency"} {
		fs.IntVar(&o.concurrency, name, 50, "handlers (asynq Config.Concurrency)")
	}
	fs.IntVar(&o.fill, "fill-concurrency", 64, "goroutines enqueueing the tasks (asynq's client enqueues one task per call)")
	fs.StringVar(&o.redis, "redis", "127.0.0.1:6379", "Redis address")
	fs.IntVar(&o.redisDB, "redis-db", 0, "Redis database number")
	fs.DurationVar(&o.window, "window", 10*time.Second, "lateness: due times spread uniformly over this window")
	fs.DurationVar(&o.lead, "lead", 3*time.Second, "lateness: the window starts this far ahead")
	fs.DurationVar(&o.delayedCheck, "delayed-check", 0, "lateness: asynq Config.DelayedTaskCheckInterval (0: asynq's default, 5s)")
	fs.DurationVar(&o.stall, "stall", 20*time.Second, "give up when no task ran for this long; the rest count as missing")
	fs.BoolVar(&o.json, "json", false, "print JSON instead of a table")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if o.jobs < 1 || o.concurrency < 1 || o.fill < 1 || o.window <= 0 || o.lead < 0 || o.delayedCheck < 0 || o.stall <= 0 || fs.NArg() > 0 {
		fmt.Fprintln(errOut, "asynq-bench: -n, -c, --fill-concurrency, --window and --stall must be positive, --lead and --delayed-check not negative, and no arguments")
		return 2
	}
	r, err := measure(ctx, o)
	if err != nil {
		fmt.Fprintln(errOut, "asynq-bench:", err)
		return 1
	}
	if o.json {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			fmt.Fprintln(errOut, "asynq-bench:", err)
			return 1
		}
	} else {
		writeTable(out, r)
	}
	if r.Missing > 0 {
		return 1
	}
	return 0
}

// result is one run's figures, under the names delayq bench's JSON uses
// for the same figures.
type result struct {
	Scenario     string   `json:"scenario"`
	Params       string   `json:"params"`
	AsynqVersion string   `json:"asynq_version"`
	Seconds      float64  `json:"seconds"`
	Rate         float64  `json:"rate"`
	Unit         string   `json:"unit"`
	Latency      *latency `json:"latency,omitempty"`
	Jobs         int      `json:"jobs"`
	Handled      int      `json:"handled"`
	Duplicates   int      `json:"duplicates"`
	Missing      int      `json:"missing"`
	Early        int      `json:"early"`
	Costs        costs    `json:"costs"`
	Queue        string   `json:"queue"`
	Notes        []string `json:"notes,omitempty"`
}

// latency holds percentiles in milliseconds.
type latency struct {
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
	Min float64 `json:"min_ms"`
	N   int     `json:"n"`
}

// writeTable prints the run as one line under a header, in the shape of
// delayq bench's first table, with its costs per job after it.
func writeTable(w io.Writer, r result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tPARAMS\tSECONDS\tRATE\tP50 ms\tP90 ms\tP99 ms\tMAX ms\tJOBS\tHANDLED\tDUP\tMISSING\tEARLY\tREDIS CMDS/JOB\tSCRIPT CALLS/JOB\tPROCESS CPU µs/JOB\tREDIS CPU µs/JOB")
	lat := []string{"-", "-", "-", "-"}
	if l := r.Latency; l != nil {
		lat = []string{ms(l.P50), ms(l.P90), ms(l.P99), ms(l.Max)}
	}
	c := r.Costs
	fmt.Fprintf(tw, "%s\t%s\t%.2f\t%s %s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", r.Scenario, r.Params, r.Seconds, thousands(r.Rate), r.Unit,
		strings.Join(lat, "\t"), r.Jobs, r.Handled, r.Duplicates, r.Missing, r.Early,
		opt(c.RedisCommandsPerJob, "%.2f"), opt(c.RedisScriptCallsPerJob, "%.3f"), opt(&c.ProcessCPUUsPerJob, "%.1f"), opt(c.RedisCPUUsPerJob, "%.1f"))
	_ = tw.Flush()
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

// asynqVersion is the asynq module this program was built with.
func asynqVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/hibiken/asynq" {
				return d.Version
			}
		}
	}
	return "unknown"
}

func ms(v float64) string {
	if v >= 100 || v <= -100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
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

package bench

import (
	"slices"
	"time"
)

// Result is what one run measured and what its handlers saw.
type Result struct {
	Scenario string `json:"scenario"`
	// Params describes the run's options in the words of the command line
	// ("jobs=50000 concurrency=50").
	Params string `json:"params"`
	// Durable says the run's topic was durable (Options.Durable): every
	// enqueue committed to the SQL ledger first. SQLDurability is then
	// what the SQL server said of its commits (innodb_flush_log_at_trx_commit,
	// sync_binlog, log_bin...), read at the run's start: a durable figure
	// means nothing without them.
	Durable       bool   `json:"durable,omitempty"`
	SQLDurability string `json:"sql_durability,omitempty"`
	// DurableRows counts the ledger rows of a durable run once its jobs
	// were enqueued, before any was handled (enqueue, drain, http): one
	// per accepted job.
	DurableRows *int64 `json:"durable_rows,omitempty"`

	// Seconds is the measured phase: the enqueue calls (enqueue), the
	// worker's start to the last job handled (drain), the due window
	// (lateness), the load (http), the recovery run (recovery), the
	// watched time (idle).
	Seconds float64 `json:"seconds"`
	// Rate is the measured throughput, in Unit: jobs/s (enqueue, drain),
	// jobs due per second (lateness), req/s (http), rows/s (recovery) or
	// % of one core (idle).
	Rate float64 `json:"rate"`
	Unit string  `json:"unit"`
	// Latency is per enqueue call (enqueue), handler start minus due time
	// (lateness) or per request (http); nil when not measured.
	Latency   *Latency `json:"latency,omitempty"`
	LatencyOf string   `json:"latency_of,omitempty"`

	// Baseline is the machine's own round-trip rates measured right before
	// and right after the measured phase (enqueue, http): the figure is
	// judged against them, not against an absolute number.
	Baseline *Baseline `json:"baseline,omitempty"`
	// NoopBaseline is, for a run on an HTTP target (Options.HTTPTarget),
	// the same run with a no-op handler right before and after it.
	NoopBaseline *NoopBaseline `json:"noop_baseline,omitempty"`
	// CallsPerSec is the accepted calls per second of the measured phase:
	// Enqueue or EnqueueBatch calls (enqueue), 202 answers (http). With
	// one job per call it equals Rate.
	CallsPerSec float64 `json:"calls_per_s,omitempty"`
	// Ratio is CallsPerSec over the empty script's rate at the same
	// concurrency (Baseline.EvalSha for one goroutine, EvalShaC for C):
	// 1 means a call costs what an empty EVALSHA does. For a drain on an
	// HTTP target it is Rate over the mean of its NoopBaseline's rates.
	Ratio float64 `json:"ratio,omitempty"`

	// Retention is the retention scenario's purge: what it deleted while
	// the drain ran, and the drain alone to compare with (Ratio is the
	// drain's Rate over it).
	Retention *RetentionResult `json:"retention,omitempty"`

	// Jobs is how many jobs were accepted (enqueued, or ledger rows written)
	// and so must be handled; Handled how many of them ran at least once.
	Jobs    int `json:"jobs"`
	Handled int `json:"handled"`
	// Duplicates counts extra runs of a job that had already run.
	Duplicates int `json:"duplicates"`
	// Missing counts accepted jobs no handler ever ran: the run fails.
	Missing int `json:"missing"`
	// Early counts handler runs that started before the job's due time.
	Early int `json:"early"`
	// Stray counts runs of jobs the run never accepted (an enqueue that
	// failed on the client side but was written after all).
	Stray int `json:"stray,omitempty"`
	// Failed counts enqueue calls or requests that failed (http: answers
	// other than 202, and transport errors); FailedBy breaks them down.
	Failed   int            `json:"failed"`
	FailedBy map[string]int `json:"failed_by,omitempty"`
	// Leftover counts what the sandbox still held once the worker stopped:
	// jobs in Redis and rows in the ledger. 0 after a clean run.
	Leftover int64 `json:"leftover"`
	// VerifySeconds is how long handling the jobs of an enqueue, http or
	// recovery run took afterwards (not part of the measured phase).
	VerifySeconds float64 `json:"verify_seconds,omitempty"`

	// Horizon is the horizon scenario's figures.
	Horizon *HorizonStats `json:"horizon,omitempty"`

	// Usage is what the measured phase cost.
	Usage Usage `json:"usage"`
	// Costs counts what the jobs cost: ledger and server commits, Redis
	// commands and CPU time, per job (enqueue, drain, lateness, http) or
	// over the watch (idle).
	Costs *Costs `json:"costs,omitempty"`
	// Ledger counts the worker's ledger statements in the measured phase
	// (drain, lateness, idle).
	Ledger *LedgerStats `json:"ledger,omitempty"`
	// Namespace and Tables name the sandbox (kept with Env.Keep).
	Namespace string   `json:"namespace"`
	Tables    []string `json:"tables"`
	// Notes are remarks worth reading next to the figures.
	Notes []string `json:"notes,omitempty"`
	// Error is set when the run could not finish (Run also returns it).
	Error string `json:"error,omitempty"`

	// Target and TargetMet: the target of a suite's case (RunCase), and
	// whether the run reached it.
	Target    string `json:"target,omitempty"`
	TargetMet *bool  `json:"target_met,omitempty"`
}

// OK reports whether nothing was missing and the run finished.
func (r Result) OK() bool { return r.Missing == 0 && r.Error == "" }

// Latency holds percentiles in milliseconds.
type Latency struct {
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
	// Min is the smallest value, in ms (negative for a job that started
	// early).
	Min float64 `json:"min_ms"`
	N   int     `json:"n"`
}

// latencyOf sorts µs values in place and returns their percentiles, or
// nil for none.
func latencyOf(us []int64) *Latency {
	if len(us) == 0 {
		return nil
	}
	slices.Sort(us)
	at := func(p float64) float64 {
		return float64(us[int(p*float64(len(us)-1)+0.5)]) / 1000
	}
	return &Latency{P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: at(1), Min: at(0), N: len(us)}
}

// seconds returns d in seconds.
func seconds(d time.Duration) float64 { return d.Seconds() }

// perSecond returns n per second of d (0 for no time).
func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/queue"
)

func (a *app) enqueueCmd() *cobra.Command {
	var payload, payloadFile, runAt string
	var delay time.Duration
	var maxAttempts, priority decimalInt
	var partitionKey, orderingKey, traceParent string
	cmd := &cobra.Command{
		Use: "enqueue TOPIC ID",
		Example: `  delayq enqueue emails welcome:42 --payload '{"to":"a@example.com"}' --delay 10m
  delayq enqueue order_close order_close:123 --run-at 2026-12-24T18:00:00Z --max-attempts 5
  delayq enqueue emails reset:42 --priority 3`,
		Short: "Enqueue a job (the id is the idempotency key)",
		Args:  args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if delay != 0 && runAt != "" {
				return usageError{errors.New("--delay and --run-at: give one of them, not both")}
			}
			if payload != "" && payloadFile != "" {
				return usageError{errors.New("--payload and --payload-file: give one of them, not both")}
			}
			// Refused here by the flag's name, before any request: the
			// queue's own error would name the API's field instead.
			if priority < 0 || priority > queue.MaxPriority {
				return usageError{fmt.Errorf("--priority %d: want 0 (the default) to %d", priority, queue.MaxPriority)}
			}
			j := queue.NewJob{ID: argv[1], Payload: []byte(payload), Delay: delay, MaxAttempts: int(maxAttempts), Priority: int(priority), PartitionKey: partitionKey, OrderingKey: orderingKey}
			if payloadFile != "" {
				cfg, err := a.loadConfig(cmd)
				if err != nil {
					return err
				}
				if j.Payload, err = readPayloadFile(payloadFile, cfg.Queue.MaxPayloadBytes); err != nil {
					return usageError{err}
				}
			}
			if partitionKey != "" && queue.ValidateID(partitionKey) != nil {
				return usageError{fmt.Errorf("--partition-key %q: want 1-200 characters of [A-Za-z0-9_.:@/-]", partitionKey)}
			}
			if cmd.Flags().Changed("ordering-key") && queue.ValidateID(orderingKey) != nil {
				return usageError{fmt.Errorf("--ordering-key %q: want 1-200 characters of [A-Za-z0-9_.:@/-]", orderingKey)}
			}
			if orderingKey != "" && partitionKey != "" && partitionKey != orderingKey {
				return usageError{errors.New("--partition-key: a job of an ordering key is partitioned by it; leave --partition-key out or give the same")}
			}
			if runAt != "" {
				t, err := parseTime(runAt)
				if err != nil {
					return usageError{fmt.Errorf("--run-at %q: %w", runAt, err)}
				}
				j.RunAt = t
			}
			ctx := cmd.Context()
			if traceParent != "" {
				var err error
				if ctx, err = a.tracedContext(cmd, traceParent); err != nil {
					return err
				}
			}
			s, err := a.store(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			r, err := s.Enqueue(ctx, argv[0], j)
			if err != nil {
				return err
			}
			a.warnUnconsumed(cmd, s, argv[0])
			out := map[string]any{"topic": argv[0], "id": r.ID, "run_at": r.RunAt, "duplicate": r.Duplicate}
			if f := httpapi.NewFinishedView(r.Finished); f != nil {
				out["finished"] = f
			}
			return a.emit(out, func(w io.Writer) {
				row(w, "TOPIC", "ID", "DUE", "DUPLICATE")
				row(w, argv[0], r.ID, ms(r.RunAt), r.Duplicate)
				if f := r.Finished; f != nil {
					fmt.Fprintf(w, "the job with this id finished (%s); the id is taken until %s (queue.topics.%s.unique_for)\n",
						f.Outcome, ms(f.TakenUntil), argv[0])
				}
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&payload, "payload", "", "payload (JSON, or any text)")
	f.StringVar(&payloadFile, "payload-file", "", "read the payload from this file (binary safe; at most queue.max_payload_bytes, read no further)")
	f.DurationVar(&delay, "delay", 0, "run after this delay, from Redis's clock (e.g. 30m)")
	f.StringVar(&runAt, "run-at", "", "run at this time: RFC 3339 or Unix ms")
	f.Var(&maxAttempts, "max-attempts", "attempts before the job goes dead (0 = queue.default_max_attempts)")
	f.Var(&priority, "priority", fmt.Sprintf("the job's priority within its topic, 0 (default) to %d: due jobs of a higher priority are claimed first", queue.MaxPriority))
	f.StringVar(&partitionKey, "partition-key", "", "on a topic of several partitions, jobs with the same key land on the same one")
	f.StringVar(&orderingKey, "ordering-key", "", "jobs of the topic with the same key run one at a time, in due order (a retry holds the key); the partition key too")
	f.StringVar(&traceParent, "traceparent", "", "a W3C traceparent: the job runs in a span of that trace (needs tracing.enabled where it is enqueued)")
	return cmd
}

// tracedContext is the command's context with the remote span the W3C
// traceparent tp names, for an enqueue that keeps it: refused (exit 2)
// when tp is not a valid traceparent, or when tracing is off in direct
// mode, where the trace would not be kept (through the API the server's
// tracing.enabled decides).
func (a *app) tracedContext(cmd *cobra.Command, tp string) (context.Context, error) {
	ctx := propagation.TraceContext{}.Extract(cmd.Context(), propagation.MapCarrier{"traceparent": tp})
	if !trace.SpanContextFromContext(ctx).IsValid() {
		shown := tp
		if len(shown) > 80 {
			shown = shown[:80] + "..." // a bad value is not echoed whole
		}
		return nil, usageError{fmt.Errorf("--traceparent %q: want 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>, ids not all zero", shown)}
	}
	cfg, err := a.loadConfig(cmd)
	if err != nil {
		return nil, err
	}
	if cfg.CLI.API == "" && cfg.Redis.Mode != "embedded" && !cfg.Tracing.Enabled {
		return nil, usageError{errors.New("--traceparent: tracing.enabled is false, so the enqueue would not keep the trace")}
	}
	return ctx, nil
}

// parseTime reads RFC 3339 or Unix milliseconds.
func parseTime(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("want RFC 3339 or Unix milliseconds")
	}
	return t.UnixMilli(), nil
}

// readPayloadFile reads a payload of at most limit bytes from path, and no
// more than one byte past it: a file over the limit (or /dev/zero) is
// refused without being read whole.
func readPayloadFile(path string, limit int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--payload-file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("--payload-file %s: %w", path, err)
	}
	if len(b) > limit {
		return nil, fmt.Errorf("--payload-file %s: over queue.max_payload_bytes (%d bytes)", path, limit)
	}
	return b, nil
}

func (a *app) cancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "cancel TOPIC ID",
		Example: `  delayq cancel order_close order_close:123`,
		Short:   "Cancel a job: a waiting one is removed, a running one's handler is cancelled (exit 3: unknown, 4: dead)",
		Long: `Cancel a job. One that waits (its first run or a retry) is removed from Redis
and the ledger. One a worker holds has its run cancelled: the handler's
context is cancelled in whichever process runs it, and the job ends
cancelled (never retried) when the handler returns an error; the answer
says "cancel requested". A handler that ignores its context runs on, and
'delayq get' shows its cancel requested until it returns (docs/design.md,
"Cancelling a running job").`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			s, err := a.store(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			v, err := s.Cancel(cmd.Context(), argv[0], argv[1])
			if err != nil {
				return jobError(argv[0], argv[1], err)
			}
			if v.Warning != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "delayq: warning: "+v.Warning)
			}
			return a.emit(v, func(w io.Writer) {
				row(w, "TOPIC", "ID", "CANCELLED")
				if v.CancelRequestedAt > 0 {
					row(w, v.Topic, v.ID, "cancel requested (running: its handler's context is cancelled)")
					return
				}
				row(w, v.Topic, v.ID, "yes")
			})
		},
	}
}

func (a *app) rescheduleCmd() *cobra.Command {
	var at, in, by string
	cmd := &cobra.Command{
		Use: "reschedule TOPIC ID (--at TIME | --in DURATION | --by ±DURATION)",
		Example: `  delayq reschedule order_close order_close:123 --in 15m
  delayq reschedule order_close order_close:123 --by -5m
  delayq reschedule order_close order_close:123 --at 2026-12-24T18:00:00Z`,
		Short: "Move a waiting job's due time (exit 3: unknown, 4: in flight or dead)",
		Long: `Move the due time of a job that waits (its first run or a retry), in Redis
and in its ledger row alike (docs/design.md §4.14). Give exactly one of:
  --at TIME        an absolute time: RFC 3339 or Unix milliseconds
  --in DURATION    from now, on Redis's clock (e.g. 90m)
  --by DURATION    from the due time it has: 2h later, or -15m earlier
A time before now means now; a job moved earlier than the topic's head wakes
the workers at once. A job a worker holds (exit 4) or a dead one (exit 4) is
not moved. The answer shows the due time before and after: the job runs at
the new one or after it, never before.`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			to, err := whenFlags(at, in, by)
			if err != nil {
				return usageError{err}
			}
			s, err := a.store(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			r, err := s.Reschedule(cmd.Context(), argv[0], argv[1], to)
			if err != nil {
				return jobError(argv[0], argv[1], err)
			}
			return a.emit(httpapi.NewRescheduledView(r), func(w io.Writer) {
				row(w, "TOPIC", "ID", "WAS DUE", "DUE")
				row(w, r.Job.Topic, r.Job.ID, ms(r.OldRunAt), ms(r.RunAt))
				if r.Parked {
					fmt.Fprintf(w, "parked behind an earlier job of its ordering key %s: it runs once the key is free\n", r.Job.OrderingKey)
				}
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&at, "at", "", "the new due time: RFC 3339 or Unix ms")
	f.StringVar(&in, "in", "", "the new due time as a delay from now, on Redis's clock (e.g. 90m)")
	f.StringVar(&by, "by", "", "move the due time it has by this much: 2h, or -15m for earlier")
	return cmd
}

// whenFlags reads reschedule's --at, --in and --by, exactly one of them.
func whenFlags(at, in, by string) (queue.When, error) {
	given := 0
	for _, v := range []string{at, in, by} {
		if v != "" {
			given++
		}
	}
	if given != 1 {
		return queue.When{}, fmt.Errorf("give exactly one of --at, --in or --by")
	}
	switch {
	case at != "":
		t, err := parseTime(at)
		if err != nil {
			return queue.When{}, fmt.Errorf("--at %q: %w", at, err)
		}
		return queue.RescheduleAt(t), nil
	case in != "":
		d, err := time.ParseDuration(in)
		if err != nil || d < 0 {
			return queue.When{}, fmt.Errorf("--in %q: want a duration of 0 or more, e.g. 90m", in)
		}
		return queue.RescheduleIn(d), nil
	}
	d, err := time.ParseDuration(by)
	if err != nil {
		return queue.When{}, fmt.Errorf("--by %q: want a duration, e.g. 2h or -15m", by)
	}
	return queue.RescheduleBy(d), nil
}

func (a *app) getCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "get TOPIC ID",
		Example: `  delayq get order_close order_close:123 --json`,
		Short:   "Show a job's state and envelope (exit 3 when unknown); a durable job beyond the horizon shows as SQL only",
		Args:    args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			s, err := a.store(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			info, err := s.Get(cmd.Context(), argv[0], argv[1])
			if err != nil {
				return err
			}
			if info.State == queue.StateUnknown {
				return jobError(argv[0], argv[1], queue.ErrNotFound)
			}
			v := httpapi.NewJobView(info, true)
			return a.emit(v, func(w io.Writer) {
				state := string(v.State)
				if v.SQLOnly { // a durable job beyond the horizon: not in Redis yet
					state += " (SQL only)"
				}
				if v.CancelRequestedAt > 0 { // its handler runs on after a cancel
					state += " (cancel requested " + ms(v.CancelRequestedAt) + ")"
				}
				if v.Parked { // behind an earlier job of its ordering key
					state += " (parked)"
				}
				row(w, "TOPIC", "ID", "STATE", "AT", "ATTEMPT", "PRIORITY", "ORDERING KEY", "LAST ERROR", "PAYLOAD")
				row(w, topicCell(v.Topic, v.Partition), v.ID, state, ms(info.Score), fmt.Sprintf("%d/%d", v.Attempt, v.MaxAttempts), v.Priority, v.OrderingKey, v.LastError, v.PayloadText())
				if v.TraceParent != "" {
					fmt.Fprintln(w, "trace: "+v.TraceParent+" (its runs are spans of this trace)")
				}
			})
		},
	}
}

func (a *app) statsCmd() *cobra.Command {
	return &cobra.Command{
		Use: "stats [TOPIC...]",
		Example: `  delayq stats
  delayq stats order_close emails --json`,
		Short: "Counts per topic: due, overdue, in flight, dead; durability and a durable topic's waiting jobs in SQL (all topics when none given)",
		Long: `Counts per topic (all known topics when none given): in Redis the jobs
due, overdue, in flight and dead; the topic's durability (redis or durable);
whether an operator paused it (delayq pause);
and for a durable topic its waiting jobs in the SQL ledger, all (SQL) and
those due beyond queue.horizon (BEYOND), which are in SQL only until the
relay loads them. Directly on Redis and SQL, those are counted now; through
an instance's API (--api, or redis.mode embedded), they are the instance's
relay's last count ("-" where it runs no relay). RATE LIMIT is the
topic's configured limit, handler starts per second across the cluster
and burst ("-" for none). UNIQUE FOR is the topic's uniqueness window
(queue.topics.<t>.unique_for: how long a finished job's id stays taken;
"-" for none). WORKERS counts the live worker processes that
handle the topic (delayq workers); a topic with jobs due and none says so. --json prints the API's topic stats
(GET /v1/topics).`,
		RunE: func(cmd *cobra.Command, topics []string) error {
			s, err := a.store(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			all, err := s.Stats(cmd.Context(), topics)
			if err != nil {
				return err
			}
			return a.emit(all, func(w io.Writer) {
				row(w, "TOPIC", "DURABILITY", "PAUSED", "DUE", "OVERDUE", "PARKED", "OLDEST OVERDUE", "IN FLIGHT", "DEAD", "NEXT DUE", "SQL", "BEYOND", "RATE LIMIT", "UNIQUE FOR", "WORKERS")
				for _, s := range all {
					unique := "-"
					if s.UniqueForMs > 0 {
						unique = (time.Duration(s.UniqueForMs) * time.Millisecond).String()
					}
					inSQL, beyond := "-", "-"
					if s.SQL != nil {
						inSQL, beyond = strconv.FormatInt(s.SQL.Waiting, 10), strconv.FormatInt(s.SQL.BeyondHorizon, 10)
					}
					paused := "no"
					if s.Paused {
						paused = "yes"
					}
					consumers := strconv.Itoa(s.Consumers)
					if s.Unconsumed {
						consumers += " (none: its due jobs wait)"
					}
					row(w, s.Topic, s.Durability, paused, s.Due, s.DueNow, s.Parked, time.Duration(s.OldestOverdueMs)*time.Millisecond,
						s.InFlight, s.Dead, ms(s.NextDue), inSQL, beyond, rateLimitCell(s.RateLimit), unique, consumers)
				}
			})
		},
	}
}

// rateLimitCell shows a rate limit as "500/s burst 50", "-" for none.
func rateLimitCell(l *httpapi.RateLimitView) string {
	if l == nil {
		return "-"
	}
	return strconv.FormatFloat(l.PerSecond, 'f', -1, 64) + "/s burst " + strconv.Itoa(l.Burst)
}

// jobError says a job's unknown the same way whichever command asked and
// whichever store answered (the API's 404 or the backends' own error):
// "job TOPIC/ID: job not found", exit 3. Other errors pass unchanged.
func jobError(topic, id string, err error) error {
	if errors.Is(err, queue.ErrNotFound) {
		return withCode(ExitNotFound, fmt.Errorf("job %s/%s: %w", topic, id, queue.ErrNotFound))
	}
	return err
}

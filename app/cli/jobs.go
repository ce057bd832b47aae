package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/delayq/delayq/queue"
)

func (a *app) enqueueCmd() *cobra.Command {
	var payload, payloadFile, runAt string
	var delay time.Duration
	var maxAttempts int
	cmd := &cobra.Command{
		Use:   "enqueue TOPIC ID",
		Short: "Enqueue a job (the id is the idempotency key)",
		Args:  args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			j := queue.NewJob{ID: argv[1], Payload: []byte(payload), Delay: delay, MaxAttempts: maxAttempts}
			if payloadFile != "" {
				b, err := os.ReadFile(payloadFile)
				if err != nil {
					return usageError{err}
				}
				j.Payload = b
			}
			if runAt != "" {
				t, err := parseTime(runAt)
				if err != nil {
					return usageError{fmt.Errorf("--run-at %q: %w", runAt, err)}
				}
				j.RunAt = t
			}
			_, b, _, err := a.open(cmd)
			if err != nil {
				return err
			}
			defer b.Close()
			r, err := b.Queue.Enqueue(cmd.Context(), argv[0], j)
			if err != nil {
				return err
			}
			return a.emit(map[string]any{"topic": argv[0], "id": r.ID, "run_at": r.RunAt, "duplicate": r.Duplicate}, func(w io.Writer) {
				row(w, "TOPIC", "ID", "DUE", "DUPLICATE")
				row(w, argv[0], r.ID, ms(r.RunAt), r.Duplicate)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&payload, "payload", "", "payload (JSON, or any text)")
	f.StringVar(&payloadFile, "payload-file", "", "read the payload from this file (binary safe)")
	f.DurationVar(&delay, "delay", 0, "run after this delay, from Redis's clock (e.g. 30m)")
	f.StringVar(&runAt, "run-at", "", "run at this time: RFC 3339 or Unix ms")
	f.IntVar(&maxAttempts, "max-attempts", 0, "attempts before the job goes dead (0 = queue.default_max_attempts)")
	return cmd
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

func (a *app) cancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel TOPIC ID",
		Short: "Cancel a job that has not started (exit 3: unknown, 4: in flight or dead)",
		Args:  args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			_, b, _, err := a.open(cmd)
			if err != nil {
				return err
			}
			defer b.Close()
			j, err := b.Queue.Cancel(cmd.Context(), b.Ledger, argv[0], argv[1])
			if err != nil {
				return err
			}
			return a.emit(jobJSON(j, queue.StateUnknown, 0), func(w io.Writer) {
				row(w, "TOPIC", "ID", "CANCELLED")
				row(w, j.Topic, j.ID, "yes")
			})
		},
	}
}

func (a *app) getCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get TOPIC ID",
		Short: "Show a job's state and envelope (exit 3 when unknown)",
		Args:  args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			_, b, _, err := a.open(cmd)
			if err != nil {
				return err
			}
			defer b.Close()
			info, err := b.Queue.Get(cmd.Context(), argv[0], argv[1])
			if err != nil {
				return err
			}
			if info.State == queue.StateUnknown {
				return withCode(ExitNotFound, fmt.Errorf("job %s/%s: %w", argv[0], argv[1], queue.ErrNotFound))
			}
			j := info.Job
			return a.emit(jobJSON(j, info.State, info.Score), func(w io.Writer) {
				row(w, "TOPIC", "ID", "STATE", "AT", "ATTEMPT", "LAST ERROR", "PAYLOAD")
				row(w, j.Topic, j.ID, info.State, ms(info.Score), fmt.Sprintf("%d/%d", j.Attempt, j.MaxAttempts), j.LastError, string(j.Payload))
			})
		},
	}
}

// jobJSON is a job as the CLI prints it with --json.
func jobJSON(j *queue.Job, state queue.State, at int64) map[string]any {
	m := map[string]any{
		"topic": j.Topic, "id": j.ID, "attempt": j.Attempt, "max_attempts": j.MaxAttempts,
		"enqueued_at": j.EnqueuedAt, "run_at": j.RunAt, "last_error": j.LastError,
	}
	if state != queue.StateUnknown {
		m["state"], m["at"] = state, at
	}
	if json.Valid(j.Payload) {
		m["payload"] = json.RawMessage(j.Payload)
	} else {
		m["payload_base64"] = j.Payload
	}
	return m
}

func (a *app) statsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "stats [TOPIC...]",
		Short: "Counts per topic: due, overdue, in flight, dead (all topics when none given)",
		RunE: func(cmd *cobra.Command, topics []string) error {
			_, b, _, err := a.open(cmd)
			if err != nil {
				return err
			}
			defer b.Close()
			if len(topics) == 0 {
				if topics, err = b.Queue.Topics(cmd.Context()); err != nil {
					return err
				}
			}
			all := make([]queue.Stats, 0, len(topics))
			for _, t := range topics {
				s, err := b.Queue.Stats(cmd.Context(), t)
				if err != nil {
					return err
				}
				all = append(all, s)
			}
			return a.emit(all, func(w io.Writer) {
				row(w, "TOPIC", "DUE", "OVERDUE", "OLDEST OVERDUE", "IN FLIGHT", "DEAD", "NEXT DUE")
				for _, s := range all {
					row(w, s.Topic, s.Due, s.DueNow, time.Duration(s.OldestOverdueMs)*time.Millisecond, s.InFlight, s.Dead, ms(s.NextDue))
				}
			})
		},
	}
}

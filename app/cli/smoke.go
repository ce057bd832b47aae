package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/delayq/delayq/queue"
)

// SmokeTopic is the topic of the deploy self-check: every worker of `serve`
// and `worker` runs its handler, which marks the job as run.
const SmokeTopic = "delayq.smoke"

// smokeMarkTTL bounds how long a smoke job's mark stays in Redis.
const smokeMarkTTL = 10 * time.Minute

func smokeMarkKey(namespace, id string) string { return namespace + ":smoke:" + id }

// smokeHandler marks the job as run, with the time it started (Unix ms).
func smokeHandler(rdb redis.UniversalClient, namespace string) queue.Handler {
	return queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		return rdb.Set(ctx, smokeMarkKey(namespace, j.ID), time.Now().UnixMilli(), smokeMarkTTL).Err()
	})
}

func (a *app) smokeCmd() *cobra.Command {
	var delay, within time.Duration
	cmd := &cobra.Command{
		Use:     "smoke",
		Example: `  delayq smoke --api http://127.0.0.1:8080`,
		Short:   "Deploy self-check: enqueue a job due in 1 s and fail unless a worker ran it within 1.5 s",
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := a.store(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			ctx := cmd.Context()
			host, _ := os.Hostname()
			id := fmt.Sprintf("smoke:%s:%d:%d", host, os.Getpid(), time.Now().UnixNano())
			start := time.Now()
			r, err := s.Enqueue(ctx, SmokeTopic, queue.NewJob{ID: id, Delay: delay, MaxAttempts: 1})
			if err != nil {
				return err
			}
			deadline := start.Add(within)
			for {
				ranAt, ran, err := s.SmokeRan(ctx, id)
				if err != nil {
					return err
				}
				if ran {
					late := time.Duration(ranAt-r.RunAt) * time.Millisecond
					return a.emit(map[string]any{"ok": true, "job": id, "due": r.RunAt, "ran_at": ranAt, "late_ms": late.Milliseconds()},
						func(w io.Writer) { fmt.Fprintf(w, "ok: job %s ran %s after its due time\n", id, late) })
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("smoke: job %s did not run within %s of being enqueued: are workers running on %s?", id, within, s.Where())
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(10 * time.Millisecond):
				}
			}
		},
	}
	cmd.Flags().DurationVar(&delay, "delay", time.Second, "how far ahead the smoke job is due")
	cmd.Flags().DurationVar(&within, "within", 1500*time.Millisecond, "fail unless it ran this soon after enqueue")
	return cmd
}

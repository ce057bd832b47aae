package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/delayq/delayq/queue"
)

// workersCmd is `delayq workers`: the worker processes of the registry.
func (a *app) workersCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "workers",
		Short: "List the worker processes: host, pid, version, topics with handlers and jobs held, last heartbeat; live or gone",
		Long: `List the worker processes of the registry: each running delayq serve or
delayq worker (or a Go service's engine) writes its entry every few seconds,
idle or not, and removes it when it stops. One that stopped without a word
(killed, cut off from Redis) shows as gone once its heartbeat is 1.5
intervals old, and disappears after 10 minutes.`,
		Example: "  delayq workers --json",
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := a.store(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			list, err := s.Workers(cmd.Context())
			if err != nil {
				return err
			}
			return a.emit(list, func(w io.Writer) {
				if len(list) == 0 {
					fmt.Fprintln(w, "no workers: start delayq serve or delayq worker")
					return
				}
				row(w, "ID", "STATE", "HOST", "PID", "VERSION", "STARTED", "HEARTBEAT", "LEDGER", "TOPICS (handlers, jobs held)", "POOLS (handlers, jobs held: topic×weight)")
				for _, v := range list {
					var ts []string
					for _, t := range v.Topics {
						ts = append(ts, fmt.Sprintf("%s (%d, %d)", t.Topic, t.Concurrency, t.InFlight))
					}
					ledger := "ok"
					if !v.LedgerOK {
						ledger = "unreachable"
					}
					row(w, v.ID, v.State, v.Host, v.PID, orDash(v.Version), ms(v.StartedAt), ms(v.Heartbeat), ledger, strings.Join(ts, ", "), orDash(poolsOf(v)))
				}
			})
		},
	}
}

// poolsOf shows a worker's shared pools: "shared (8, 5: heavy×3, light×1)".
func poolsOf(v queue.WorkerInfo) string {
	var out []string
	for _, p := range v.Pools {
		var ts []string
		for _, t := range v.Topics {
			if t.Pool == p.Name {
				ts = append(ts, fmt.Sprintf("%s×%d", t.Topic, t.Weight))
			}
		}
		out = append(out, fmt.Sprintf("%s (%d, %d: %s)", p.Name, p.Concurrency, p.InFlight, strings.Join(ts, ", ")))
	}
	return strings.Join(out, "; ")
}

// Workers lists the instance's registry.
func (s *apiStore) Workers(ctx context.Context) ([]queue.WorkerInfo, error) {
	list, err := s.c.Workers(ctx)
	return list, s.explain(err)
}

// warnUnconsumed prints one line on stderr when no live worker handles
// topic: an enqueue or a pause is allowed (a producer may start first), but
// a typo in the topic's name should not go unnoticed. A failed look is
// silent: the command's own work is done.
func (a *app) warnUnconsumed(cmd *cobra.Command, s jobStore, topic string) {
	ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Second)
	defer cancel()
	list, err := s.Workers(ctx)
	if err != nil || queue.Consumers(list)[topic] > 0 {
		return
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "delayq: note: no running worker handles %s (delayq workers): its jobs wait until one does\n", topic)
}

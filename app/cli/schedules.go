package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/delayq/delayq/queue/periodic"
)

// schedulesCmd is `delayq schedules`: the periodic jobs of the config with
// their next run and the last tick any process enqueued.
func (a *app) schedulesCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "schedules",
		Example: `  delayq schedules --json`,
		Short:   "List the periodic jobs: spec, topic, next run, last tick enqueued",
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := a.store(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			list, err := s.Schedules(cmd.Context())
			if err != nil {
				return err
			}
			return a.emit(list, func(w io.Writer) {
				if len(list) == 0 {
					fmt.Fprintln(w, "no schedules: the configuration's periodic list is empty (see configs/delayq.yaml)")
					return
				}
				row(w, "NAME", "SPEC", "ZONE", "TOPIC", "PRIORITY", "MISSED", "NEXT RUN", "LAST TICK", "LAST JOB")
				for _, i := range list {
					row(w, i.Name, i.Spec, orDash(i.Location), i.Topic, i.Priority, i.Missed, ms(i.NextRun), ms(i.LastTick), orDash(i.LastJobID))
				}
			})
		},
	}
}

// orDash is s, or "-" for nothing.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Schedules lists the config's schedules; the last ticks come from Redis
// (redis topics) and SQL (durable ones).
func (s *directStore) Schedules(ctx context.Context) ([]periodic.Info, error) {
	sched, err := newScheduler(s.cfg, s.b, s.log)
	if err != nil || sched == nil {
		return []periodic.Info{}, err
	}
	return sched.List(ctx)
}

// Schedules lists the schedules of the instance's config.
func (s *apiStore) Schedules(ctx context.Context) ([]periodic.Info, error) {
	list, err := s.c.Schedules(ctx)
	return list, s.explain(err)
}

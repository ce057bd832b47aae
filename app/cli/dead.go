package cli

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/queue"
)

func (a *app) deadCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "dead", Short: "Dead jobs: list, requeue, purge, delete one"}
	var offset, limit int
	list := &cobra.Command{
		Use:     "list TOPIC",
		Example: `  delayq dead list emails --limit 20`,
		Short:   "List dead jobs, newest first, with their last error",
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if offset < 0 || limit < 1 || limit > queue.MaxPage {
				return usageError{fmt.Errorf("--offset %d, --limit %d: want an offset of 0 or more and a limit of 1-%d", offset, limit, queue.MaxPage)}
			}
			s, err := a.store(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			p, err := s.Dead(cmd.Context(), argv[0], offset, limit)
			if err != nil {
				return err
			}
			out := make([]httpapi.JobView, 0, len(p.Jobs))
			for _, j := range p.Jobs {
				out = append(out, httpapi.NewJobView(j, true))
			}
			return a.emit(map[string]any{"total": p.Total, "jobs": out}, func(w io.Writer) {
				row(w, "ID", "DIED", "ATTEMPTS", "PRIORITY", "LAST ERROR")
				for _, v := range out {
					// The priority a requeue puts the job back at.
					row(w, v.ID, ms(v.DiedAt), v.Attempt, v.Priority, v.LastError)
				}
				fmt.Fprintf(w, "(%d of %d dead)\n", len(p.Jobs), p.Total)
			})
		},
	}
	list.Flags().IntVar(&offset, "offset", 0, "skip this many")
	list.Flags().IntVar(&limit, "limit", 50, "show at most this many (1-1000)")

	var all bool
	requeue := &cobra.Command{
		Use: "requeue TOPIC [ID] [--all]",
		Example: `  delayq dead requeue emails welcome:42
  delayq dead requeue emails --all`,
		Short: "Give dead jobs a fresh set of attempts, due now",
		Args:  args(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			switch {
			case all && len(argv) == 2:
				return usageError{fmt.Errorf("give a job id or --all, not both")}
			case !all && len(argv) == 1:
				return usageError{fmt.Errorf("give the id of the dead job to requeue, or --all for every dead job of %s", argv[0])}
			}
			s, err := a.store(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			n := 1
			if all {
				n, err = s.RequeueAllDead(cmd.Context(), argv[0])
			} else {
				err = s.RequeueDead(cmd.Context(), argv[0], argv[1])
			}
			if err != nil {
				return err
			}
			return a.emit(map[string]any{"requeued": n}, func(w io.Writer) { fmt.Fprintf(w, "requeued %d\n", n) })
		},
	}
	requeue.Flags().BoolVar(&all, "all", false, "requeue every dead job of the topic")

	var olderThan time.Duration
	var purgeAll bool
	purge := &cobra.Command{
		Use:   "purge TOPIC --all [--older-than D]",
		Short: "Delete a topic's dead jobs for good (those that died more than --older-than ago)",
		Long: `Delete a topic's dead jobs for good, with their payloads and last errors.
Nothing can bring them back, so purge insists on --all, as requeue does
for all of a topic's dead jobs; --older-than keeps the recent ones.`,
		Example: "  delayq dead purge emails --all --older-than 168h",
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if !purgeAll {
				return usageError{fmt.Errorf("purge deletes %s's dead jobs for good: give --all (with --older-than D to keep those that died within D)", argv[0])}
			}
			if olderThan < 0 {
				return usageError{fmt.Errorf("--older-than %s: must not be negative", olderThan)}
			}
			s, err := a.store(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			n, err := s.PurgeDead(cmd.Context(), argv[0], time.Now().Add(-olderThan).UnixMilli())
			if err != nil {
				return err
			}
			return a.emit(map[string]any{"purged": n}, func(w io.Writer) { fmt.Fprintf(w, "purged %d\n", n) })
		},
	}
	purge.Flags().DurationVar(&olderThan, "older-than", 0, "keep jobs that died more recently than this")
	purge.Flags().BoolVar(&purgeAll, "all", false, "confirm: delete every dead job of the topic (older than --older-than)")
	del := &cobra.Command{
		Use:     "delete TOPIC ID",
		Example: `  delayq dead delete emails welcome:42`,
		Short:   "Delete one dead job for good (its history row says purged)",
		Long: `Delete one dead job for good, with its payload and last error; its
history row turns to purged. A job that is not dead (waiting, running,
unknown) is left alone and the command exits 3.`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			topic, id := argv[0], argv[1]
			if err := queue.ValidateTopic(topic); err != nil {
				return err
			}
			if err := queue.ValidateID(id); err != nil {
				return err
			}
			s, err := a.store(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			if err := s.DeleteDead(cmd.Context(), topic, id); err != nil {
				if errors.Is(err, queue.ErrNotFound) {
					return withCode(ExitNotFound, fmt.Errorf("no dead job %s in %s: nothing deleted (%w)", id, topic, queue.ErrNotFound))
				}
				return err
			}
			return a.emit(httpapi.DeleteDeadResponse{Topic: topic, ID: id, Deleted: true},
				func(w io.Writer) { fmt.Fprintf(w, "deleted dead job %s of %s\n", id, topic) })
		},
	}
	cmd.AddCommand(list, requeue, purge, del)
	return cmd
}

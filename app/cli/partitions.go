package cli

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/delayq/delayq/queue"
)

// partitionsCmd is `delayq partitions TOPIC [N]`.
func (a *app) partitionsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "partitions TOPIC [N]",
		Short: "Show a topic's partition count, or raise it to N",
		Long: `Show a topic's partition count and every count whose partitions may still
hold jobs; with N, raise the count to N first (docs/design.md §7.1). New
enqueues go to the N partitions, which spread the topic over a Redis
Cluster's masters; every worker claims from them within
queue.layout_refresh, and the jobs already enqueued drain where they are.
A count can only be raised, up to 256. Logged as an audit line.`,
		Example: "  delayq partitions order_close\n  delayq partitions order_close 8",
		Args:    args(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := queue.ValidateTopic(argv[0]); err != nil {
				return err
			}
			set := 0
			if len(argv) == 2 {
				n, err := strconv.Atoi(argv[1])
				if err != nil || n < 1 || n > 256 {
					return usageError{fmt.Errorf("N %q: want a partition count of 1-256", argv[1])}
				}
				set = n
			}
			s, err := a.store(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			v, err := s.Partitions(cmd.Context(), argv[0], set)
			if err != nil {
				return err
			}
			return a.emit(v, func(w io.Writer) {
				row(w, "TOPIC", "PARTITIONS", "LAYOUTS")
				row(w, v.Topic, v.Partitions, fmt.Sprint(v.Layouts))
			})
		},
	}
}

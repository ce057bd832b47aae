package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/delayq/delayq/queue"
)

// pauseCmd is `delayq pause TOPIC` (paused true) or `delayq resume TOPIC`.
func (a *app) pauseCmd(paused bool) *cobra.Command {
	use, short, long := "resume TOPIC", "Resume a paused topic: every worker claims its jobs again",
		`Resume a paused topic: every worker process claims its jobs again at once,
each no more than its free handler slots. Resuming a topic that is not paused
changes nothing. Logged as an audit line (who: cli:<user>@<host> directly, the
API token's fingerprint through an instance's API).`
	if paused {
		use, short, long = "pause TOPIC", "Pause a topic: no worker claims its jobs until it is resumed",
			`Pause a topic: from the moment the command returns no worker process claims
its jobs; handlers already running finish, and jobs keep falling due and wait
until "delayq resume TOPIC". The pause is kept in SQL (it survives worker
restarts and a Redis data loss) and applied in Redis. Pausing a paused topic
changes nothing and prints the pause in force. Logged as an audit line (who:
cli:<user>@<host> directly, the API token's fingerprint through an instance's
API).`
	}
	return &cobra.Command{
		Use: use, Short: short, Long: long,
		Example: "  delayq " + strings.Fields(use)[0] + " order_close",
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := queue.ValidateTopic(argv[0]); err != nil {
				return err
			}
			s, err := a.store(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			st, err := s.SetPaused(cmd.Context(), argv[0], paused)
			if err != nil {
				return err
			}
			if paused {
				a.warnUnconsumed(cmd, s, argv[0]) // a typo's pause would stay on the dashboard
			}
			return a.emit(st, func(w io.Writer) {
				state, verb := "running", "resumed"
				if st.Paused {
					state, verb = "paused", "paused"
				}
				if !st.Changed {
					verb = "already " + state
				}
				fmt.Fprintf(w, "topic %s %s (since %s, by %s)\n", st.Topic, verb, ms(st.ChangedAt), printable(st.ChangedBy))
			})
		},
	}
}

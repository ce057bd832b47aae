package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func (a *app) recoverCmd() *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use: "recover",
		Example: `  delayq recover --dry-run
  delayq recover`,
		Short: "Run recovery once now: stale ledger rows whose jobs Redis lost go back to Redis",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig(cmd)
			if err != nil {
				return err
			}
			s, err := a.storeFor(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer s.Close()
			rep, runErr := s.Recover(cmd.Context(), dryRun || cfg.Recovery.DryRun)
			if rep == nil {
				return runErr
			}
			if err := a.emit(rep, func(w io.Writer) {
				row(w, "SKIPPED", "DRY RUN", "SCANNED", "STILL TRACKED", "RE-ENQUEUED", "ERRORS", "DATA LOSS", "DURATION")
				row(w, rep.Skipped, rep.DryRun, rep.Scanned, rep.StillTracked, rep.Reenqueued, rep.Errors, rep.DataLossDetected(), rep.Duration)
			}); err != nil {
				return err
			}
			if rep.Skipped {
				fmt.Fprintln(a.errOut, "delayq: another recoverer holds the lock; this run was skipped")
			}
			return runErr
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report what would be re-enqueued; change nothing")
	return cmd
}

package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/delayq/delayq/recovery"
)

func (a *app) recoverCmd() *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "recover",
		Short: "Run recovery once now: stale ledger rows whose jobs Redis lost go back to Redis",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, b, log, err := a.open(cmd)
			if err != nil {
				return err
			}
			defer b.Close()
			heartbeat := cfg.Worker.Heartbeat
			if heartbeat == 0 {
				heartbeat = cfg.Worker.Lease / 3
			}
			r, err := recovery.New(b.Queue, b.Ledger, recovery.Config{
				Grace: cfg.Recovery.Grace, HeartbeatInterval: heartbeat, LockTTL: cfg.Recovery.LockTTL,
				DryRun: dryRun || cfg.Recovery.DryRun, Logger: log,
			})
			if err != nil {
				return err
			}
			rep, runErr := r.RunOnce(cmd.Context())
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

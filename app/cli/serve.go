package cli

import (
	"github.com/spf13/cobra"
)

func (a *app) serveCmd() *cobra.Command {
	var noAPI, noWorkers, noRecovery, noSweeper, noPeriodic bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the API, the workers, the recoverer, the order sweeper (with orders.enabled) and the periodic jobs (each can be switched off)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig(cmd)
			if err != nil {
				return err
			}
			p := parts{
				api:      cfg.HTTP.Enabled && !noAPI,
				workers:  cfg.Worker.Enabled && !noWorkers,
				recovery: cfg.Recovery.Enabled && !noRecovery,
				sweeper:  cfg.Orders.Enabled && !noSweeper,
				periodic: !noPeriodic,
			}
			log := newLogger(cfg.Log, a.errOut)
			s, err := assemble(cmd.Context(), cfg, log, p, a.version)
			if err != nil {
				return err
			}
			return s.run(cmd.Context(), p)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&noAPI, "no-api", false, "do not serve the HTTP API")
	f.BoolVar(&noWorkers, "no-workers", false, "do not run workers")
	f.BoolVar(&noRecovery, "no-recovery", false, "do not run the recoverer's schedule nor the durable topics' relay")
	f.BoolVar(&noSweeper, "no-sweeper", false, "do not run the order sweeper")
	f.BoolVar(&noPeriodic, "no-periodic", false, "do not enqueue the periodic jobs of the config (other processes may)")
	return cmd
}

func (a *app) workerCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "worker",
		Short: "Run workers and the periodic jobs only (no API: many worker processes can share a host)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig(cmd)
			if err != nil {
				return err
			}
			p := parts{workers: true, periodic: true}
			s, err := assemble(cmd.Context(), cfg, newLogger(cfg.Log, a.errOut), p, a.version)
			if err != nil {
				return err
			}
			return s.run(cmd.Context(), p)
		},
	}
}

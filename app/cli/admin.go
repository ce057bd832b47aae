package cli

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/delayq/delayq/app/backend"
	"github.com/delayq/delayq/jobs/orderclose"
)

func (a *app) migrateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Create or update the ledger tables, upgrading them for durable topics (and the orders tables when orders are enabled)",
		Long: `Create the ledger tables, or bring existing ones up to date: this runs
the ledger's Migrate, which also upgrades a ledger made before durable topics
(the scheduled state, enqueued_at, the (state, run_at) index; the same steps
as deployments/mysql/upgrade-durable.sql), keeping its rows. With
orders.enabled it creates or updates the orders tables too. Safe to run again.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, b, _, err := a.open(cmd)
			if err != nil {
				return err
			}
			defer b.Close()
			if err := b.Ledger.Migrate(cmd.Context()); err != nil {
				return err
			}
			if cfg.Orders.Enabled {
				if err := migrateOrders(cmd.Context(), b); err != nil {
					return err
				}
			}
			return a.emit(map[string]any{"migrated": true}, func(w io.Writer) { fmt.Fprintln(w, "migrated") })
		},
	}
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := map[string]string{"version": a.version, "go": runtime.Version()}
			return a.emit(v, func(w io.Writer) { fmt.Fprintf(w, "delayq %s (%s)\n", a.version, runtime.Version()) })
		},
	}
}

// migrateOrders creates or updates the orders tables.
func migrateOrders(ctx context.Context, b *backend.Backends) error {
	return orderclose.Migrate(ctx, b.DB)
}

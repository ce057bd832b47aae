package cli

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/spf13/cobra"

	"github.com/delayq/delayq/app/backend"
	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/jobs/orderclose"
	"github.com/delayq/delayq/ledger"
)

func (a *app) migrateCmd() *cobra.Command {
	var status, print bool
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the ledger's missing schema migrations (--status: say where the database stands)",
		Long: `Bring the ledger tables up to the latest numbered migration this build
knows (ledger/migrations), recording each in dq_schema_migrations. A database
made by an earlier release, before schema versions, keeps its rows: migrate
records the steps its tables already have and applies the rest. With
orders.enabled it creates or updates the orders tables too. Safe to run again,
and from several processes at once.

--status changes nothing and lists every migration, applied or pending; it
exits 5 while any is pending (0 when up to date), for a deploy script to
check. --print changes nothing and prints the SQL that migrate would run now
on the ledger's tables (not the orders tables), for a deployment that applies
schema changes by hand; nothing when every migration is recorded. migrate
opens only the SQL database: Redis need not be reachable.`,
		Example: `  delayq migrate
  delayq migrate --status --json
  delayq migrate --print > upgrade.sql`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if status && print {
				return usageError{fmt.Errorf("--status and --print: give one of them")}
			}
			cfg, err := a.loadConfig(cmd)
			if err != nil {
				return err
			}
			// SQL only: a schema change must not wait on Redis, nor need
			// a host that reaches it.
			b, err := backend.OpenLedger(cfg, newLogger(cfg.Log, a.errOut))
			if err != nil {
				return err
			}
			defer b.Close()
			ctx := cmd.Context()
			switch {
			case print:
				// One list per ledger shard, home first: each shard's
				// database is migrated on its own.
				var all [][]string
				for i, l := range b.Shards.All() {
					stmts, err := l.MigrationSQL(ctx)
					if err != nil {
						return fmt.Errorf("ledger shard %d: %w", i, err)
					}
					if stmts == nil {
						stmts = []string{}
					}
					all = append(all, stmts)
				}
				out := map[string]any{"statements": all[0]}
				if len(all) > 1 {
					out["shard_statements"] = all[1:] // sql.shards[i]'s at i
				}
				return a.emit(out, func(w io.Writer) {
					for i, stmts := range all {
						if i > 0 {
							fmt.Fprintf(w, "\n-- ledger shard %d (sql.shards[%d]): run these on its database\n", i, i-1)
						}
						fmt.Fprintf(w, "-- delayq ledger migrations for the tables %s* (%s), from delayq %s: %d statements\n",
							cfg.SQL.TablePrefix, cfg.SQL.Driver, a.version, len(stmts))
						for _, s := range stmts {
							fmt.Fprintf(w, "%s;\n", s)
						}
					}
				})
			case status:
				st, err := b.Ledger.MigrationStatus(ctx)
				if err != nil {
					return err
				}
				if err := a.emitSchemaStatus(st, b.Ledger.SchemaVersionTable(), false); err != nil {
					return err
				}
				if n := len(st.Pending()); n > 0 {
					return withCode(ExitPending, fmt.Errorf("%d migrations pending: run delayq migrate", n))
				}
				// The further shards' schemas: listed above is the home
				// shard's.
				for i, l := range b.Shards.All()[1:] {
					st, err := l.MigrationStatus(ctx)
					if err != nil {
						return fmt.Errorf("ledger shard %d: %w", i+1, err)
					}
					if n := len(st.Pending()); n > 0 {
						return withCode(ExitPending, fmt.Errorf("ledger shard %d: %d migrations pending: run delayq migrate", i+1, n))
					}
				}
				return nil
			}
			if err := b.Shards.Migrate(ctx); err != nil {
				return err
			}
			if cfg.Orders.Enabled {
				if err := migrateOrders(ctx, b); err != nil {
					return err
				}
			}
			st, err := b.Ledger.MigrationStatus(ctx)
			if err != nil {
				return err
			}
			return a.emitSchemaStatus(st, b.Ledger.SchemaVersionTable(), true)
		},
	}
	cmd.Flags().BoolVar(&status, "status", false, "list the migrations, applied and pending; change nothing")
	cmd.Flags().BoolVar(&print, "print", false, "print the SQL migrate would run now; change nothing")
	return cmd
}

// schemaStatusJSON is migrate's --json output.
type schemaStatusJSON struct {
	httpapi.SchemaResponse // the same shape as GET /v1/schema
	// Migrated is true after delayq migrate (without --status), as the
	// command answered before schema versions.
	Migrated bool `json:"migrated,omitempty"`
}

// emitSchemaStatus prints where the database's schema stands; migrated
// says it follows a migration.
func (a *app) emitSchemaStatus(st ledger.SchemaStatus, table string, migrated bool) error {
	return a.emit(schemaStatusJSON{SchemaResponse: httpapi.NewSchemaResponse(st, table), Migrated: migrated}, func(w io.Writer) {
		state := "up to date"
		if n := len(st.Pending()); n > 0 {
			state = fmt.Sprintf("%d pending (run delayq migrate)", n)
		}
		fmt.Fprintf(w, "schema version %d of %d, %s\n", st.Version, st.Latest, state)
		if st.Untracked {
			fmt.Fprintln(w, "tables made before schema versions: migrate records what they have")
		}
		if len(st.Unknown) > 0 {
			fmt.Fprintf(w, "recorded by a newer release: %v\n", st.Unknown)
		}
		row(w, "VERSION", "NAME", "STATE", "AT")
		for _, m := range st.Migrations {
			state, at := "pending", ""
			if m.Applied {
				state = m.How
			}
			if !m.AppliedAt.IsZero() {
				at = m.AppliedAt.Format("2006-01-02 15:04:05.000Z07:00")
			}
			row(w, fmt.Sprintf("%04d", m.Version), m.Name, state, at)
		}
	})
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
	return orderclose.Migrate(ctx, ordersLedger(b).DB())
}

// ordersLedger is the ledger shard the orders tables live on: the one of
// the close topic's own name, where each order's transaction writes its
// close job (dataplane.Client.EnqueueTx over shards), so that the two
// commit together.
func ordersLedger(b *backend.Backends) *ledger.Ledger {
	return b.Shards.All()[dataplane.ShardOf(orderclose.Topic, b.Shards.Len())]
}

// warnPendingMigrations logs, at start, the migrations a process that does
// not migrate by itself (sql.auto_migrate: false) finds missing: the
// feature they bring fails until an operator runs delayq migrate.
func warnPendingMigrations(ctx context.Context, shards *ledger.Shards, log logrus.FieldLogger) {
	for i, led := range shards.All() {
		log := log
		if shards.Len() > 1 {
			log = log.WithField("shard", i)
		}
		st, err := led.MigrationStatus(ctx)
		if err != nil {
			log.WithError(err).Warn("could not read the ledger's schema version")
			continue
		}
		if pending := st.Pending(); len(pending) > 0 {
			names := make([]string, len(pending))
			for i, m := range pending {
				names[i] = m.String()
			}
			log.WithField("pending", strings.Join(names, ",")).
				Warnf("the ledger's schema is at version %d of %d: run delayq migrate", st.Version, st.Latest)
		}
	}
}

// Package cli is the delayq command line: serve, worker, demo, and the
// operator's commands (enqueue, cancel, get, stats, dead, ledger, recover,
// migrate, smoke, version). Output is a table for people and JSON (--json)
// for scripts; exit codes are stable (see the Exit constants). The
// operator's commands work on Redis and SQL directly when those are
// configured, and through a running instance's API otherwise (see store).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/delayq/delayq/app/backend"
	"github.com/delayq/delayq/app/config"
	"github.com/delayq/delayq/queue"
)

// Exit codes that scripts can rely on.
const (
	ExitOK       = 0 // done
	ExitFailure  = 1 // the command failed (backend or instance down, handler failed, ...)
	ExitUsage    = 2 // bad flags, arguments or configuration (an API token the instance refuses too)
	ExitNotFound = 3 // the job (or dead job) does not exist
	ExitConflict = 4 // the job is in flight or dead and cannot be cancelled or rescheduled
	ExitPending  = 5 // migrate --status: the ledger's database lacks migrations
)

// exitError carries an exit code up to Main.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func withCode(code int, err error) error { return &exitError{code: code, err: err} }

// app is what every command shares: the streams, the flags, and the
// configuration once loaded.
type app struct {
	out, errOut io.Writer
	version     string
	json        bool
	cfgPath     string
	root        *cobra.Command
}

// Main runs the command line with args (without the program name) and
// returns the process's exit code.
func Main(ctx context.Context, args []string, out, errOut io.Writer, version string) int {
	a := &app{out: out, errOut: errOut, version: version}
	root := a.newRoot()
	root.SetArgs(args)
	root.SetOut(out)
	root.SetErr(errOut)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintln(errOut, "delayq:", err)
	var ee *exitError
	var le *config.LoadError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, config.ErrInvalid), errors.As(err, &le), errors.Is(err, queue.ErrInvalid), isUsage(err),
		strings.HasPrefix(err.Error(), "unknown command "): // cobra's, for the root's subcommands
		return ExitUsage
	case errors.Is(err, queue.ErrNotFound):
		return ExitNotFound
	case errors.Is(err, queue.ErrInFlight), errors.Is(err, queue.ErrDead), errors.Is(err, queue.ErrContended):
		return ExitConflict
	}
	return ExitFailure
}

// usageError marks cobra's own argument and flag errors.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

func isUsage(err error) bool {
	var u usageError
	return errors.As(err, &u)
}

func (a *app) newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "delayq",
		Short:         "delayq: a durable delayed-job queue on Redis with a SQL ledger",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	a.root = root
	pf := root.PersistentFlags()
	config.AddFlags(pf)
	pf.BoolVar(&a.json, "json", false, "print JSON instead of tables")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	operator := []*cobra.Command{
		a.enqueueCmd(), a.cancelCmd(), a.rescheduleCmd(), a.getCmd(), a.jobsCmd(), a.statsCmd(),
		a.deadCmd(), a.ledgerCmd(), a.recoverCmd(), a.smokeCmd(),
		a.pauseCmd(true), a.pauseCmd(false), a.partitionsCmd(),
		a.schedulesCmd(), a.historyCmd(), a.workersCmd(), a.productsCmd(),
	}
	names := make([]string, 0, len(operator))
	for _, c := range operator {
		names = append(names, c.Name())
		setStoreHelp(c)
	}
	root.Long = root.Short + "\n\n" + fmt.Sprintf(storeHelp, wrapWords(strings.Join(names, ", ")+")", 80-len("Where the operator commands ("), 80))
	root.AddCommand(a.serveCmd(), a.workerCmd(), a.demoCmd())
	root.AddCommand(operator...)
	root.AddCommand(a.migrateCmd(), a.versionCmd(), a.benchCmd())
	root.InitDefaultCompletionCmd() // now, so that the walk below covers it
	refuseUnknownSubcommands(root)
	return root
}

// refuseUnknownSubcommands makes every command that only groups others
// (dead, ledger, bench, completion, ...) refuse an unknown subcommand as
// bad usage (exit 2), where cobra prints the help and exits 0; with no
// argument it still prints the help.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if c.HasParent() && c.HasSubCommands() && !c.Runnable() {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unknown command %q for %q (see %s --help)", args[0], cmd.CommandPath(), cmd.CommandPath())}
			}
			return cmd.Help()
		}
	}
}

// storeHelp says where the operator commands find the jobs (see store); %s
// is the list of the commands.
const storeHelp = `Where the operator commands (%s find the jobs:
  - --api URL (cli.api, DELAYQ_CLI_API) given: through that instance's HTTP API;
  - else, with redis.mode embedded (the default: no Redis configured): through
    the API of the instance running at http.listen (127.0.0.1:8080 by default),
    since an embedded Redis of the command's own would be thrown away with it;
    if none answers there, the command refuses and does nothing;
  - else (a Redis configured: redis.mode single, sentinel or cluster): on
    Redis and SQL directly.
Through an API, http.token (DELAYQ_HTTP_TOKEN) is sent as the bearer token.`

// storeHint points an operator command's help at the root's storeHelp,
// which would otherwise repeat on every page.
const storeHint = `It works through a running instance's API, or on Redis and SQL directly
when a Redis is configured: see delayq --help.`

// setStoreHelp adds storeHint to c and its subcommands, after their Long
// (their Short when they have none).
func setStoreHelp(c *cobra.Command) {
	if c.Long == "" {
		c.Long = c.Short
	}
	c.Long += "\n\n" + storeHint
	for _, sub := range c.Commands() {
		setStoreHelp(sub)
	}
}

// args wraps a cobra positional-argument check so its error is a usage error.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			return usageError{fmt.Errorf("%s (usage: %s)", argProblem(cmd.Use, a, err), cmd.UseLine())}
		}
		return nil
	}
}

// argProblem says what is wrong with the arguments a of a command whose
// Use line is use: the names of the ones missing (TOPIC, ID), or the ones
// that are one too many; err's own words when neither fits.
func argProblem(use string, a []string, err error) string {
	var required, all []string
	for _, f := range strings.Fields(use)[1:] {
		if strings.HasPrefix(f, "-") || strings.HasPrefix(f, "[-") || strings.HasPrefix(f, "(") {
			break // flags from here on
		}
		all = append(all, strings.Trim(f, "[]."))
		if !strings.HasPrefix(f, "[") {
			required = append(required, f)
		}
	}
	switch {
	case len(a) < len(required):
		return "missing " + strings.Join(required[len(a):], " ")
	case len(a) > len(all) && !strings.Contains(use, "...]"):
		return fmt.Sprintf("too many arguments: %q", strings.Join(a[len(all):], " "))
	}
	return err.Error()
}

// loadConfig reads the configuration from --config, the environment and
// the flags, with the requirements of the modules it enables.
func (a *app) loadConfig(cmd *cobra.Command) (config.Config, error) {
	path, _ := cmd.Flags().GetString("config")
	cfg, err := config.Load(path, cmd.Flags())
	if err != nil {
		return cfg, err
	}
	return cfg, requireOrders(&cfg)
}

// open loads the configuration and opens the backends, for the commands
// that work on them directly.
func (a *app) open(cmd *cobra.Command) (config.Config, *backend.Backends, logrus.FieldLogger, error) {
	cfg, err := a.loadConfig(cmd)
	if err != nil {
		return cfg, nil, nil, err
	}
	b, log, err := a.openBackends(cmd.Context(), cfg)
	return cfg, b, log, err
}

// openBackends opens cfg's backends for an operator command.
func (a *app) openBackends(ctx context.Context, cfg config.Config) (*backend.Backends, logrus.FieldLogger, error) {
	log := newLogger(cfg.Log, a.errOut)
	// Operator commands read and write jobs; creating tables is for serve,
	// worker and migrate.
	cfg.SQL.AutoMigrate = false
	b, err := backend.Open(ctx, cfg, log)
	if err != nil {
		return nil, nil, err
	}
	return b, log, nil
}

// wrapWords breaks s at spaces so that its first line holds at most first
// characters and the others at most width.
func wrapWords(s string, first, width int) string {
	var b strings.Builder
	room := first
	for i, w := range strings.Fields(s) {
		switch {
		case i == 0:
		case len(w)+1 > room:
			b.WriteString("\n")
			room = width
		default:
			b.WriteString(" ")
			room--
		}
		b.WriteString(w)
		room -= len(w)
	}
	return b.String()
}

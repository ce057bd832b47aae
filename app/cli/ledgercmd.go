package cli

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

func (a *app) ledgerCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "ledger", Short: "Audit the ledger: jobs waiting, in flight, retrying, stale"}
	list := a.ledgerListCmd()

	var grace time.Duration
	var staleLimit int
	stale := &cobra.Command{
		Use:     "stale",
		Example: `  delayq ledger stale --json`,
		Short:   "Jobs whose lease passed more than --grace ago: stuck, and since when",
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkLimit(staleLimit); err != nil {
				return err
			}
			s, err := a.store(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			rows, err := s.Stale(cmd.Context(), time.Now().Add(-grace).UnixMilli(), staleLimit)
			if err != nil {
				return err
			}
			return a.emitEntries(rows)
		},
	}
	stale.Flags().DurationVar(&grace, "grace", 0, "how long past its lease a row must be")
	stale.Flags().IntVar(&staleLimit, "limit", 100, "at most this many rows")
	cmd.AddCommand(list, stale)
	return cmd
}

// checkLimit refuses a --limit the ledger would.
func checkLimit(limit int) error {
	if limit < 1 {
		return usageError{fmt.Errorf("--limit %d: must be positive", limit)}
	}
	return nil
}

// emitEntries prints ledger rows as the API shows them (no payload: it may
// hold personal data, and the audit is about where jobs are).
func (a *app) emitEntries(rows []ledger.Entry) error {
	out := make([]httpapi.LedgerRow, len(rows))
	for i, r := range rows {
		out[i] = httpapi.NewLedgerRow(r)
	}
	return a.emit(out, func(w io.Writer) {
		row(w, "TOPIC", "ID", "STATE", "ATTEMPT", "CLAIMED", "LEASE UNTIL", "WORKER", "LAST ERROR")
		for _, r := range out {
			row(w, topicCell(r.Topic, r.Partition), r.JobID, r.State, r.Attempt, ms(r.ClaimedAt), ms(r.LeaseUntil), r.Worker, r.LastError)
		}
	})
}

// ledgerListFlags are ledger list's flags as given.
type ledgerListFlags struct {
	state, topic, dueAfter, dueBefore, cursor string
	limit                                     int
}

func (a *app) ledgerListCmd() *cobra.Command {
	var fl ledgerListFlags
	cmd := &cobra.Command{
		Use: "list",
		Example: `  delayq ledger list --state in_flight --topic order_close
  delayq ledger list --due-before 2026-12-24T00:00:00Z`,
		Short: "Ledger rows by state, topic and due time, a page at a time",
		Long: `Ledger rows by state, topic and due time, a page at a time.

With --state, rows come by due time (then id); without, by id. A page that
is not the last ends with the --cursor of the next one (next_cursor with
--json); give it back with the same filters. docs/audit.md has the SQL for
the questions this does not answer.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := fl.filter()
			if err != nil {
				return err
			}
			s, err := a.store(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			p, err := s.List(cmd.Context(), f)
			if err != nil {
				return err
			}
			return a.emit(p, func(w io.Writer) {
				row(w, "TOPIC", "ID", "STATE", "ATTEMPT", "PRIORITY", "DUE", "CLAIMED", "LEASE UNTIL", "WORKER", "LAST ERROR")
				for _, r := range p.Rows {
					row(w, topicCell(r.Topic, r.Partition), r.JobID, r.State, r.Attempt, r.Priority, ms(r.RunAt), ms(r.ClaimedAt), ms(r.LeaseUntil), r.Worker, r.LastError)
				}
				if p.NextCursor != "" {
					fmt.Fprintf(w, "(more: --cursor %s)\n", p.NextCursor)
				}
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&fl.state, "state", "", "only rows in this state: waiting, in_flight or retrying (the older scheduled and in-progress are read as waiting and in_flight)")
	f.StringVar(&fl.topic, "topic", "", "only this topic")
	f.StringVar(&fl.dueAfter, "due-after", "", "only rows due after this time: RFC 3339 or Unix ms")
	f.StringVar(&fl.dueBefore, "due-before", "", "only rows due before this time: RFC 3339 or Unix ms")
	f.StringVar(&fl.cursor, "cursor", "", "the page after this cursor (as the previous page ended)")
	f.IntVar(&fl.limit, "limit", 100, "at most this many rows (1-1000)")
	return cmd
}

// filter checks the flags; a bad one is a usage error naming it.
func (fl ledgerListFlags) filter() (ledger.ListFilter, error) {
	f := ledger.ListFilter{Topic: fl.topic, Limit: fl.limit}
	if fl.limit < 1 || fl.limit > maxLedgerPage {
		return f, usageError{fmt.Errorf("--limit %d: want 1-%d", fl.limit, maxLedgerPage)}
	}
	if fl.state != "" {
		st, err := queue.ParseState(fl.state)
		if err != nil || !ledger.ValidState(st) {
			return f, usageError{fmt.Errorf("--state %q: want waiting, in_flight or retrying", fl.state)}
		}
		f.State = st
	}
	for _, t := range []struct {
		name, value string
		to          *int64
	}{{"due-after", fl.dueAfter, &f.DueAfter}, {"due-before", fl.dueBefore, &f.DueBefore}} {
		if t.value == "" {
			continue
		}
		ms, err := parseTime(t.value)
		if err == nil && ms < 1 {
			err = errors.New("want a time after 1970-01-01T00:00:00Z")
		}
		if err != nil {
			return f, usageError{fmt.Errorf("--%s %q: %w", t.name, t.value, err)}
		}
		*t.to = ms
	}
	if f.DueBefore != 0 && f.DueBefore <= f.DueAfter {
		return f, usageError{fmt.Errorf("--due-before %s: must be after --due-after %s", fl.dueBefore, fl.dueAfter)}
	}
	if fl.cursor != "" {
		c, err := ledger.ParseCursor(fl.cursor)
		if err != nil {
			return f, usageError{fmt.Errorf("--cursor %q: give the cursor a page ended with, as it is", fl.cursor)}
		}
		f.After = &c
	}
	return f, nil
}

// maxLedgerPage is the most rows one ledger list prints, as the API allows.
const maxLedgerPage = 1000

// topicCell is a table's topic column: a partitioned topic's row or job
// shows its partition's name (topic~K.p~n), which begins with the topic's;
// --json gives both apart.
func topicCell(topic, partition string) string {
	if partition != "" {
		return partition
	}
	return topic
}

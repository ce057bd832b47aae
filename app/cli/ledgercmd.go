package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/ledger"
)

func (a *app) ledgerCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "ledger", Short: "Audit the ledger: jobs in flight, stale jobs"}
	var topic string
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "Jobs some worker started and that have not finished for good",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkLimit(limit); err != nil {
				return err
			}
			s, err := a.store(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			rows, err := s.InFlight(cmd.Context(), topic, limit)
			if err != nil {
				return err
			}
			return a.emitEntries(rows)
		},
	}
	list.Flags().StringVar(&topic, "topic", "", "only this topic")
	list.Flags().IntVar(&limit, "limit", 100, "at most this many rows")

	var grace time.Duration
	var staleLimit int
	stale := &cobra.Command{
		Use:   "stale",
		Short: "Jobs whose lease passed more than --grace ago: stuck, and since when",
		Args:  args(cobra.NoArgs),
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
			row(w, r.Topic, r.JobID, r.State, r.Attempt, ms(r.ClaimedAt), ms(r.LeaseUntil), r.Worker, r.LastError)
		}
	})
}

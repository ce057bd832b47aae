package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/queue/engine"
)

// jobsCmd is `delayq jobs TOPIC`: the job browser's listings (a state, or a
// durable topic's id prefix), a page at a time (docs/design.md §4.17).
func (a *app) jobsCmd() *cobra.Command {
	var jq httpapi.JobQuery
	cmd := &cobra.Command{
		Use: "jobs TOPIC [--state S | --prefix P] [--offset N | --after C] [--limit N]",
		Example: `  delayq jobs emails --state dead
  delayq jobs order_close --prefix order_close:12 --limit 20`,
		Short: "List a topic's jobs in one state (waiting, retrying, in_flight, dead, waiting_sql), or a durable topic's by id prefix",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			jq.HasOffset = cmd.Flags().Changed("offset")
			switch {
			case jq.State != "" && !validListing(jq.State):
				return usageError{fmt.Errorf("--state %q: want one of %s", jq.State, strings.Join(engine.Listings, ", "))}
			case cmd.Flags().Changed("prefix") && jq.Prefix == "":
				return usageError{fmt.Errorf("--prefix: give the start of a job id")}
			case jq.Limit < 1 || jq.Limit > queue.MaxPage || jq.Offset < 0:
				return usageError{fmt.Errorf("--offset %d, --limit %d: want an offset of 0 or more and a limit of 1-%d", jq.Offset, jq.Limit, queue.MaxPage)}
			}
			s, err := a.store(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			p, err := s.Jobs(cmd.Context(), argv[0], jq)
			if err != nil {
				return err
			}
			return a.emit(p, func(w io.Writer) {
				row(w, "ID", "STATE", "AT", "ATTEMPT", "PRIORITY", "ORDERING KEY", "WORKER", "LAST ERROR")
				for _, v := range p.Jobs {
					at, worker := v.RunAt, ""
					switch {
					case v.LeaseUntil != 0:
						at = v.LeaseUntil
					case v.DiedAt != 0:
						at = v.DiedAt
					}
					if v.Ledger != nil {
						worker = v.Ledger.Worker
					}
					state := string(v.State)
					if v.Parked {
						state += " (parked)"
					}
					row(w, v.ID, state, ms(at), fmt.Sprintf("%d/%d", v.Attempt, v.MaxAttempts), v.Priority, v.OrderingKey, worker, v.LastError)
				}
				switch {
				case p.Total >= 0:
					fmt.Fprintf(w, "(%d of %d from offset %d)\n", len(p.Jobs), p.Total, p.Offset)
				case p.NextAfter != "":
					fmt.Fprintf(w, "(%d; next page: --after %s)\n", len(p.Jobs), p.NextAfter)
				default:
					fmt.Fprintf(w, "(%d, the last page)\n", len(p.Jobs))
				}
				if p.LedgerError != "" {
					fmt.Fprintln(w, p.LedgerError)
				}
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&jq.State, "state", "", "waiting (default; the due set, retries too), retrying, in_flight, dead or waiting_sql (the older scheduled and scheduled_sql are read as waiting and waiting_sql)")
	f.StringVar(&jq.Prefix, "prefix", "", "a durable topic's jobs whose id starts with this (from the SQL ledger)")
	f.IntVar(&jq.Offset, "offset", 0, "skip this many (waiting, in_flight, dead)")
	f.StringVar(&jq.After, "after", "", "the next page of retrying, waiting_sql or a prefix search: the cursor the last page printed")
	f.IntVar(&jq.Limit, "limit", 50, "show at most this many (1-1000)")
	return cmd
}

// validListing reports whether s names a listing of the job browser (or
// an older name of one).
func validListing(s string) bool {
	_, err := engine.ParseListing(s)
	return err == nil
}

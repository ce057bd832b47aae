package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// historyCmd is `delayq history TOPIC [ID]`: the topic's finished jobs
// (docs/design.md §4.18), or one job id's.
func (a *app) historyCmd() *cobra.Command {
	var f ledger.HistoryFilter
	var since time.Duration
	var from, until string
	cmd := &cobra.Command{
		Use:   "history TOPIC [ID]",
		Short: "Show finished jobs: when each was due, first and last claimed, finished, on which worker, after how many attempts, with what result",
		Long: `Show a topic's finished jobs (succeeded, dead, cancelled, purged) from the
job history, newest first; with ID, that job id's; with --prefix, the ids
that start with it, by id. History is kept for recovery.history_retention
(a week by default). RESULT is what a succeeded job's handler recorded
(queue.RecordResult; an HTTP target's JSON answer), cut short in the
table; --json gives it whole.`,
		Example: `  delayq history order_close order_close:123
  delayq history emails --outcome dead --since 24h
  delayq history order_close --prefix order_close:2026 --json`,
		Args: args(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			f.Topic = argv[0]
			if len(argv) == 2 {
				f.ID = argv[1]
			}
			switch {
			case f.ID != "" && f.Prefix != "":
				return usageError{errors.New("give an ID or --prefix, not both")}
			case f.Outcome != "" && !ledger.ValidOutcome(f.Outcome):
				return usageError{fmt.Errorf("--outcome %q: want succeeded, dead, cancelled or purged", f.Outcome)}
			case f.Limit < 1 || f.Limit > 1000:
				return usageError{fmt.Errorf("--limit %d: want 1-1000", f.Limit)}
			case since < 0:
				return usageError{fmt.Errorf("--since %s: must not be negative", since)}
			case since > 0 && from != "":
				return usageError{errors.New("--since and --from: give one of them, not both")}
			}
			if err := queue.ValidateTopic(f.Topic); err != nil {
				return usageError{err}
			}
			if since > 0 {
				f.FinishedFrom = time.Now().Add(-since).UnixMilli()
			}
			for _, b := range []struct {
				flag, v string
				to      *int64
			}{{"--from", from, &f.FinishedFrom}, {"--until", until, &f.FinishedBefore}} {
				if b.v == "" {
					continue
				}
				t, err := parseTime(b.v)
				if err != nil {
					return usageError{fmt.Errorf("%s %q: %w", b.flag, b.v, err)}
				}
				*b.to = t
			}
			s, err := a.store(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			p, err := s.History(cmd.Context(), f)
			if err != nil {
				return err
			}
			return a.emit(p, func(w io.Writer) {
				if len(p.History) == 0 {
					what := "no finished jobs of " + f.Topic
					if f.ID != "" {
						what = "no history of " + f.Topic + "/" + f.ID
					}
					fmt.Fprintln(w, what+" (history keeps recovery.history_retention, a week by default; a topic may have it off)")
					return
				}
				row(w, "ID", "OUTCOME", "ATTEMPTS", "DUE", "FIRST CLAIMED", "FINISHED", "TOOK", "WORKER", "RESULT", "LAST ERROR")
				for _, h := range p.History {
					row(w, h.JobID, h.Outcome, fmt.Sprintf("%d/%d", h.Attempts, h.MaxAttempts), ms(h.DueAt), ms(h.FirstClaimedAt),
						ms(h.FinishedAt), took(h), orDash(h.Worker), resultText(h.Result), h.LastError)
				}
				if p.NextAfter != "" {
					fmt.Fprintf(w, "(more: --after %s)\n", p.NextAfter)
				}
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Prefix, "prefix", "", "the jobs whose id starts with this, by id")
	fl.StringVar(&f.Outcome, "outcome", "", "only succeeded, dead, cancelled or purged")
	fl.DurationVar(&since, "since", 0, "only those that finished within this long")
	fl.StringVar(&from, "from", "", "only those that finished at or after this time (RFC 3339 or Unix ms)")
	fl.StringVar(&until, "until", "", "only those that finished before this time (RFC 3339 or Unix ms)")
	fl.StringVar(&f.After, "after", "", "the next page: a listing's (more: --after ...)")
	fl.IntVar(&f.Limit, "limit", 50, "the most rows (1-1000)")
	return cmd
}

// took is how long a finished job took from its last claim to its finish,
// "-" when it was never claimed.
func took(h ledger.HistoryRow) string {
	if h.ClaimedAt == 0 {
		return "-"
	}
	return (time.Duration(h.FinishedAt-h.ClaimedAt) * time.Millisecond).String()
}

// resultMax is how much of a job's result the table shows; --json has all.
const resultMax = 60

// resultText is a job's result for the table: its JSON, cut at resultMax
// characters, or "-" for none.
func resultText(r ledger.JobResult) string {
	if r == nil {
		return "-"
	}
	s := []rune(string(r))
	if len(s) > resultMax {
		return string(s[:resultMax-1]) + "…"
	}
	return string(s)
}

// History reads the ledger's history.
func (s *directStore) History(ctx context.Context, f ledger.HistoryFilter) (httpapi.HistoryPage, error) {
	rows, next, err := s.b.Shards.History(ctx, f)
	if errors.Is(err, ledger.ErrBadCursor) {
		return httpapi.HistoryPage{}, usageError{fmt.Errorf("--after %q: not a cursor of this listing", f.After)}
	}
	if rows == nil {
		rows = []ledger.HistoryRow{}
	}
	return httpapi.HistoryPage{Topic: f.Topic, History: rows, NextAfter: next}, err
}

// History reads the instance's history.
func (s *apiStore) History(ctx context.Context, f ledger.HistoryFilter) (httpapi.HistoryPage, error) {
	p, err := s.c.History(ctx, f)
	return p, s.explain(err)
}

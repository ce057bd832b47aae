package recoverer

import (
	"context"
	"math"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// pass restores the jobs of the stale rows (lease_until before cutoff, Unix
// ms) that Redis lost, and, for the topics in lost, those of every retrying
// row too: they wait for a run time that may be far ahead, and no worker
// holds them. It returns the topics some of whose rows could not be
// restored.
//
// Each page goes through three steps:
//
//  1. the restore script in dry-run mode tells the rows whose job Redis has
//     no trace of;
//  2. those rows are read again: a row gone or rewritten meanwhile belongs to
//     a job that finished or was claimed again (a row read just before its
//     job completed looks untracked, since the ledger row is deleted before
//     the Redis entries) and is left alone; one still there, for the same
//     claim, is a job Redis lost, and it stays lost until restored, since
//     only a claim from Redis could finish it;
//  3. the restore script re-creates those, checking again atomically.
//
// Without step 2, a job completing while the run looks at its row would run
// a second time.
func (r *Recoverer) pass(ctx context.Context, cutoff int64, lost map[string]bool, rep *Report) (map[string]bool, error) {
	olderThan := cutoff
	if len(lost) > 0 {
		olderThan = math.MaxInt64
	}
	due := func(e *ledger.Entry) bool {
		return e.LeaseUntil < cutoff || (lost[e.Topic] && e.State == queue.StateRetrying)
	}
	failed := make(map[string]bool)
	err := r.pages(ctx, olderThan, func(rows []ledger.Entry) error {
		todo := rows[:0:0]
		for i := range rows {
			if due(&rows[i]) {
				todo = append(todo, rows[i])
			}
		}
		if len(todo) == 0 {
			return nil
		}
		lostRows, err := r.untracked(ctx, todo, rep, failed)
		if err != nil || len(lostRows) == 0 {
			return err
		}
		ids := make([]int64, len(lostRows))
		for i, e := range lostRows {
			ids[i] = e.ID
		}
		// Redis's clock before the rows are read again: a job acked or
		// cancelled after this (its row deleted first) has a tombstone the
		// restore honours, so a row read just before it went is not
		// brought back (docs/design.md §4.11).
		seen, err := r.q.Time(ctx)
		if err != nil {
			return err
		}
		claims, err := r.store.Claims(ctx, ids)
		if err != nil {
			return err
		}
		confirmed := lostRows[:0:0]
		for _, e := range lostRows {
			c, ok := claims[e.ID]
			if ok && c.Attempt == e.Attempt && c.ClaimedAt == e.ClaimedAt {
				// The same claim; the worker that holds it may have marked
				// it retrying meanwhile: restore what the row says now.
				e.RunAt, e.LeaseUntil, e.State, e.LastError = c.RunAt, c.LeaseUntil, c.State, c.LastError
				if due(&e) {
					confirmed = append(confirmed, e)
					continue
				}
			}
			rep.Moved++
			r.tally(rep, e.Topic, func(tc *TopicCounts) { tc.Moved++ })
		}
		if len(confirmed) == 0 {
			return nil
		}
		return r.restore(ctx, confirmed, seen.UnixMilli(), rep, failed)
	})
	return failed, err
}

// untracked counts rows as scanned and returns those whose job Redis has no
// trace of (restore script, dry run); the others are counted as still
// tracked, or failed.
func (r *Recoverer) untracked(ctx context.Context, rows []ledger.Entry, rep *Report, failed map[string]bool) ([]ledger.Entry, error) {
	out, err := r.q.Restore(ctx, restoreRows(rows), dataplane.RestoreOptions{DryRun: true, Chunk: r.cfg.Chunk})
	var lost []ledger.Entry
	nFailed := 0
	for i, o := range out {
		e := &rows[i]
		switch o {
		case dataplane.RestoreCreated:
			lost = append(lost, *e)
			r.tally(rep, e.Topic, func(tc *TopicCounts) { tc.Scanned++ })
		case dataplane.RestoreTracked:
			rep.StillTracked++
			r.tally(rep, e.Topic, func(tc *TopicCounts) { tc.Scanned++; tc.StillTracked++ })
		case dataplane.RestoreGone: // acked or cancelled moments ago
			rep.Moved++
			r.tally(rep, e.Topic, func(tc *TopicCounts) { tc.Scanned++; tc.Moved++ })
		default:
			nFailed++
			failed[e.Topic] = true
			r.tally(rep, e.Topic, func(tc *TopicCounts) { tc.Scanned++ })
		}
	}
	rep.Scanned += len(rows)
	if err != nil {
		if nFailed == len(rows) {
			return nil, err // Redis is down: the run stops
		}
		addError(rep, nFailed, err)
	}
	return lost, nil
}

// restore re-creates the jobs of rows confirmed lost (in dry-run mode it
// only counts them) and tallies the outcomes. It returns an error only when
// no row got through (Redis is down: the run stops); otherwise failed rows
// are counted in the report and marked in failed.
func (r *Recoverer) restore(ctx context.Context, rows []ledger.Entry, seenAt int64, rep *Report, failed map[string]bool) error {
	out, err := r.q.Restore(ctx, restoreRows(rows), dataplane.RestoreOptions{DryRun: r.cfg.DryRun, Chunk: r.cfg.Chunk, SeenAt: seenAt})
	nFailed := 0
	for i, o := range out {
		e := &rows[i]
		switch o {
		case dataplane.RestoreCreated:
			rep.Reenqueued++
			r.tally(rep, e.Topic, func(tc *TopicCounts) { tc.Reenqueued++ })
			if len(rep.Sample) < r.cfg.SampleSize {
				rep.Sample = append(rep.Sample, e.Topic+"/"+e.JobID)
			}
		case dataplane.RestoreTracked: // re-added meanwhile (an enqueue of the same id, another recoverer)
			rep.StillTracked++
			r.tally(rep, e.Topic, func(tc *TopicCounts) { tc.StillTracked++ })
		case dataplane.RestoreGone: // acked or cancelled after the rows were read again
			rep.Moved++
			r.tally(rep, e.Topic, func(tc *TopicCounts) { tc.Moved++ })
		default:
			nFailed++
			failed[e.Topic] = true
		}
	}
	if err != nil {
		if nFailed == len(rows) {
			return err
		}
		addError(rep, nFailed, err)
	}
	return nil
}

// tally updates one topic's counts in the report.
func (r *Recoverer) tally(rep *Report, topic string, f func(tc *TopicCounts)) {
	if rep.ByTopic == nil {
		rep.ByTopic = make(map[string]TopicCounts)
	}
	tc := rep.ByTopic[topic]
	f(&tc)
	rep.ByTopic[topic] = tc
}

// restoreRows turns ledger rows into the restore script's rows.
func restoreRows(rows []ledger.Entry) []dataplane.RestoreRow {
	out := make([]dataplane.RestoreRow, len(rows))
	for i, e := range rows {
		out[i] = e.RestoreRow()
	}
	return out
}

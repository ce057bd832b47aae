package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/delayq/delayq/ledger"
)

// RetentionResult is what the retention scenario's purge did.
type RetentionResult struct {
	// Rows is how many history rows past their retention were written
	// before and deleted by the purge; Statements how many DELETEs it ran
	// (Batch rows each, resting to delete at most Duty of the time),
	// LongestStatementMs the longest DELETE, LongestCommitMs the longest
	// commit of one (waiting for the disk behind the drain's commits),
	// LongestMs the longest of the two together, Seconds the whole purge.
	Rows               int64   `json:"rows"`
	Deleted            int64   `json:"deleted"`
	Batch              int     `json:"batch"`
	Duty               float64 `json:"duty"`
	Statements         int     `json:"statements"`
	LongestStatementMs float64 `json:"longest_statement_ms"`
	LongestCommitMs    float64 `json:"longest_commit_ms"`
	LongestMs          float64 `json:"longest_ms"`
	Seconds            float64 `json:"seconds"`
	// AloneRate is the median rate of the same drain without the purge,
	// each run just before one under it; Ratios each pair's rate under the
	// purge over alone (Result.Ratio is their median).
	AloneRate float64   `json:"alone_rate"`
	Ratios    []float64 `json:"ratios"`
	// Overlapped says the purge ran through every drain under it (it
	// started before the drain's preload and still had rows when the
	// drain's last job ended).
	Overlapped bool `json:"overlapped"`
}

// Retention measures what the job history's retention costs a running
// worker (docs/design.md §4.18): HistoryRows history rows that finished a
// month ago are written; three times, a drain of Jobs jobs runs alone, then again
// while PurgeHistoryWith deletes those rows as each recovery run does
// (o.Purge: 500 per statement, deleting 5% of the time, by default). Rate is the median
// rate under the purge; Ratio the median of each pair's ratio.
func Retention(ctx context.Context, o Options) (Result, error) {
	return run(ctx, "retention", o, retentionBody)
}

// retentionRounds is how many pairs of drains (alone, then under the
// purge) the retention scenario runs: the host's speed moves from minute
// to minute, so each ratio compares drains a few seconds apart, and the
// median of the pairs is the figure.
const retentionRounds = 3

func retentionBody(ctx context.Context, s *sandbox, o Options, r *Result) error {
	const topic, old = "bench.retention", "bench.retention.old"
	purge := o.Purge
	if purge.Batch == 0 {
		purge.Batch = ledger.DefaultPurgeBatch
	}
	if purge.Duty == 0 {
		purge.Duty = ledger.DefaultPurgeDuty
	}
	ret := &RetentionResult{Rows: int64(o.HistoryRows), Batch: purge.Batch, Duty: purge.Duty, Overlapped: true}
	r.Retention = ret
	if err := s.fillHistory(ctx, old, o.HistoryRows, o.Progress); err != nil {
		return err
	}
	var mu sync.Mutex
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	purge.Each = func(_ int64, stmt, commit time.Duration) {
		mu.Lock()
		ret.Statements++
		ret.LongestStatementMs = max(ret.LongestStatementMs, ms(stmt))
		ret.LongestCommitMs = max(ret.LongestCommitMs, ms(commit))
		ret.LongestMs = max(ret.LongestMs, ms(stmt+commit))
		mu.Unlock()
	}
	// The drain's own jobs finish now, inside any retention, and stay.
	cutoff := time.Now().Add(-7 * 24 * time.Hour).UnixMilli()
	var purgeTime time.Duration
	// purgeWhile runs the purge until drain returns (nil: to its end).
	purgeWhile := func(drain func() error) (finished bool, err error) {
		pctx, stop := context.WithCancel(ctx)
		defer stop()
		var (
			wg       sync.WaitGroup
			n        int64
			purgeErr error
		)
		began := time.Now()
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, purgeErr = s.led.PurgeHistoryWith(pctx, cutoff, nil, purge)
			if pctx.Err() == nil {
				finished = true // every row went before the drain ended
			}
		}()
		if drain != nil {
			err = drain()
			stop()
		}
		wg.Wait()
		purgeTime += time.Since(began)
		ret.Deleted += n
		if err == nil && purgeErr != nil && !errors.Is(purgeErr, context.Canceled) {
			err = fmt.Errorf("bench: purge history: %w", purgeErr)
		}
		return finished, err
	}
	var alone, during []float64
	for i := range retentionRounds {
		var a Result
		if err := drainPhase(ctx, s, o, topic, false, &a); err != nil {
			return fmt.Errorf("bench: drain %d alone: %w", i+1, err)
		}
		alone = append(alone, a.Rate)
		finished, err := purgeWhile(func() error { return drainPhase(ctx, s, o, topic, false, r) })
		if err != nil {
			return fmt.Errorf("bench: drain %d under the purge: %w", i+1, err)
		}
		during = append(during, r.Rate)
		ret.Overlapped = ret.Overlapped && !finished
		if finished {
			break
		}
	}
	// The rest of the purge, with no drain: every row must go.
	if ret.Deleted < ret.Rows {
		if _, err := purgeWhile(nil); err != nil {
			return err
		}
	}
	ret.Seconds = seconds(purgeTime)
	ratios := make([]float64, len(alone))
	for i := range alone {
		if alone[i] > 0 {
			ratios[i] = during[i] / alone[i]
		}
	}
	ret.Ratios = ratios
	ret.AloneRate = median(alone)
	r.Rate, r.Ratio = median(during), median(ratios)
	if !ret.Overlapped {
		r.Notes = append(r.Notes, "the purge ended before a drain did: give more --rows for drains that run under it throughout")
	}
	r.Notes = append(r.Notes, fmt.Sprintf("drains alone %s jobs/s; under the purge %s jobs/s; ratios %s, median %.2f; purge: %d rows in %d DELETEs of %d, duty %.2f, over %.1f s; the longest DELETE %.1f ms, the longest commit %.1f ms, both together %.1f ms",
		fmtRates(alone), fmtRates(during), fmtRatios(ratios), r.Ratio, ret.Deleted, ret.Statements, ret.Batch, ret.Duty, ret.Seconds,
		ret.LongestStatementMs, ret.LongestCommitMs, ret.LongestMs))
	return nil
}

// median is the middle of xs (the mean of the two middle ones when even);
// 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fmtRates(xs []float64) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(out, "/")
}

func fmtRatios(xs []float64) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(out, "/")
}

// fillHistory writes n history rows of topic that finished a month ago,
// 2,000 per INSERT.
func (s *sandbox) fillHistory(ctx context.Context, topic string, n int, p Progress) error {
	const per = 2000 // 12 columns: under SQLite's 32,766 variables
	done := 0
	stop := p.show(progressName("history rows", topic), int64(n), func() int64 { return int64(done) })
	defer stop()
	at := time.Now().Add(-30 * 24 * time.Hour).UnixMilli()
	for done < n {
		k := min(per, n-done)
		rows := make([]ledger.HistoryRow, k)
		for i := range rows {
			id := fmt.Sprintf("old:%d", done+i)
			rows[i] = ledger.HistoryRow{Topic: topic, JobID: id, Outcome: ledger.OutcomeSucceeded, Attempts: 1, MaxAttempts: 25,
				EnqueuedAt: at - 60_000, DueAt: at - 1000, FirstClaimedAt: at - 900, ClaimedAt: at - 900, FinishedAt: at + int64(i%1000), Worker: "bench:1"}
		}
		if err := s.env.DB.WithContext(ctx).Table(s.led.HistoryTable()).Create(&rows).Error; err != nil {
			return fmt.Errorf("bench: write history rows: %w", err)
		}
		done += k
	}
	return nil
}

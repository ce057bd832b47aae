package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/delayq/delayq/ledger"
)

// RetentionResult is what the retention scenario's purge did.
type RetentionResult struct {
	// Rows is how many history rows past their retention were written
	// before and deleted by the purge; Statements how many DELETEs it ran,
	// LongestMs the longest (its commit included), Seconds the whole purge.
	Rows       int64   `json:"rows"`
	Deleted    int64   `json:"deleted"`
	Statements int     `json:"statements"`
	LongestMs  float64 `json:"longest_ms"`
	Seconds    float64 `json:"seconds"`
	// AloneRate is the same drain's rate without the purge, run first.
	AloneRate float64 `json:"alone_rate"`
	// Overlapped says the purge ran for the whole drain (it started
	// before the drain's worker and ended after its last job).
	Overlapped bool `json:"overlapped"`
}

// Retention measures what the job history's retention costs a running
// worker (docs/design.md §4.18): HistoryRows history rows that finished a
// month ago are written; a drain of Jobs jobs runs alone, then again
// while PurgeHistory deletes those rows, 500 per statement, as each
// recovery run does. Rate is the second drain's; Ratio it over the first.
func Retention(ctx context.Context, o Options) (Result, error) {
	return run(ctx, "retention", o, retentionBody)
}

func retentionBody(ctx context.Context, s *sandbox, o Options, r *Result) error {
	const topic, old = "bench.retention", "bench.retention.old"
	var alone Result
	if err := drainPhase(ctx, s, o, topic, false, &alone); err != nil {
		return fmt.Errorf("bench: the drain alone: %w", err)
	}
	ret := &RetentionResult{Rows: int64(o.HistoryRows), AloneRate: alone.Rate}
	r.Retention = ret
	if err := s.fillHistory(ctx, old, o.HistoryRows, o.Progress); err != nil {
		return err
	}
	// The purge starts now and runs through the drain's preload and the
	// drain; the drain's own jobs finish now, inside any retention, and stay.
	cutoff := time.Now().Add(-7 * 24 * time.Hour).UnixMilli()
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		purgeErr  error
		purgeDone time.Time
	)
	began := time.Now()
	wg.Add(1)
	go func() {
		defer wg.Done()
		n, err := s.led.PurgeHistoryEach(ctx, cutoff, nil, func(_ int64, took time.Duration) {
			mu.Lock()
			ret.Statements++
			ret.LongestMs = max(ret.LongestMs, float64(took.Microseconds())/1000)
			mu.Unlock()
		})
		mu.Lock()
		ret.Deleted, purgeErr, purgeDone = n, err, time.Now()
		mu.Unlock()
	}()
	err := drainPhase(ctx, s, o, topic, false, r)
	drainDone := time.Now()
	wg.Wait()
	if err != nil {
		return err
	}
	if purgeErr != nil {
		return fmt.Errorf("bench: purge history: %w", purgeErr)
	}
	ret.Seconds = seconds(purgeDone.Sub(began))
	ret.Overlapped = purgeDone.After(drainDone)
	if alone.Rate > 0 {
		r.Ratio = r.Rate / alone.Rate
	}
	if !ret.Overlapped {
		r.Notes = append(r.Notes, "the purge ended before the drain did: give more --rows for a drain that runs under it throughout")
	}
	r.Notes = append(r.Notes, fmt.Sprintf("drain alone %.0f jobs/s; during the purge %.0f jobs/s (ratio %.2f); purge: %d rows in %d DELETEs over %.1f s, the longest %.1f ms",
		alone.Rate, r.Rate, r.Ratio, ret.Deleted, ret.Statements, ret.Seconds, ret.LongestMs))
	return nil
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

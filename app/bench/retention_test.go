package bench_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/delayq/delayq/app/bench"
	"github.com/delayq/delayq/internal/testenv"
)

// TestChaosHistoryRetention deletes history past its retention while a
// drain runs, on real Redis and MariaDB: 100,000 rows here, 1,000,000
// under make chaos (DELAYQ_CHAOS=long). It checks what must hold whatever
// the machine's speed (every row deleted, 500 per statement, the purge
// running through the whole drain, every job of the drain handled once)
// and logs the figures the issue gives targets for (the longest DELETE,
// the drain's rate against the same drain alone): a timing claim is a
// benchmark's (delayq bench retention), not this test's.
func TestChaosHistoryRetention(t *testing.T) {
	if testing.Short() {
		t.Skip("a 50,000-row purge: skipped in -short mode")
	}
	rows := 50_000
	if os.Getenv("DELAYQ_CHAOS") == "long" {
		rows = 1_000_000
	}
	rdb, _ := testenv.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	r, err := bench.Retention(ctx, bench.Options{Env: bench.Env{Redis: rdb, DB: testenv.MySQL(t)},
		Jobs: 10_000, Concurrency: 50, HistoryRows: rows})
	if err != nil {
		t.Fatalf("run: %v (%+v)", err, r)
	}
	ret := r.Retention
	if r.Handled != r.Jobs || r.Missing != 0 || r.Duplicates != 0 || ret == nil ||
		ret.Deleted != int64(rows) || ret.Statements != rows/500 {
		t.Fatalf("result %+v, retention %+v: want every job once, %d rows in %d statements", r, ret, rows, rows/500)
	}
	if !ret.Overlapped {
		t.Errorf("the purge of %d rows ended before a drain of %d jobs: nothing was measured under it", rows, r.Jobs)
	}
	t.Logf("%d rows in %d DELETEs over %.1f s, the longest DELETE %.1f ms, commit %.1f ms; drain %.0f jobs/s alone, %.0f during the purge (ratio %.2f)",
		ret.Deleted, ret.Statements, ret.Seconds, ret.LongestStatementMs, ret.LongestCommitMs, ret.AloneRate, r.Rate, r.Ratio)
}

package recovery_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// Horizontal scale: worker processes share topics with nothing but Redis's
// atomic claim between them. With no fault, every job runs exactly once
// however many processes take part.

var scaleTopics = []string{"scale-a", "scale-b"}

// TestScaleFourWorkers drains 100,000 jobs (make soak; 20,000 in make test)
// on two topics with four worker processes: each job handled exactly once,
// the ledger empty at the end.
func TestScaleFourWorkers(t *testing.T) {
	n := 20_000
	if os.Getenv("DELAYQ_SOAK") == "long" {
		n = 100_000
	}
	d := scaleDrain(t, 4, n)
	t.Logf("%d jobs, 4 processes: %s, %.0f jobs/s (throughput figures: BenchmarkScaleOut)", n, d.Round(time.Millisecond), float64(n)/d.Seconds())
}

// BenchmarkScaleOut drains the same jobs with one process and with four:
//
//	go test -run '^$' -bench ScaleOut -benchtime 1x ./recovery/
func BenchmarkScaleOut(b *testing.B) {
	const n = 100_000
	for _, procs := range []int{1, 4} {
		b.Run(fmt.Sprintf("procs=%d", procs), func(b *testing.B) {
			var total time.Duration
			for i := 0; i < b.N; i++ {
				total += scaleDrain(b, procs, n)
			}
			b.ReportMetric(float64(n*b.N)/total.Seconds(), "jobs/s")
		})
	}
}

// scaleDrain starts procs worker processes on both scale topics, waits
// until each is ready, enqueues n jobs split over the topics and returns
// how long they took from the first enqueue until the last was handled.
// It fails tb unless every job ran exactly once, each run with its ledger
// row, and the ledger and Redis are empty at the end.
func scaleDrain(tb testing.TB, procs, n int) time.Duration {
	rdb, ns := testenv.Redis(tb)
	q, err := queue.New(rdb, queue.Config{Namespace: ns})
	if err != nil {
		tb.Fatal(err)
	}
	fdb := newFaultDB(tb)
	if err := fdb.db.Exec(runsTable).Error; err != nil {
		tb.Fatal(err)
	}
	spec := soakSpec{RedisAddr: redisAddr(tb, rdb), Namespace: ns, DSN: fdb.dsn, BusinessDSN: fdb.dsn,
		Topics: scaleTopics, Concurrency: 16, Lease: 30 * time.Second, BackoffBase: 100 * time.Millisecond}
	workers := make([]*child, procs)
	for i := range workers {
		spec.WorkerID = fmt.Sprintf("scale-w%d", i)
		workers[i] = startChild(tb, spec.WorkerID, "soakworker", spec)
	}
	for _, w := range workers {
		waitFor(tb, time.Minute, w.name+" ready", func() bool { return len(w.logLines(`"msg":"soak worker ready"`)) > 0 })
	}

	start := time.Now()
	half := n / 2
	enqueueRange(tb, q, scaleTopics[0], 0, half)
	enqueueRange(tb, q, scaleTopics[1], half, n)
	for {
		if got := fdb.count(tb, "SELECT COUNT(*) FROM runs"); got >= int64(n) {
			break
		}
		if time.Since(start) > 10*time.Minute {
			tb.Fatalf("%d jobs not handled within 10 minutes", n)
		}
		time.Sleep(50 * time.Millisecond) // polling the count: each poll scans the table
	}
	took := time.Since(start)

	waitFor(tb, time.Minute, "the ledger empty and Redis drained", func() bool {
		for _, topic := range scaleTopics {
			st, err := q.Stats(ctxT(tb), topic)
			if err != nil || st.Due != 0 || st.InFlight != 0 {
				return false
			}
		}
		return fdb.ledgerRows(tb) == 0
	})
	for _, w := range workers {
		w.stop(tb, 30*time.Second)
		w.checkNoRace(tb)
	}
	if got := fdb.count(tb, "SELECT COUNT(*) FROM runs"); got != int64(n) {
		tb.Errorf("%d runs for %d jobs", got, n)
	}
	if got := fdb.count(tb, "SELECT COUNT(DISTINCT job_id) FROM runs"); got != int64(n) {
		tb.Errorf("%d distinct jobs ran, want %d", got, n)
	}
	if got := fdb.count(tb, "SELECT COALESCE(SUM(unrecorded), 0) FROM runs"); got != 0 {
		tb.Errorf("%d runs without their ledger row", got)
	}
	perWorker := fdb.count(tb, "SELECT COUNT(DISTINCT worker) FROM runs")
	if perWorker != int64(procs) {
		tb.Errorf("%d of the %d processes handled jobs", perWorker, procs)
	}
	return took
}

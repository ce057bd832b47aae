package recoverer_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
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
// The handler counts its runs in Redis (soakSpec.Tally), so the figure is
// delayq's: claim, ledger record and completion per batch, Redis ack. It
// fails tb unless every job ran exactly once, every process took part, and
// the ledger and Redis are empty at the end.
func scaleDrain(tb testing.TB, procs, n int) time.Duration {
	rdb, ns := testenv.Redis(tb)
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns})
	if err != nil {
		tb.Fatal(err)
	}
	fdb := newFaultDB(tb)
	tally := ns + ":tally"
	spec := soakSpec{RedisAddr: redisAddr(tb, rdb), Namespace: ns, DSN: fdb.dsn, BusinessDSN: fdb.dsn,
		Topics: scaleTopics, Concurrency: 64, Lease: 30 * time.Second, BackoffBase: 100 * time.Millisecond, Tally: tally}
	workers := make([]*child, procs)
	for i := range workers {
		spec.WorkerID = fmt.Sprintf("scale-w%d", i)
		workers[i] = startChild(tb, spec.WorkerID, "soakworker", spec)
	}
	for _, w := range workers {
		testenv.WaitFor(testenv.Context(tb), tb, w.name+" ready", func() bool { return len(w.logLines(`"msg":"soak worker ready"`)) > 0 })
	}

	start := time.Now()
	half := n / 2
	enqueueRange(tb, q, scaleTopics[0], 0, half)
	enqueueRange(tb, q, scaleTopics[1], half, n)
	testenv.WaitFor(testenv.ContextTimeout(tb, 10*time.Minute), tb, fmt.Sprintf("%d jobs handled", n), func() bool {
		got, err := rdb.HLen(testenv.Context(tb), tally+":runs").Result()
		return err == nil && got >= int64(n)
	})
	took := time.Since(start)

	testenv.WaitFor(testenv.Context(tb), tb, "the ledger empty and Redis drained", func() bool {
		for _, topic := range scaleTopics {
			st, err := q.Stats(testenv.Context(tb), topic)
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
	runs, err := rdb.HGetAll(testenv.Context(tb), tally+":runs").Result()
	if err != nil {
		tb.Fatal(err)
	}
	if len(runs) != n {
		tb.Errorf("%d distinct jobs ran, want %d", len(runs), n)
	}
	for id, c := range runs {
		if c != "1" {
			tb.Errorf("%s ran %s times", id, c)
		}
	}
	perWorker, err := rdb.HGetAll(testenv.Context(tb), tally+":workers").Result()
	if err != nil {
		tb.Fatal(err)
	}
	if len(perWorker) != procs {
		tb.Errorf("%d of the %d processes handled jobs: %v", len(perWorker), procs, perWorker)
	}
	tb.Logf("%d processes, jobs per process: %v", procs, perWorker)
	return took
}

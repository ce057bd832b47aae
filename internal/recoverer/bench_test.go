package recoverer_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/internal/testenv"
)

// 100,000 stale ledger rows whose jobs Redis lost: one run puts them all
// back (target: within 5 s on the 2-core reference machine). Reported as
// seconds per run and rows per second; the rows are written once, and
// Redis loses the jobs again before each run.
//
//	go test -run '^$' -bench RecoverLost100k -benchtime 3x ./recovery/
func BenchmarkRecoverLost100k(b *testing.B) {
	const rows = 100_000
	e := newREnv(b)
	now := e.redisNow(b)
	seed := make([]row, rows)
	for i := range seed {
		seed[i] = row{topic: "orders", id: fmt.Sprintf("order_close:%d", 1_000_000+i), attempt: 1 + i%3,
			runAt: now - 600_000, leaseUntil: now - 60_000, retrying: i%4 == 0, lastError: "timeout"}
	}
	e.record(b, seed)
	r := e.recoverer(b, recoverer.Config{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e.dropTopic(b, "orders")
		e.ensureEpoch(b, "orders")
		b.StartTimer()
		rep, err := r.RunOnce(testenv.Context(b))
		if err != nil {
			b.Fatal(err)
		}
		if rep.Reenqueued != rows || rep.Scanned != rows {
			b.Fatalf("report %+v", rep)
		}
	}
	b.StopTimer()
	per := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(per.Seconds(), "s/run")
	b.ReportMetric(float64(rows)/per.Seconds(), "rows/s")
}

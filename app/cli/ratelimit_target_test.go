package cli_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// `delayq worker` applies worker.topics.<t>.rate_limit to an HTTP-target
// topic: 8 due jobs at 10/s with a burst of 2 are delivered over at least
// the 0.6 s their tokens take (asserted at half that: deliveries lag their
// claims unevenly), and the metrics show the limit and the held-back
// claims.
func TestWorkerRateLimitsTarget(t *testing.T) {
	const jobs = 8
	var mu sync.Mutex
	var at []time.Time
	var delivered testenv.Counter
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		delivered.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)

	rdb, ns := testenv.Redis(t)
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	for i := range jobs {
		if _, err := q.Enqueue(ctx, "hooks", queue.NewJob{ID: fmt.Sprint("h", i)}); err != nil {
			t.Fatal(err)
		}
	}
	port := testenv.FreePort(t)
	startCommand(t, fmt.Sprintf(`log: {level: warn}
redis: {mode: single, addrs: [%q], namespace: %q}
sql: {driver: sqlite, sqlite_path: %q}
orders: {enabled: false}
worker:
  target_allow_hosts: [127.0.0.1]
  topics:
    hooks: {concurrency: 4, rate_limit: 10, rate_burst: 2, target: {url: %q}}
metrics: {listen: "127.0.0.1:%d"}
`, redisAddr(), ns, filepath.Join(t.TempDir(), "ledger.db"), rc.URL+"/hook", port), "worker")

	delivered.WaitAtLeast(ctx, t, jobs, "every job delivered")
	mu.Lock()
	span := at[len(at)-1].Sub(at[0])
	mu.Unlock()
	if span < 300*time.Millisecond {
		t.Errorf("%d deliveries at 10/s, burst 2, took %s: the limit was not applied", jobs, span)
	}
	want := []string{`delayq_rate_limit_per_second{topic="hooks"} 10`, `delayq_rate_limited_claims_total{topic="hooks"}`}
	var body string
	testenv.WaitFor(ctx, t, "/metrics to show the rate limit", func() bool {
		_, body, _ = httpGet(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
		return strings.Contains(body, want[0]) && strings.Contains(body, want[1]) &&
			!strings.Contains(body, want[1]+" 0\n")
	}, func() string { return body })
}

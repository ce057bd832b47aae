package cli_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/app/cli"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// startCommand runs the command line with a config file holding cfg until
// the test ends, and returns its stderr so far on demand.
func startCommand(t *testing.T, cfg string, args ...string) func() string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "delayq.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var logs strings.Builder
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, append(args, "--config", path), io.Discard, lockedWriter{&mu, &logs}, "test")
	}()
	read := func() string {
		mu.Lock()
		defer mu.Unlock()
		return logs.String()
	}
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("%v exited %d:\n%s", args, code, read())
			}
		case <-time.After(time.Minute):
			t.Errorf("%v did not stop within a minute", args)
		}
	})
	return read
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func httpGet(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// `delayq worker` has no API: metrics.listen serves its /metrics, with its
// heartbeat and the counters of the jobs it ran.
func TestWorkerServesMetricsOnItsOwnListener(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	port := testenv.FreePort(t)
	logs := startCommand(t, fmt.Sprintf(`log: {level: warn, format: json}
redis: {mode: single, addrs: [%q], namespace: %q}
sql: {driver: sqlite, sqlite_path: %q}
worker: {max_idle: 100ms}
metrics: {listen: "127.0.0.1:%d"}
`, redisAddr(), ns, filepath.Join(t.TempDir(), "ledger.db"), port), "worker")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)

	q, err := dataplane.New(rdb, queue.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := q.Enqueue(ctx, cli.SmokeTopic, queue.NewJob{ID: "smoke:metrics"}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`delayq_jobs_completed_total{topic="delayq.smoke"} 1`,
		`delayq_job_lateness_seconds_count{topic="delayq.smoke"} 1`,
		`delayq_worker_heartbeat_timestamp_seconds{worker=`,
		`delayq_jobs_due{topic="delayq.smoke"} 0`,
		"delayq_redis_up 1", "delayq_ledger_up 1",
	}
	var last string
	testenv.WaitFor(testenv.Context(t), t, "/metrics to show the smoke job", func() bool {
		code, body, err := httpGet(base + "/metrics")
		missing := []string{}
		for _, w := range want {
			if !strings.Contains(body, w) {
				missing = append(missing, w)
			}
		}
		last = fmt.Sprintf("GET /metrics: %d %v; missing %q\n%s", code, err, missing, body)
		return err == nil && code == 200 && len(missing) == 0
	}, func() string { return last + "\nlogs:\n" + logs() })
	if code, body, err := httpGet(base + "/healthz"); err != nil || code != 200 || body != "ok\n" {
		t.Errorf("GET /healthz: %d %q %v", code, body, err)
	}
	if code, _, _ := httpGet(base + "/"); code != http.StatusNotFound {
		t.Errorf("GET / on the metrics listener: %d, want 404 (no dashboard there)", code)
	}
}

// metrics.enabled and dashboard.enabled switch /metrics and / off on the
// API's listener; the API stays.
func TestServeWithoutMetricsAndDashboard(t *testing.T) {
	port := testenv.FreePort(t)
	startCommand(t, fmt.Sprintf(`log: {level: warn, format: json}
sql: {sqlite_path: %q}
http: {listen: "127.0.0.1:%d"}
metrics: {enabled: false}
dashboard: {enabled: false}
`, filepath.Join(t.TempDir(), "ledger.db"), port), "serve", "--no-workers", "--no-recovery", "--no-sweeper")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	testenv.WaitFor(testenv.Context(t), t, "serve to answer /readyz", func() bool {
		code, _, err := httpGet(base + "/readyz")
		return err == nil && code == 200
	})
	for _, path := range []string{"/metrics", "/", "/dashboard/app.js", "/v1/dashboard/series"} {
		if code, _, err := httpGet(base + path); err != nil || code != http.StatusNotFound {
			t.Errorf("GET %s: %d %v, want 404", path, code, err)
		}
	}
	if code, _, err := httpGet(base + "/v1/topics"); err != nil || code != 200 {
		t.Errorf("GET /v1/topics: %d %v", code, err)
	}
}

func redisAddr() string {
	if a := os.Getenv(testenv.EnvRedisAddr); a != "" {
		return a
	}
	return testenv.DefaultRedisAddr
}

package main_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// TestCancelRunningAcrossProcesses: `delayq worker` (the built program)
// runs an HTTP-target job whose receiver holds the call open; a DELETE of
// the job reaches an API served by this test's process, another process
// than the worker's. The worker cuts the call (its handler's context is
// cancelled), the job ends cancelled with its history saying so, and it
// is never delivered again. The time from the DELETE to the cut is logged
// (docs/benchmarks.md has the figure); a timing is not asserted here.
func TestCancelRunningAcrossProcesses(t *testing.T) {
	bin := buildBinary(t)
	rdb, ns := testenv.Redis(t)
	dsn := testenv.MySQLDSN(t)
	ctx := testenv.Context(t)
	dir := t.TempDir()

	var deliveries atomic.Int64
	started := make(chan string, 4)
	cut := make(chan time.Time, 4)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deliveries.Add(1)
		// The body read, the server watches the connection: the request's
		// context ends when the caller goes away.
		_, _ = io.Copy(io.Discard, r.Body)
		started <- r.Header.Get("Delayq-Job-Id")
		<-r.Context().Done() // held open until then
		cut <- time.Now()
	}))
	t.Cleanup(recv.Close)

	const secretEnv = "DELAYQ_TEST_CANCEL_SECRET"
	env := append(serveEnv(ns, dsn, testenv.FreePort(t)), secretEnv+"=s3cret")
	if out, code := run(t, bin, env, "migrate"); code != 0 {
		t.Fatalf("migrate: exit %d: %s", code, out)
	}
	conf := filepath.Join(dir, "delayq.yaml")
	yaml := fmt.Sprintf(`log: {level: warn, format: json}
worker:
  topics:
    hooks:
      target: {url: %q, secret_env: %s, timeout: 5m}
`, recv.URL+"/hook", secretEnv)
	if err := os.WriteFile(conf, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	start(t, bin, env, "worker", "--config", conf)

	// The API in this process, on the same Redis and ledger.
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	led := openLedger(t, dsn)
	h, err := httpapi.New(httpapi.Deps{Queue: q, Ledger: led, Logger: testenv.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(h)
	t.Cleanup(api.Close)

	if _, err := q.Enqueue(ctx, "hooks", queue.NewJob{ID: "c1", Payload: []byte(`{"order":1}`), MaxAttempts: 5}); err != nil {
		t.Fatal(err)
	}
	if id := testenv.Receive(ctx, t, started, "the worker's call to the receiver"); id != "c1" {
		t.Fatalf("delivered %q", id)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, api.URL+"/v1/topics/hooks/jobs/c1", nil)
	if err != nil {
		t.Fatal(err)
	}
	asked := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("DELETE of the running job: %d, want 202", resp.StatusCode)
	}
	at := testenv.Receive(ctx, t, cut, "the worker to cut its call")
	t.Logf("the call was cut %s after the DELETE, in the worker's process", at.Sub(asked).Round(time.Millisecond))

	// Settled cancelled: no trace in Redis, no ledger row, history says so.
	var rows []ledger.HistoryRow
	testenv.WaitFor(ctx, t, "the job settled cancelled", func() bool {
		rows, _, err = led.History(ctx, ledger.HistoryFilter{Topic: "hooks", ID: "c1", Limit: 5})
		return err == nil && len(rows) > 0
	})
	if len(rows) != 1 || rows[0].Outcome != ledger.OutcomeCancelled || rows[0].Attempts != 1 {
		t.Fatalf("history of c1: %+v; want one row, cancelled at attempt 1", rows)
	}
	// The completer settles the ledger first and Redis after it: the
	// history row can be there a moment before the Redis ack.
	var info *queue.JobInfo
	testenv.WaitFor(ctx, t, "c1 gone from Redis", func() bool {
		info, err = q.Get(ctx, "hooks", "c1")
		return err != nil || info.State == queue.StateUnknown
	})
	if err != nil || info.State != queue.StateUnknown {
		t.Fatalf("c1 in Redis after its cancel: %+v, %v; want no trace", info, err)
	}
	if _, err := led.Row(ctx, "hooks", "c1"); err == nil {
		t.Fatal("c1 still has a ledger row after its cancel")
	}
	if n := deliveries.Load(); n != 1 {
		t.Fatalf("%d deliveries of c1, want 1", n)
	}
}

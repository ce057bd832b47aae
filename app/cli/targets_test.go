package cli_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delayq/delayq/app/cli"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// A target whose secret variable is not set stops the start with exit
// code 2, naming the key and the variable, before any backend is opened.
func TestTargetMissingSecretStopsStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "delayq.yaml")
	cfg := `log: {level: warn}
redis: {mode: single, addrs: ["127.0.0.1:1"]}
worker:
  topics:
    hooks:
      target: {url: "http://127.0.0.1:1/hook", secret_env: DELAYQ_TEST_NO_SUCH_SECRET}
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	for _, cmd := range []string{"worker", "serve"} {
		errOut.Reset()
		code := cli.Main(context.Background(), []string{cmd, "--config", path}, io.Discard, &errOut, "test")
		if code != cli.ExitUsage {
			t.Errorf("%s exited %d, want %d:\n%s", cmd, code, cli.ExitUsage, errOut.String())
		}
		for _, want := range []string{"worker.topics.hooks.target.secret_env", "DELAYQ_TEST_NO_SUCH_SECRET is not set"} {
			if !strings.Contains(errOut.String(), want) {
				t.Errorf("%s: stderr does not say %q:\n%s", cmd, want, errOut.String())
			}
		}
	}
}

// `delayq worker` delivers an HTTP-target topic's jobs to the endpoint,
// signed with the secret from the environment, and counts the requests.
func TestWorkerDeliversToTarget(t *testing.T) {
	got := make(chan *http.Request, 10)
	bodies := make(chan []byte, 10)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- b
		got <- r
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	t.Setenv("DELAYQ_TEST_HOOK_SECRET", "s3cret")

	rdb, ns := testenv.Redis(t)
	port := testenv.FreePort(t)
	logs := startCommand(t, fmt.Sprintf(`log: {level: debug, format: json}
redis: {mode: single, addrs: [%q], namespace: %q}
sql: {driver: sqlite, sqlite_path: %q}
orders: {enabled: false}
worker:
  max_idle: 100ms
  target_allow_hosts: [127.0.0.1]
  topics:
    hooks:
      concurrency: 2
      target: {url: %q, secret_env: DELAYQ_TEST_HOOK_SECRET, headers: {X-Team: billing}}
metrics: {listen: "127.0.0.1:%d"}
`, redisAddr(), ns, filepath.Join(t.TempDir(), "ledger.db"), rc.URL+"/hook?k=1", port), "worker")

	q, err := dataplane.New(rdb, queue.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	payload := `{"invoice":"I-7"}`
	if _, err := q.Enqueue(ctx, "hooks", queue.NewJob{ID: "I-7", Payload: []byte(payload)}); err != nil {
		t.Fatal(err)
	}
	r := testenv.Receive(ctx, t, got, "the delivery")
	body := <-bodies
	if string(body) != payload || r.URL.Path != "/hook" || r.URL.RawQuery != "k=1" {
		t.Errorf("got %s %s body %q", r.Method, r.URL, body)
	}
	m := hmac.New(sha256.New, []byte("s3cret"))
	m.Write([]byte(r.Header.Get("Delayq-Timestamp") + "." + string(body)))
	if want := "v1=" + hex.EncodeToString(m.Sum(nil)); r.Header.Get("Delayq-Signature") != want {
		t.Errorf("signature %q, want %q", r.Header.Get("Delayq-Signature"), want)
	}
	if r.Header.Get("Idempotency-Key") != "hooks:I-7" || r.Header.Get("X-Team") != "billing" || r.Header.Get("User-Agent") != "delayq/test" {
		t.Errorf("headers %v", r.Header)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	want := []string{
		`delayq_target_requests_total{class="2xx",topic="hooks"} 1`,
		`delayq_target_request_seconds_count{topic="hooks"} 1`,
		`delayq_jobs_completed_total{topic="hooks"} 1`,
	}
	var last string
	testenv.WaitFor(ctx, t, "/metrics to count the delivery", func() bool {
		code, body, err := httpGet(base + "/metrics")
		last = fmt.Sprintf("%d %v\n%s", code, err, body)
		for _, w := range want {
			if !strings.Contains(body, w) {
				return false
			}
		}
		return true
	}, func() string { return last })
	l := logs()
	if !strings.Contains(l, "target called") {
		t.Errorf("no debug line of the request in the logs:\n%s", l)
	}
	if strings.Contains(l, "s3cret") || strings.Contains(l, "invoice") {
		t.Errorf("the logs carry the secret or the payload:\n%s", l)
	}
}

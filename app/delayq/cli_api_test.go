package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// embeddedServe starts `delayq serve` on the embedded default (miniredis,
// SQLite) on a free loopback port, with extra environment, and returns its
// API's URL and the environment a CLI next to it has (the same http.listen
// and the same extra settings).
func embeddedServe(t *testing.T, bin string, extra ...string) (string, []string) {
	t.Helper()
	port := testenv.FreePort(t)
	env := append(os.Environ(), fmt.Sprintf("DELAYQ_HTTP_LISTEN=127.0.0.1:%d", port), "DELAYQ_LOG_FORMAT=json")
	env = append(env, extra...)
	serveEnv := append(slices.Clone(env), "DELAYQ_SQL_SQLITE_PATH="+filepath.Join(t.TempDir(), "serve.db"))
	start(t, bin, serveEnv, "serve")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHTTP(t, base+"/healthz")
	return base, env
}

// The CLI next to `delayq serve` on the embedded default (no Redis
// configured) goes through the instance's API. One binary for the
// subtests: building it is the slow part.
func TestCLIThroughTheAPI(t *testing.T) {
	bin := buildBinary(t)
	t.Run("embedded serve", func(t *testing.T) { testEmbeddedServe(t, bin) })
	t.Run("token", func(t *testing.T) { testToken(t, bin) })
	t.Run("no instance", func(t *testing.T) { testNoInstance(t, bin) })
	t.Run("periodic", func(t *testing.T) { testPeriodic(t, bin) })
}

// serve runs the config's periodic jobs: a schedule each second enqueues
// its ticks, and `delayq schedules` shows them through the API.
func testPeriodic(t *testing.T, bin string) {
	cfg := filepath.Join(t.TempDir(), "delayq.yaml")
	if err := os.WriteFile(cfg, []byte("periodic:\n  - {name: beat, spec: '* * * * * *', topic: beats, payload: {n: 1}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := testenv.FreePort(t)
	env := append(os.Environ(), fmt.Sprintf("DELAYQ_HTTP_LISTEN=127.0.0.1:%d", port), "DELAYQ_LOG_FORMAT=json")
	start(t, bin, append(slices.Clone(env), "DELAYQ_SQL_SQLITE_PATH="+filepath.Join(t.TempDir(), "serve.db")), "serve", "--config", cfg)
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
	var list []map[string]any
	testenv.WaitFor(testenv.Context(t), t, "a tick enqueued", func() bool {
		out, code := run(t, bin, env, "schedules", "--json")
		list = nil
		return code == 0 && json.Unmarshal([]byte(out), &list) == nil && len(list) == 1 && list[0]["last_tick"].(float64) > 0
	}, func() string { return fmt.Sprint(list) })
	if list[0]["name"] != "beat" || list[0]["running"] != true || !strings.HasPrefix(list[0]["last_job_id"].(string), "beat:") {
		t.Fatalf("schedules %v", list)
	}
	if out, code := run(t, bin, env, "get", "beats", list[0]["last_job_id"].(string), "--json"); code != 0 || !strings.Contains(out, `"n": 1`) {
		t.Fatalf("the tick's job: exit %d, %s", code, out)
	}
}

// Every operator command sees and changes the instance's jobs, with the
// output and exit codes of the direct path.
func testEmbeddedServe(t *testing.T, bin string) {
	// Orders on: order_close's handler makes the dead job below.
	base, env := embeddedServe(t, bin, "DELAYQ_ORDERS_ENABLED=true")

	jobLifecycle(t, bin, env, base, func(runAt int64) {
		out, code := run(t, bin, env, "get", "mail", "welcome:1", "--json")
		var job map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &job) != nil {
			t.Fatalf("get --json: exit %d, %q", code, out)
		}
		// The API's job view (httpapi.JobView), the same as the direct path's.
		wantKeys := []string{"attempt", "enqueued_at", "id", "max_attempts", "payload", "payload_size", "priority", "run_at", "state", "topic"}
		if keys := sortedKeys(job); !slices.Equal(keys, wantKeys) {
			t.Errorf("get --json keys %v, want %v", keys, wantKeys)
		}
		if job["state"] != "waiting" || job["run_at"] != float64(runAt) || job["max_attempts"] != float64(25) || job["priority"] != float64(0) ||
			!reflect.DeepEqual(job["payload"], map[string]any{"to": "a@example.com"}) {
			t.Errorf("get --json: %v", job)
		}
		if out, code = run(t, bin, env, "stats"); code != 0 || !strings.Contains(out, "mail") || !strings.Contains(out, "OVERDUE") {
			t.Fatalf("stats of every topic: exit %d, %q", code, out)
		}
	})
	pauseResume(t, bin, env, "anonymous")
	out, code := "", 0
	if _, code = run(t, bin, env, "dead", "requeue", "mail", "nope"); code != 3 {
		t.Fatalf("requeue of an unknown dead job: exit %d, want 3", code)
	}

	// A dead job: order_close's handler refuses an id that names no order
	// for good. Cancelling it is a conflict (4); it can be listed,
	// requeued and purged.
	if _, code = run(t, bin, env, "enqueue", "order_close", "not-an-order"); code != 0 {
		t.Fatalf("enqueue of a job that dies: exit %d", code)
	}
	waitState(t, base, "order_close", "not-an-order", "dead")
	if _, code = run(t, bin, env, "cancel", "order_close", "not-an-order"); code != 4 {
		t.Fatalf("cancel of a dead job: exit %d, want 4", code)
	}
	out, code = run(t, bin, env, "dead", "list", "order_close", "--json")
	var dead struct {
		Total int64            `json:"total"`
		Jobs  []map[string]any `json:"jobs"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &dead) != nil || dead.Total != 1 || len(dead.Jobs) != 1 ||
		dead.Jobs[0]["id"] != "not-an-order" || dead.Jobs[0]["state"] != "dead" || dead.Jobs[0]["last_error"] == "" {
		t.Fatalf("dead list: exit %d, %q", code, out)
	}
	if out, code = run(t, bin, env, "dead", "list", "order_close"); code != 0 || !strings.Contains(out, "not-an-order") || !strings.Contains(out, "(1 of 1 dead)") {
		t.Fatalf("dead list table: exit %d, %q", code, out)
	}
	if out, code = run(t, bin, env, "dead", "requeue", "order_close", "not-an-order", "--json"); code != 0 || !strings.Contains(out, `"requeued": 1`) {
		t.Fatalf("dead requeue: exit %d, %q", code, out)
	}
	waitState(t, base, "order_close", "not-an-order", "dead") // it dies again
	if out, code = run(t, bin, env, "dead", "purge", "order_close", "--all", "--json"); code != 0 || !strings.Contains(out, `"purged": 1`) {
		t.Fatalf("dead purge: exit %d, %q", code, out)
	}
	if _, code = run(t, bin, env, "get", "order_close", "not-an-order"); code != 3 {
		t.Fatalf("get of a purged job: exit %d, want 3", code)
	}

	// Bad input exits 2.
	if _, code = run(t, bin, env, "enqueue", "mail", "x", "--delay", "1h", "--run-at", "1"); code != 2 {
		t.Fatalf("enqueue with --delay and --run-at: exit %d, want 2", code)
	}

	// The audit, recovery and the deploy self-check, through the API too.
	for _, args := range [][]string{{"ledger", "list"}, {"ledger", "stale"}, {"recover", "--dry-run"}, {"recover"}} {
		if out, code = run(t, bin, env, append(args, "--json")...); code != 0 || !json.Valid([]byte(out)) {
			t.Fatalf("%v: exit %d, %q", args, code, out)
		}
	}
	if out, code = run(t, bin, env, "recover", "--dry-run", "--json"); !strings.Contains(out, `"dry_run": true`) {
		t.Fatalf("recover --dry-run: exit %d, %q", code, out)
	}
	if out, code = run(t, bin, env, "smoke", "--within", "10s"); code != 0 || !strings.Contains(out, "ok: job smoke:") {
		t.Fatalf("smoke: exit %d, %q", code, out)
	}

	// --api names the instance when http.listen does not.
	other := append(slices.Clone(os.Environ()), "DELAYQ_HTTP_LISTEN=127.0.0.1:1")
	if out, code = run(t, bin, other, "enqueue", "mail", "welcome:2", "--api", base, "--json"); code != 0 || !strings.Contains(out, `"welcome:2"`) {
		t.Fatalf("enqueue with --api: exit %d, %q", code, out)
	}
	if out, code = run(t, bin, other, "get", "mail", "welcome:2", "--api", base); code != 0 || !strings.Contains(out, "welcome:2") {
		t.Fatalf("get with --api: exit %d, %q", code, out)
	}
}

// An instance with a token: the CLI without it is refused (exit 2, with
// what to set), with DELAYQ_HTTP_TOKEN it works.
func testToken(t *testing.T, bin string) {
	const token = "cli-test-token-4c1f9a7e2b"
	base, env := embeddedServe(t, bin, "DELAYQ_HTTP_TOKEN="+token)
	without := slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "DELAYQ_HTTP_TOKEN=") })

	out, errOut, code := runFull(t, bin, without, "enqueue", "mail", "w:1", "--json")
	if code != 2 || out != "" || !strings.Contains(errOut, "401") || !strings.Contains(errOut, "DELAYQ_HTTP_TOKEN") {
		t.Fatalf("without the token: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	wrong := append(slices.Clone(without), "DELAYQ_HTTP_TOKEN=not-the-token-of-this-test")
	if out, _, code = runFull(t, bin, wrong, "stats"); code != 2 || out != "" {
		t.Fatalf("with a wrong token: exit %d, stdout %q", code, out)
	}
	if out, code = run(t, bin, env, "enqueue", "mail", "w:1", "--json"); code != 0 || !strings.Contains(out, `"duplicate": false`) {
		t.Fatalf("with the token: exit %d, %q", code, out)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/topics/mail/jobs/w:1", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the job is not in the instance: %v %v", resp, err)
	}
	resp.Body.Close()
}

// Nothing listening where the CLI looks: it says why and what to do, exits
// 1, and prints nothing that reads as a result.
func testNoInstance(t *testing.T, bin string) {
	port := testenv.FreePort(t)
	env := append(os.Environ(), fmt.Sprintf("DELAYQ_HTTP_LISTEN=127.0.0.1:%d", port))
	for _, args := range [][]string{{"enqueue", "emails", "w:1"}, {"enqueue", "emails", "w:1", "--json"}, {"stats"}, {"cancel", "emails", "w:1"}} {
		out, errOut, code := runFull(t, bin, env, args...)
		if code != 1 || out != "" {
			t.Errorf("%v: exit %d, stdout %q; want 1 and nothing on stdout", args, code, out)
		}
		for _, want := range []string{fmt.Sprintf("no delayq instance answers at http://127.0.0.1:%d", port), "redis.mode embedded", "delayq serve", "--api", "Nothing was done"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("%v: stderr %q lacks %q", args, errOut, want)
			}
		}
	}
}

// waitState polls the API until the job is in state (the worker runs in
// another process: there is no signal to wait on).
func waitState(t *testing.T, base, topic, id, state string) {
	t.Helper()
	var got string
	var last error
	testenv.WaitFor(testenv.ContextTimeout(t, 30*time.Second), t, fmt.Sprintf("%s/%s %s", topic, id, state), func() bool {
		var v struct {
			State string `json:"state"`
		}
		resp, err := http.Get(base + "/v1/topics/" + topic + "/jobs/" + id)
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&v)
			resp.Body.Close()
		}
		got, last = v.State, err
		return err == nil && v.State == state
	}, func() string { return fmt.Sprintf("state %q, %v", got, last) })
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/redis/go-redis/v9"
)

// A job nobody knows is said alike by get, cancel and reschedule, on Redis
// and SQL directly and through an instance's API: "job TOPIC/ID: job not
// found", exit 3; never the API's status line.
func TestUnknownJobIsSaidAlikeByEveryCommand(t *testing.T) {
	_, cfgPath, api := directAndAPI(t)

	for _, via := range [][]string{{"--config", cfgPath}, {"--api", api}} {
		for _, c := range [][]string{
			{"get", "emails", "nope"},
			{"cancel", "emails", "nope"},
			{"reschedule", "emails", "nope", "--in", "1h"},
		} {
			code, out, errOut := runCLI(t, append(c, via...)...)
			lines := strings.Split(strings.TrimSpace(errOut), "\n") // the embedded SQLite's warnings come first
			if code != ExitNotFound || out != "" || lines[len(lines)-1] != "delayq: job emails/nope: job not found" {
				t.Errorf("%v %v: exit %d, stdout %q, stderr %q", c, via[0], code, out, errOut)
			}
		}
	}
}

// directAndAPI gives the two ways the operator commands reach one Redis
// namespace of the test's own: the path of a configuration that works on
// it directly (migrated), and the URL of an API instance on it; and a
// data-plane client of the namespace.
func directAndAPI(t *testing.T) (q *dataplane.Client, cfgPath, api string) {
	t.Helper()
	e := newCLIEnv(t, "", queue.Config{})
	return e.q, e.cfg, e.api
}

// cliEnv is directAndAPI's world with its parts named: the namespace's
// Redis, the migrated configuration (with extra YAML of the test's), and
// the API instance over a data-plane client of qc's settings.
type cliEnv struct {
	q        *dataplane.Client
	rdb      redis.UniversalClient
	ns       string
	cfg, api string
}

// newCLIEnv builds a cliEnv; qc's Namespace is the test's.
func newCLIEnv(t *testing.T, extraYAML string, qc queue.Config) cliEnv {
	t.Helper()
	rdb, ns := testenv.Redis(t)
	e := cliEnv{rdb: rdb, ns: ns, cfg: directConfig(t, ns, extraYAML)}
	if code, _, errOut := runCLI(t, "migrate", "--config", e.cfg); code != ExitOK {
		t.Fatalf("migrate: exit %d: %s", code, errOut)
	}
	l, err := ledger.New(testenv.SQLite(t), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Migrate(testenv.Context(t)); err != nil {
		t.Fatal(err)
	}
	qc.Namespace = ns
	if e.q, err = dataplane.New(rdb, qc); err != nil {
		t.Fatal(err)
	}
	e.api = apiInstance(t, httpapi.Deps{Queue: e.q, Ledger: l})
	return e
}

// Flags that contradict each other are refused by their names before any
// request, not by the API's field names.
func TestEnqueueRefusesContradictoryFlagsByName(t *testing.T) {
	listen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"enqueue", "mail", "x", "--delay", "1s", "--run-at", "2030-01-01T00:00:00Z"}, "--delay and --run-at"},
		{[]string{"enqueue", "mail", "x", "--payload", "{}", "--payload-file", "p.json"}, "--payload and --payload-file"},
	} {
		code, out, errOut := runCLI(t, append(c.args, "--listen", listen)...)
		if code != ExitUsage || out != "" || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "run_at") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", c.args, code, out, errOut)
		}
	}
}

// --payload-file reads no further than queue.max_payload_bytes: a file
// over it (here one past a limit of 16 bytes, and /dev/zero, endless) is
// refused by the flag's name, exit 2, before anything is sent.
func TestEnqueuePayloadFileIsReadUpToTheLimit(t *testing.T) {
	listen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	t.Setenv("DELAYQ_QUEUE_MAX_PAYLOAD_BYTES", "16")
	big := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(big, []byte(`"0123456789abcde"`), 0o600); err != nil { // 17 bytes
		t.Fatal(err)
	}
	for _, path := range []string{big, "/dev/zero"} {
		code, out, errOut := runCLI(t, "enqueue", "mail", "x", "--payload-file", path, "--listen", listen)
		if code != ExitUsage || out != "" || !strings.Contains(errOut, "--payload-file") || !strings.Contains(errOut, "over queue.max_payload_bytes (16 bytes)") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", path, code, out, errOut)
		}
	}
}

// An empty schedules list says so, instead of a header alone.
func TestSchedulesSaysWhenThereAreNone(t *testing.T) {
	_, ns := testenv.Redis(t)
	cfgPath := directConfig(t, ns, "")
	code, out, errOut := runCLI(t, "schedules", "--config", cfgPath)
	if code != ExitOK || !strings.Contains(out, "no schedules") || strings.Contains(out, "NEXT RUN") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = runCLI(t, "schedules", "--json", "--config", cfgPath)
	if code != ExitOK || strings.TrimSpace(out) != "[]" {
		t.Errorf("--json: exit %d, %q", code, out)
	}
}

// get on Redis and SQL directly shows a waiting job's max_attempts capped
// by its topic's worker.topics.<t>.max_attempts, which its claim applies,
// as the API does; another topic shows the job's own.
func TestGetShowsTheTopicsAttemptLimit(t *testing.T) {
	_, ns := testenv.Redis(t)
	cfgPath := directConfig(t, ns, "worker: {topics: {hook: {max_attempts: 3}}}\n")
	if code, _, errOut := runCLI(t, "migrate", "--config", cfgPath); code != ExitOK {
		t.Fatalf("migrate: exit %d: %s", code, errOut)
	}
	for topic, want := range map[string]int{"hook": 3, "mail": 25} {
		if code, _, errOut := runCLI(t, "enqueue", topic, "a", "--delay", "1h", "--config", cfgPath); code != ExitOK {
			t.Fatalf("enqueue %s: exit %d: %s", topic, code, errOut)
		}
		code, out, errOut := runCLI(t, "get", topic, "a", "--json", "--config", cfgPath)
		if code != ExitOK || !strings.Contains(out, fmt.Sprintf(`"max_attempts": %d`, want)) {
			t.Errorf("get %s: exit %d, %s %s", topic, code, out, errOut)
		}
	}
}

// Cancelling an order's close job where the orders module runs warns, on
// stderr and in --json's warning, that the sweeper closes the order
// anyway; another topic's cancel does not.
func TestCancelOfACloseJobWarns(t *testing.T) {
	_, ns := testenv.Redis(t)
	cfgPath := directConfig(t, ns, "orders: {enabled: true}\n")
	if code, _, errOut := runCLI(t, "migrate", "--config", cfgPath); code != ExitOK {
		t.Fatalf("migrate: exit %d: %s", code, errOut)
	}
	for _, c := range []struct{ topic, id, warn string }{
		{"order_close", "order_close:20261203000000abc", "sweeper enqueues a new close job"},
		{"mail", "order_close:20261203000000abc", ""},
	} {
		if code, _, errOut := runCLI(t, "enqueue", c.topic, c.id, "--delay", "1h", "--config", cfgPath); code != ExitOK {
			t.Fatalf("enqueue %s: exit %d: %s", c.topic, code, errOut)
		}
		code, out, errOut := runCLI(t, "cancel", c.topic, c.id, "--json", "--config", cfgPath)
		if code != ExitOK || strings.Contains(errOut, "delayq: warning:") != (c.warn != "") || !strings.Contains(errOut, c.warn) ||
			strings.Contains(out, `"warning"`) != (c.warn != "") {
			t.Errorf("cancel %s: exit %d, stdout %s, stderr %s", c.topic, code, out, errOut)
		}
	}
}

// Cancelling a job a worker holds asks for its run to be cancelled, on
// Redis directly and through an instance's API alike: exit 0, "cancel
// requested" (cancel_requested_at in --json), and get shows the job in
// flight with its cancel requested.
func TestCancelOfARunningJob(t *testing.T) {
	q, cfgPath, api := directAndAPI(t)
	for i, via := range [][]string{{"--config", cfgPath}, {"--api", api}} {
		id := fmt.Sprintf("running:%d", i)
		if _, err := q.Enqueue(testenv.Context(t), "mail", queue.NewJob{ID: id}); err != nil {
			t.Fatal(err)
		}
		if cl, err := q.Claim(testenv.Context(t), "mail", 1, time.Hour); err != nil || len(cl.Jobs) != 1 || cl.Jobs[0].ID != id {
			t.Fatalf("claim: %+v, %v", cl, err)
		}
		code, out, errOut := runCLI(t, append([]string{"cancel", "mail", id}, via...)...)
		if code != ExitOK || !strings.Contains(out, "cancel requested") {
			t.Errorf("cancel %v: exit %d, stdout %q, stderr %q", via[0], code, out, errOut)
		}
		code, out, errOut = runCLI(t, append([]string{"cancel", "mail", id, "--json"}, via...)...)
		if code != ExitOK || !strings.Contains(out, `"cancel_requested_at"`) || !strings.Contains(out, `"state": "in_flight"`) {
			t.Errorf("cancel --json %v: exit %d, stdout %q, stderr %q", via[0], code, out, errOut)
		}
		code, out, errOut = runCLI(t, append([]string{"get", "mail", id}, via...)...)
		if code != ExitOK || !strings.Contains(out, "in_flight (cancel requested") {
			t.Errorf("get %v: exit %d, stdout %q, stderr %q", via[0], code, out, errOut)
		}
	}
}

package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// buildBinary compiles the delayq program once per test binary run.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "delayq")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// proc is a delayq process a test started; it is killed on cleanup if the
// test did not stop it.
type proc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	done   chan struct{}
	waitEr error
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

type lockedWriter struct{ p *proc }

func (w lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.out.Write(b)
}

func start(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stdout = lockedWriter{p}
	p.cmd.Stderr = lockedWriter{p}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.waitEr = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("output of %v:\n%s", args, p.output())
		}
	})
	return p
}

// stop sends SIGTERM and returns the exit code.
func (p *proc) stop(t *testing.T) int {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatal("process did not stop within a minute of SIGTERM")
	}
	var ee *exec.ExitError
	if errors.As(p.waitEr, &ee) {
		return ee.ExitCode()
	}
	if p.waitEr != nil {
		t.Fatal(p.waitEr)
	}
	return 0
}

func waitHTTP(t *testing.T, url string) {
	t.Helper()
	var last error
	testenv.WaitFor(testenv.Context(t), t, url+" to answer 200", func() bool {
		resp, err := http.Get(url)
		last = err
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, func() string { return fmt.Sprintf("last error %v", last) })
}

// run runs one CLI command to completion and returns its stdout and exit
// code.
func run(t *testing.T, bin string, env []string, args ...string) (string, int) {
	t.Helper()
	out, _, code := runFull(t, bin, env, args...)
	return out, code
}

// runFull is run that returns stderr too.
func runFull(t *testing.T, bin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	err := cmd.Run()
	t.Logf("%v took %s", args, time.Since(began).Round(time.Millisecond))
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	if code != 0 {
		t.Logf("%v exited %d: %s", args, code, stderr.String())
	}
	return stdout.String(), stderr.String(), code
}

// The CLI as a built binary against a running `serve` on real Redis and
// MariaDB: every operator command, its output and its exit code; then
// serve stops on SIGTERM with exit code 0.
func TestCLIAgainstServe(t *testing.T) {
	bin := buildBinary(t)
	_, ns := testenv.Redis(t) // a namespace of this test's own on the shared Redis
	dsn := testenv.MySQLDSN(t)
	port := testenv.FreePort(t)
	env := serveEnv(ns, dsn, port)
	serve := start(t, bin, env, "serve")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHTTP(t, base+"/readyz")

	jobLifecycle(t, bin, env, base, func(int64) {
		// With Redis configured the CLI works on it directly; with --api it
		// goes through the instance's API, and prints the same.
		for _, args := range [][]string{
			{"get", "mail", "welcome:1"}, {"get", "mail", "welcome:1", "--json"},
			{"dead", "list", "mail"}, {"ledger", "list", "--json"}, {"stats", "mail"},
			{"jobs", "mail"}, {"jobs", "mail", "--json"}, {"jobs", "mail", "--state", "retrying", "--json"},
		} {
			direct, code1 := run(t, bin, env, args...)
			viaAPI, code2 := run(t, bin, env, append(args, "--api", base)...)
			if code1 != 0 || code2 != 0 || direct != viaAPI {
				t.Errorf("%v: direct (exit %d):\n%s\nthrough the API (exit %d):\n%s", args, code1, direct, code2, viaAPI)
			}
		}
	})
	// The job browser's listing: the waiting job, and a prefix refused on
	// a redis topic (no index by id) with exit 2 both ways.
	if out, code := run(t, bin, env, "jobs", "mail"); code != 0 || strings.Contains(out, "welcome:1") {
		t.Fatalf("jobs of mail after the cancel: exit %d, %q", code, out)
	}
	for _, extra := range [][]string{nil, {"--api", base}} {
		if out, code := run(t, bin, env, append([]string{"jobs", "mail", "--prefix", "welcome:"}, extra...)...); code != 2 || out != "" {
			t.Fatalf("jobs --prefix on a redis topic %v: exit %d, %q; want 2", extra, code, out)
		}
	}
	if _, code := run(t, bin, env, "get", "mail"); code != 2 {
		t.Fatalf("missing argument: exit %d, want 2", code)
	}
	pauseResume(t, bin, env, "cli:")
	// The deploy self-check: serve's workers run the smoke job on time.
	if out, code := run(t, bin, env, "smoke"); code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("smoke: exit %d, %q", code, out)
	}
	for _, args := range [][]string{
		{"dead", "list", "mail"}, {"dead", "purge", "mail", "--all"}, {"ledger", "list"}, {"ledger", "stale"},
		{"recover", "--dry-run"}, {"migrate"}, {"version"},
	} {
		if out, code := run(t, bin, env, append(args, "--json")...); code != 0 || !json.Valid([]byte(out)) {
			t.Fatalf("%v: exit %d, %q", args, code, out)
		}
	}
	if code := serve.stop(t); code != 0 {
		t.Fatalf("serve exited %d after SIGTERM", code)
	}
}

// jobLifecycle is what every way of running the CLI must get right: it
// enqueues mail/welcome:1 (then again: a duplicate), checks that the
// instance's API at base holds it, that get and stats see it, calls between
// with the job's due time, cancels the job, and checks the exit codes of a
// job that is gone (3) and of bad input (2).
func jobLifecycle(t *testing.T, bin string, env []string, base string, between func(runAt int64)) {
	t.Helper()
	out, code := run(t, bin, env, "enqueue", "mail", "welcome:1", "--payload", `{"to":"a@example.com"}`, "--delay", "1h", "--json")
	var enq struct {
		Topic     string `json:"topic"`
		ID        string `json:"id"`
		RunAt     int64  `json:"run_at"`
		Duplicate bool   `json:"duplicate"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &enq) != nil || enq.Topic != "mail" || enq.ID != "welcome:1" || enq.Duplicate || enq.RunAt == 0 {
		t.Fatalf("enqueue: exit %d, %q", code, out)
	}
	if out, code = run(t, bin, env, "enqueue", "mail", "welcome:1", "--json"); code != 0 || !strings.Contains(out, `"duplicate": true`) {
		t.Fatalf("second enqueue: exit %d, %q", code, out)
	}
	// The instance holds what the CLI wrote.
	resp, err := http.Get(base + "/v1/topics/mail/jobs/welcome:1")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("API get: %v %v", resp, err)
	}
	resp.Body.Close()
	if out, code = run(t, bin, env, "get", "mail", "welcome:1"); code != 0 || !strings.Contains(out, "waiting") || !strings.Contains(out, "a@example.com") {
		t.Fatalf("get: exit %d, %q", code, out)
	}
	if out, code = run(t, bin, env, "stats", "mail", "--json"); code != 0 || !strings.Contains(out, `"due": 1`) || !strings.Contains(out, `"durability": "redis"`) {
		t.Fatalf("stats: exit %d, %q", code, out)
	}
	between(enq.RunAt)
	// Rescheduled later by a shift, then back by an absolute time.
	out, code = run(t, bin, env, "reschedule", "mail", "welcome:1", "--by", "30m", "--json")
	var moved struct {
		RunAt         int64 `json:"run_at"`
		PreviousRunAt int64 `json:"previous_run_at"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &moved) != nil || moved.PreviousRunAt != enq.RunAt || moved.RunAt != enq.RunAt+1800_000 {
		t.Fatalf("reschedule --by 30m: exit %d, %q", code, out)
	}
	if out, code = run(t, bin, env, "reschedule", "mail", "welcome:1", "--at", strconv.FormatInt(enq.RunAt, 10)); code != 0 || !strings.Contains(out, "WAS DUE") {
		t.Fatalf("reschedule --at: exit %d, %q", code, out)
	}
	if _, code = run(t, bin, env, "reschedule", "mail", "nope", "--in", "1m"); code != 3 {
		t.Fatalf("reschedule of an unknown job: exit %d, want 3", code)
	}
	if out, code = run(t, bin, env, "cancel", "mail", "welcome:1"); code != 0 || !strings.Contains(out, "yes") {
		t.Fatalf("cancel: exit %d, %q", code, out)
	}
	if _, code = run(t, bin, env, "get", "mail", "welcome:1"); code != 3 {
		t.Fatalf("get of a cancelled job: exit %d, want 3", code)
	}
	if _, code = run(t, bin, env, "cancel", "mail", "welcome:1"); code != 3 {
		t.Fatalf("cancel of an unknown job: exit %d, want 3", code)
	}
	if _, code = run(t, bin, env, "enqueue", "bad topic", "x"); code != 2 {
		t.Fatalf("enqueue to a bad topic: exit %d, want 2", code)
	}
}

// The smoke check fails, with its exit code, when no worker runs.
func TestSmokeFailsWithoutWorkers(t *testing.T) {
	bin := buildBinary(t)
	_, ns := testenv.Redis(t)
	env := append(os.Environ(), "DELAYQ_REDIS_MODE=single", "DELAYQ_REDIS_ADDRS="+redisAddr(),
		"DELAYQ_REDIS_NAMESPACE="+ns, "DELAYQ_SQL_SQLITE_PATH="+filepath.Join(t.TempDir(), "l.db"))
	if _, code := run(t, bin, env, "smoke", "--delay", "100ms", "--within", "500ms"); code != 1 {
		t.Fatalf("smoke without workers: exit %d, want 1", code)
	}
}

// `delayq demo` on a machine with nothing installed: embedded backends,
// orders created, paid and closed, reachable over HTTP, and a clean exit
// on SIGTERM.
func TestDemo(t *testing.T) {
	bin := buildBinary(t)
	port := testenv.FreePort(t)
	env := append(os.Environ(), "DELAYQ_LOG_LEVEL=warn")
	demo := start(t, bin, env, "demo", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--every", "50ms", "--payment-window", "1s")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHTTP(t, base+"/healthz")
	// Wait until an order closed on its own (the close job ran).
	testenv.WaitFor(testenv.Context(t), t, "an order closed", func() bool {
		return strings.Contains(demo.output(), "orders:") && closedCount(demo.output()) > 0
	}, demo.output)
	resp, err := http.Get(base + "/v1/topics/order_close")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET order_close stats: %v %v", resp, err)
	}
	resp.Body.Close()
	if code := demo.stop(t); code != 0 {
		t.Fatalf("demo exited %d after SIGTERM", code)
	}
}

// closedCount reads the last summary line's closed count.
func closedCount(out string) int {
	n := 0
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, " paid, "); i >= 0 && strings.Contains(line, "orders:") {
			fmt.Sscanf(line[i+len(" paid, "):], "%d closed", &n)
		}
	}
	return n
}

func redisAddr() string {
	if a := os.Getenv(testenv.EnvRedisAddr); a != "" {
		return a
	}
	return testenv.DefaultRedisAddr
}

// A start that fails (the port is taken) says why and exits 1, without a
// panic, leaving nothing behind.
func TestServeFailsCleanlyWhenPortTaken(t *testing.T) {
	bin := buildBinary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	env := append(os.Environ(), "DELAYQ_SQL_SQLITE_PATH="+filepath.Join(t.TempDir(), "l.db"))
	cmd := exec.Command(bin, "serve", "--listen", ln.Addr().String())
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "http.listen") || strings.Contains(string(out), "panic") {
		t.Fatalf("serve on a taken port: %v\n%s", err, out)
	}
}

// serveEnv is the environment of a delayq process on the shared Redis
// (namespace ns) and MariaDB (dsn), its API on a loopback port, logging
// JSON; extra variables come last, so they win.
func serveEnv(ns, dsn string, port int, extra ...string) []string {
	env := append(os.Environ(),
		"DELAYQ_REDIS_MODE=single",
		"DELAYQ_REDIS_ADDRS="+redisAddr(),
		"DELAYQ_REDIS_NAMESPACE="+ns,
		"DELAYQ_SQL_DRIVER=mysql",
		"DELAYQ_SQL_DSN="+dsn,
		fmt.Sprintf("DELAYQ_HTTP_LISTEN=127.0.0.1:%d", port),
		"DELAYQ_LOG_FORMAT=json",
	)
	return append(env, extra...)
}

// pauseResume pauses and resumes the topic mail through the CLI: the JSON
// state (changed_by starting with actor), stats showing it, the second
// pause changing nothing, bad input exiting 2.
func pauseResume(t *testing.T, bin string, env []string, actor string) {
	t.Helper()
	var st struct {
		Topic     string `json:"topic"`
		Paused    bool   `json:"paused"`
		ChangedBy string `json:"changed_by"`
		Changed   bool   `json:"changed"`
	}
	out, code := run(t, bin, env, "pause", "mail", "--json")
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || !st.Paused || !st.Changed || !strings.HasPrefix(st.ChangedBy, actor) {
		t.Fatalf("pause: exit %d, %q (want changed_by %s...)", code, out, actor)
	}
	if out, code = run(t, bin, env, "pause", "mail"); code != 0 || !strings.Contains(out, "already paused") {
		t.Fatalf("second pause: exit %d, %q", code, out)
	}
	if out, code = run(t, bin, env, "stats", "mail", "--json"); code != 0 || !strings.Contains(out, `"paused": true`) {
		t.Fatalf("stats while paused: exit %d, %q", code, out)
	}
	if out, code = run(t, bin, env, "resume", "mail"); code != 0 || !strings.Contains(out, "topic mail resumed") {
		t.Fatalf("resume: exit %d, %q", code, out)
	}
	if _, code = run(t, bin, env, "pause", "bad topic"); code != 2 {
		t.Fatalf("pause of a bad topic: exit %d, want 2", code)
	}
}

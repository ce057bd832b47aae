package examples_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gorm.io/driver/mysql"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// readmeProgram is the Go program after "<!-- program: NAME -->" in the
// README.
func readmeProgram(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- program: "+name+" -->\n```go\n")
	if !ok {
		t.Fatalf("README.md has no program %q", name)
	}
	prog, _, ok := strings.Cut(rest, "```\n")
	if !ok {
		t.Fatalf("README.md: program %q has no closing fence", name)
	}
	return prog
}

// TestEngineProgramInReadme builds and runs the README's engine program
// (at most 25 lines, as gofmt writes it) on a Redis server of its own and
// a MariaDB database of its own: a durable topic with a 1 s horizon, one
// job enqueued in a gorm transaction, due 3 s later. The handler must run
// once, not before the job is due and at most 500 ms after, and Ctrl-C
// must stop the program gracefully with the job settled everywhere.
func TestEngineProgramInReadme(t *testing.T) {
	prog := readmeProgram(t, "engine")
	if n := strings.Count(prog, "\n"); n > 25 {
		t.Errorf("the README's engine program has %d lines, want at most 25", n)
	}
	if f, err := format.Source([]byte(prog)); err != nil || string(f) != prog {
		t.Errorf("the README's engine program is not gofmt'd (err %v):\n%s", err, f)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(prog), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	bin := filepath.Join(dir, "engine")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, filepath.Join(dir, "main.go"))
	build.Dir = ".." // the module's root: the program's imports resolve to this tree
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of the README's program: %v\n%s", err, out)
	}

	srv := testenv.StartRedis(t, testenv.RedisOptions{})
	dsn := testenv.MySQLDSN(t)
	store, err := ledger.Open(mysql.Open(dsn), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil { // delayq migrate, as the README says
		t.Fatal(err)
	}

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "MYSQL_DSN="+dsn, "REDIS_ADDR="+srv.Addr)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	ownGroup(cmd)
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var mu sync.Mutex
	var lines []string
	seen := make(chan struct{}, 8) // a line was read
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
			seen <- struct{}{}
		}
		done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		killGroup(cmd)
		if t.Failed() {
			t.Logf("the program's stderr:\n%s", stderr.String())
		}
	})

	// The job's row is in SQL from the commit on (a durable topic): its
	// due time, read before the job can run.
	var row ledger.Entry
	testenv.WaitFor(ctx, t, "the job's row in the ledger", func() bool {
		row, err = store.Row(ctx, "close", "1")
		return err == nil
	})
	if row.State != queue.StateWaiting || row.RunAt-row.EnqueuedAt < 3000 {
		t.Errorf("the job's row is %s, due %d ms after its enqueue; want scheduled, 3000", row.State, row.RunAt-row.EnqueuedAt)
	}
	testenv.Receive(ctx, t, seen, "the handler's first run")
	mu.Lock()
	first := lines[0]
	mu.Unlock()
	var ran time.Time
	if err := json.Unmarshal([]byte(first), &ran); err != nil {
		t.Fatalf("the handler printed %q: %v", first, err)
	}
	if late := ran.Sub(time.UnixMilli(row.RunAt)); late < 0 || late > 500*time.Millisecond {
		t.Errorf("the handler ran %s after the job's due time, want 0 to 500ms", late)
	}

	// Once: the ledger row is settled and Redis has no trace of the job
	// left, so nothing can run it again.
	q, err := dataplane.New(srv.Client(t), queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(ctx, t, "the job settled in SQL and Redis", func() bool {
		n, err := store.Count(ctx)
		if err != nil || n != 0 {
			return false
		}
		info, err := q.Get(ctx, "close", "1")
		return err == nil && info.State == queue.StateUnknown
	})
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := testenv.Receive(ctx, t, done, "the program to stop on Ctrl-C"); err != nil {
		t.Fatalf("the program exited with %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != 1 {
		t.Errorf("the handler ran %d times, want once: %q", len(lines), lines)
	}
	if !strings.Contains(stderr.String(), "enqueued: <nil> stopped: <nil>") {
		t.Errorf("the program's last line is not a clean stop: %q", stderr.String())
	}
}

package recoverer_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The fault tests run workers and recoverers as separate OS processes: the
// test binary re-executes itself with DELAYQ_FAULT_ROLE naming what to run
// (see fault_child_test.go) and DELAYQ_FAULT_SPEC its JSON configuration.
const (
	envFaultRole = "DELAYQ_FAULT_ROLE"
	envFaultSpec = "DELAYQ_FAULT_SPEC"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(envFaultRole); role != "" {
		os.Exit(faultChild(role, os.Getenv(envFaultSpec)))
	}
	os.Exit(m.Run())
}

// chaosLong reports whether the long variants run (make chaos).
func chaosLong() bool { return os.Getenv("DELAYQ_CHAOS") == "long" }

// scale picks the short (make test) or long (make chaos) size.
func scale(short, long int) int {
	if chaosLong() {
		return long
	}
	return short
}

// child is a process a fault test started: the test binary in a role. Its
// stderr (the role's JSON logs) goes to a file of the test's temp dir; its
// stdin stays open while the test runs, so a child sees EOF and exits if
// the test binary dies without cleaning up.
type child struct {
	name    string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdout  *bufio.Scanner // for roles that answer on stdout
	logPath string
	done    chan struct{}
	err     error // Wait's result, read after done
}

// startChild starts the test binary as role with spec, named name in logs.
func startChild(t testing.TB, name, role string, spec any) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	c := &child{name: name, logPath: filepath.Join(t.TempDir(), name+".log"), done: make(chan struct{})}
	logf, err := os.Create(c.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close() // the child holds its own copy
	c.cmd = exec.Command(exe, "-test.run=^$")
	c.cmd.Env = append(os.Environ(), envFaultRole+"="+role, envFaultSpec+"="+string(b))
	c.cmd.Stderr = logf
	// A process group of its own: a ^C to the test does not reach it.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	// An os.Pipe rather than StdoutPipe: Wait (in the goroutine below)
	// closes a StdoutPipe as soon as the child exits, dropping what it wrote
	// and the test has not read yet (a recoverer that was skipped prints
	// its report and exits while the test still reads the other one's).
	out, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = out.Close() })
	c.cmd.Stdout = w
	c.stdout = bufio.NewScanner(out)
	c.stdout.Buffer(make([]byte, 64<<10), 16<<20)
	err = c.cmd.Start()
	_ = w.Close() // the child holds its own copy
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.kill(t)
		if t.Failed() {
			t.Logf("%s (pid %d) log, tail:\n%s", name, c.cmd.Process.Pid, tail(c.log(), 6000))
		}
	})
	return c
}

// pid is the child's process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// exited reports whether the child has exited.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL to the child's pid (os.Process.Signal goes through a
// pidfd, so it never hits a reused pid) and waits until it is reaped.
func (c *child) kill(t testing.TB) {
	t.Helper()
	if c.exited() {
		return
	}
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("kill %s (pid %d): %v", c.name, c.pid(), err)
	}
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Errorf("%s (pid %d) did not exit within 30s of SIGKILL", c.name, c.pid())
	}
	_ = c.stdin.Close()
}

// stop sends SIGTERM (a graceful shutdown) and waits at most limit.
func (c *child) stop(t testing.TB, limit time.Duration) {
	t.Helper()
	if c.exited() {
		return
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("SIGTERM %s (pid %d): %v", c.name, c.pid(), err)
	}
	select {
	case <-c.done:
		if c.err != nil {
			t.Errorf("%s exited with %v", c.name, c.err)
		}
	case <-time.After(limit):
		t.Errorf("%s (pid %d) did not stop within %s of SIGTERM", c.name, c.pid(), limit)
		c.kill(t)
	}
	_ = c.stdin.Close()
}

// log returns what the child logged so far.
func (c *child) log() string {
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return string(b)
}

// logLines returns the child's log lines that contain every one of subs.
func (c *child) logLines(subs ...string) []string {
	var out []string
	for _, line := range strings.Split(c.log(), "\n") {
		ok := true
		for _, s := range subs {
			if !strings.Contains(line, s) {
				ok = false
				break
			}
		}
		if ok && line != "" {
			out = append(out, line)
		}
	}
	return out
}

// checkNoRace fails the test if the child's race detector reported a race.
func (c *child) checkNoRace(t testing.TB) {
	t.Helper()
	if strings.Contains(c.log(), "WARNING: DATA RACE") {
		t.Errorf("%s: the race detector reported a data race:\n%s", c.name, tail(c.log(), 6000))
	}
}

// readLine returns the child's next stdout line, failing the test after
// limit.
func (c *child) readLine(t testing.TB, limit time.Duration) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		if c.stdout.Scan() {
			got <- c.stdout.Text()
		}
		close(got)
	}()
	select {
	case line, ok := <-got:
		if !ok {
			t.Fatalf("%s closed its stdout (exited: %v)", c.name, c.exited())
		}
		return line
	case <-time.After(limit):
		t.Fatalf("%s said nothing within %s", c.name, limit)
		return ""
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

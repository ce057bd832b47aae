// Package deployments_test checks the files of deployments/ with the real
// tools where this machine has them (systemd-analyze, docker compose,
// redis-server, the Go toolchain) and their invariants everywhere: a check
// whose tool is missing skips and says which.
package deployments_test

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

const (
	// defaultShutdownTimeout is worker.shutdown_timeout's default; the
	// largest shutdown_timeout written in configs/*.yaml counts if larger.
	defaultShutdownTimeout = 30 * time.Second
	// stopMargin is what a stop timeout must leave beyond the shutdown
	// timeout: flushing the completer, closing connections.
	stopMargin = 5 * time.Second

	binPath    = "/usr/local/bin/delayq"
	configPath = "/etc/delayq/delayq.yaml"
	envFile    = "/etc/delayq/delayq.env"

	toolTimeout = 2 * time.Minute
)

var unitFiles = []string{
	"systemd/delayq.service",
	"systemd/delayq-worker@.service",
	"systemd/delayq-workers.target",
}

// ---------------------------------------------------------------------------
// systemd units

// unit is a parsed unit file: section → key → values in file order.
type unit map[string]map[string][]string

func (u unit) get(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
}

func parseUnit(t *testing.T, path string) unit {
	t.Helper()
	u := unit{}
	section := ""
	var pending string
	for n, line := range strings.Split(readFile(t, path), "\n") {
		line = strings.TrimSpace(line)
		if pending != "" {
			line = pending + " " + line
			pending = ""
		}
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			pending = strings.TrimSuffix(line, "\\")
			continue
		}
		if line[0] == '[' {
			section = strings.Trim(line, "[]")
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			t.Fatalf("%s:%d: not key=value inside a section: %q", path, n+1, line)
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		u[section][key] = append(u[section][key], value)
	}
	return u
}

// parseTimespan parses a systemd time span ("45", "45s", "1min 30s").
func parseTimespan(s string) (time.Duration, error) {
	units := map[string]time.Duration{
		"": time.Second, "s": time.Second, "sec": time.Second, "second": time.Second, "seconds": time.Second,
		"ms": time.Millisecond, "msec": time.Millisecond,
		"m": time.Minute, "min": time.Minute, "minute": time.Minute, "minutes": time.Minute,
		"h": time.Hour, "hr": time.Hour, "hour": time.Hour, "hours": time.Hour,
	}
	re := regexp.MustCompile(`^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)`)
	rest := strings.TrimSpace(s)
	if rest == "" || rest == "infinity" {
		return 0, fmt.Errorf("time span %q is not finite", s)
	}
	var total time.Duration
	for rest != "" {
		m := re.FindStringSubmatch(rest)
		if m == nil {
			return 0, fmt.Errorf("bad time span %q", s)
		}
		unit, ok := units[m[2]]
		if !ok {
			return 0, fmt.Errorf("bad unit %q in time span %q", m[2], s)
		}
		f, _ := strconv.ParseFloat(m[1], 64)
		total += time.Duration(f * float64(unit))
		rest = strings.TrimSpace(rest[len(m[0]):])
	}
	return total, nil
}

// shutdownTimeout is the largest worker shutdown timeout the configs allow
// for: the default, or a larger shutdown_timeout written in configs/*.yaml.
func shutdownTimeout(t *testing.T) time.Duration {
	t.Helper()
	max := defaultShutdownTimeout
	files, _ := filepath.Glob("../configs/*.yaml")
	re := regexp.MustCompile(`(?m)^\s*shutdown_timeout:\s*"?([0-9a-z.]+)"?`)
	for _, f := range files {
		for _, m := range re.FindAllStringSubmatch(readFile(t, f), -1) {
			d, err := time.ParseDuration(m[1])
			if err != nil {
				t.Errorf("%s: shutdown_timeout %q: %v", f, m[1], err)
				continue
			}
			if d > max {
				max = d
			}
		}
	}
	return max
}

func TestUnitInvariants(t *testing.T) {
	limit := shutdownTimeout(t)
	secretish := regexp.MustCompile(`(?i)password|passwd|token|secret|dsn|_key\b|credential`)
	for _, name := range []string{"systemd/delayq.service", "systemd/delayq-worker@.service"} {
		t.Run(filepath.Base(name), func(t *testing.T) {
			u := parseUnit(t, name)
			want := func(key, value string) {
				t.Helper()
				if got := u.get("Service", key); got != value {
					t.Errorf("%s: %s=%q, want %q", name, key, got, value)
				}
			}
			switch typ := u.get("Service", "Type"); typ {
			case "simple", "notify", "exec":
			default:
				t.Errorf("%s: Type=%q, want simple (or notify/exec)", name, typ)
			}
			want("Restart", "always")
			if d, err := parseTimespan(u.get("Service", "RestartSec")); err != nil || d != 3*time.Second {
				t.Errorf("%s: RestartSec=%q (%v, %v), want 3s", name, u.get("Service", "RestartSec"), d, err)
			}
			want("KillSignal", "SIGTERM")
			stop, err := parseTimespan(u.get("Service", "TimeoutStopSec"))
			if err != nil {
				t.Errorf("%s: TimeoutStopSec: %v", name, err)
			} else if stop < limit+stopMargin {
				t.Errorf("%s: TimeoutStopSec=%v, want at least the shutdown timeout %v + %v", name, stop, limit, stopMargin)
			}
			if km := u.get("Service", "KillMode"); km == "none" || km == "process" {
				t.Errorf("%s: KillMode=%s leaves processes behind", name, km)
			}
			// A start-rate limit would turn Restart=always into "until the
			// fifth failure".
			if v := u.get("Unit", "StartLimitIntervalSec"); v != "0" && u.get("Unit", "StartLimitBurst") == "" {
				t.Errorf("%s: StartLimitIntervalSec=%q: set it to 0 so that Restart=always never gives up", name, v)
			}

			if user := u.get("Service", "User"); user == "" || user == "root" || user == "0" {
				t.Errorf("%s: User=%q, want a dedicated user", name, user)
			}
			if u.get("Service", "DynamicUser") == "yes" {
				t.Errorf("%s: DynamicUser=yes: want the dedicated delayq user", name)
			}
			want("EnvironmentFile", envFile)
			for _, env := range u["Service"]["Environment"] {
				if secretish.MatchString(env) {
					t.Errorf("%s: Environment=%s looks like a secret: it belongs in %s", name, env, envFile)
				}
			}
			exe := strings.Fields(u.get("Service", "ExecStart"))
			sub := "serve"
			if strings.Contains(name, "@") {
				sub = "worker"
			}
			if len(exe) < 2 || exe[0] != binPath || exe[1] != sub || !strings.Contains(strings.Join(exe, " "), "--config "+configPath) {
				t.Errorf("%s: ExecStart=%q, want %s %s --config %s", name, strings.Join(exe, " "), binPath, sub, configPath)
			}

			want("NoNewPrivileges", "yes")
			want("ProtectSystem", "strict")
			want("ProtectHome", "yes")
			want("PrivateTmp", "yes")
			if n, err := strconv.Atoi(u.get("Service", "LimitNOFILE")); err != nil || n < 4096 {
				t.Errorf("%s: LimitNOFILE=%q, want a number of at least 4096", name, u.get("Service", "LimitNOFILE"))
			}
			if v, ok := u["Service"]["CapabilityBoundingSet"]; !ok || v[len(v)-1] != "" {
				t.Errorf("%s: CapabilityBoundingSet=%q, want empty (no capability)", name, v)
			}
			for _, rw := range u["Service"]["ReadWritePaths"] {
				for _, p := range strings.Fields(rw) {
					p = strings.TrimLeft(p, "-")
					if p != "/var/lib/delayq" && !strings.HasPrefix(p, "/var/lib/delayq/") && !strings.HasPrefix(p, "/run/delayq") {
						t.Errorf("%s: ReadWritePaths=%s: delayq needs no write access there", name, p)
					}
				}
			}
			if strings.Contains(name, "@") {
				if !strings.Contains(u.get("Service", "SyslogIdentifier"), "%i") {
					t.Errorf("%s: SyslogIdentifier should carry the instance (%%i)", name)
				}
				found := false
				for _, env := range u["Service"]["Environment"] {
					found = found || strings.Contains(env, "%i")
				}
				if !found {
					t.Errorf("%s: no Environment= carries the instance name (%%i)", name)
				}
			}
		})
	}

	// The worker template runs with the same settings as delayq.service,
	// but for what names the process.
	main := parseUnit(t, "systemd/delayq.service")
	tmpl := parseUnit(t, "systemd/delayq-worker@.service")
	differs := map[string]bool{"ExecStart": true, "SyslogIdentifier": true, "Environment": true}
	for key, v := range main["Service"] {
		if differs[key] {
			continue
		}
		if got := tmpl["Service"][key]; strings.Join(got, "\n") != strings.Join(v, "\n") {
			t.Errorf("delayq-worker@.service: %s=%q, delayq.service has %q: keep them in step", key, got, v)
		}
	}
}

// stubUnits copies the unit files into a temporary directory with the
// delayq binary's path replaced by an executable stub (verify checks that
// ExecStart's program exists), and returns the copies' paths.
func stubUnits(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	stub := filepath.Join(dir, "bin", "delayq")
	if err := os.MkdirAll(filepath.Dir(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stub, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range unitFiles {
		text := strings.ReplaceAll(readFile(t, f), binPath, stub)
		p := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

func run(t *testing.T, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestSystemdAnalyzeVerify(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian: apt-get install systemd): units not verified by systemd")
	}
	paths := stubUnits(t)
	out, err := run(t, "", os.Environ(), sa, append([]string{"verify"}, paths...)...)
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	// verify exits 0 on unknown keys and bad values ("ignoring"): any
	// line about our files fails the test; others (the host's own units)
	// are only logged.
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		ours := false
		for _, f := range unitFiles {
			b := strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))
			ours = ours || strings.Contains(line, b)
		}
		if ours {
			t.Errorf("systemd-analyze verify: %s", line)
		} else {
			t.Logf("systemd-analyze verify (not about delayq's units): %s", line)
		}
	}

	// The hardening: exposure 4.0 ("OK") at most; without the hardening
	// options a service rates about 9.6 ("UNSAFE").
	for _, p := range paths[:2] {
		out, err := run(t, "", os.Environ(), sa, "security", "--offline=true", "--threshold=40", "--no-pager", p)
		if strings.Contains(out, "unrecognized option") || strings.Contains(out, "Unknown command") {
			t.Logf("systemd-analyze security --offline not supported by this systemd: exposure not rated")
			break
		}
		last := out
		if i := strings.LastIndex(strings.TrimSpace(out), "\n"); i >= 0 {
			last = strings.TrimSpace(out)[i+1:]
		}
		if err != nil {
			t.Errorf("systemd-analyze security %s: %v\n%s", filepath.Base(p), err, out)
		} else {
			t.Logf("systemd-analyze security: %s", strings.TrimSpace(last))
		}
	}
}

func TestSysusers(t *testing.T) {
	text := readFile(t, "systemd/delayq.sysusers")
	u := parseUnit(t, "systemd/delayq.service")
	want := regexp.MustCompile(`(?m)^u\s+` + regexp.QuoteMeta(u.get("Service", "User")) + `\s`)
	if !want.MatchString(text) {
		t.Errorf("delayq.sysusers does not create the unit's User=%s", u.get("Service", "User"))
	}
	sysusers, err := exec.LookPath("systemd-sysusers")
	if err != nil {
		t.Skip("systemd-sysusers is not installed: sysusers file only read")
	}
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("systemd/delayq.sysusers")
	out, err := run(t, "", os.Environ(), sysusers, "--root="+root, "--dry-run", abs)
	if strings.Contains(out, "unrecognized option") {
		t.Skipf("systemd-sysusers has no --dry-run here: %s", out)
	}
	if err != nil || !strings.Contains(out, "delayq") {
		t.Errorf("systemd-sysusers --dry-run: %v\n%s", err, out)
	}
}

// ---------------------------------------------------------------------------
// redis.conf

type directive struct {
	line int
	key  string
	args string
}

// redisDirectives returns the directives of a redis.conf. With check set it
// fails the test for a directive without a comment above it (directives on
// consecutive lines, like the save points, share one).
func redisDirectives(t *testing.T, path string, check bool) []directive {
	t.Helper()
	var out []directive
	commented := false
	for n, line := range strings.Split(readFile(t, path), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
			commented = false
		case line[0] == '#':
			commented = true
		default:
			key, args, _ := strings.Cut(line, " ")
			if check && !commented {
				t.Errorf("%s:%d: %q has no comment saying why", path, n+1, line)
			}
			out = append(out, directive{n + 1, strings.ToLower(key), strings.TrimSpace(args)})
		}
	}
	return out
}

func TestRedisConfStatic(t *testing.T) {
	ds := redisDirectives(t, "redis/redis.conf", true)
	got := map[string]string{}
	for _, d := range ds {
		if prev, ok := got[d.key]; ok && d.key != "save" {
			t.Errorf("redis.conf:%d: %s set twice (%q, then %q)", d.line, d.key, prev, d.args)
		}
		got[d.key] = d.args
	}
	for key, want := range map[string]string{
		"appendonly":                  "yes",
		"appendfsync":                 "everysec",
		"maxmemory-policy":            "noeviction",
		"tcp-keepalive":               "60",
		"no-appendfsync-on-rewrite":   "no",
		"aof-use-rdb-preamble":        "yes",
		"protected-mode":              "yes",
		"daemonize":                   "no",
		"stop-writes-on-bgsave-error": "yes",
	} {
		if got[key] != want {
			t.Errorf("redis.conf: %s %q, want %q", key, got[key], want)
		}
	}
	if b := got["bind"]; b == "" || strings.Contains(b, "0.0.0.0") || strings.Contains(b, "*") {
		t.Errorf("redis.conf: bind %q: want loopback/private addresses, not all interfaces", b)
	}
	if _, ok := got["requirepass"]; ok {
		t.Errorf("redis.conf: requirepass set: the template must hold no password")
	}
	if !regexp.MustCompile(`(?m)^#\s*requirepass\b`).MatchString(readFile(t, "redis/redis.conf")) {
		t.Errorf("redis.conf: no requirepass placeholder comment")
	}
}

// respConn is the smallest Redis client: commands out, replies in.
type respConn struct {
	c net.Conn
	r *bufio.Reader
}

func (rc *respConn) do(args ...string) (any, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	_ = rc.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := rc.c.Write(b.Bytes()); err != nil {
		return nil, err
	}
	return rc.read()
}

func (rc *respConn) read() (any, error) {
	line, err := rc.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return nil, fmt.Errorf("redis: %s", line[1:])
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rc.r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		out := make([]any, 0, max(n, 0))
		for i := 0; i < n; i++ {
			v, err := rc.read()
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected reply %q", line)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// redisProc is a redis-server this test started; only it is ever signalled.
type redisProc struct {
	cmd  *exec.Cmd
	out  *testenv.SyncBuffer
	done chan struct{}
	port int
}

// stop sends SIGTERM to the server's pid, and SIGKILL if it has not exited
// after 15 s.
func (p *redisProc) stop(t *testing.T) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Errorf("redis-server (pid %d) ignored SIGTERM for 15s; killing it", p.cmd.Process.Pid)
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func startRedis(t *testing.T, redisServer, conf, dir string) *redisProc {
	t.Helper()
	env := []string{}
	for _, e := range os.Environ() {
		// "supervised auto" would talk to the systemd of a test run
		// started by systemd.
		if !strings.HasPrefix(e, "NOTIFY_SOCKET=") {
			env = append(env, e)
		}
	}
	for attempt := 1; attempt <= 3; attempt++ {
		if p := tryStartRedis(t, redisServer, conf, dir, env); p != nil {
			return p
		}
	}
	t.Fatal("redis-server: no free port in 3 attempts")
	return nil
}

// tryStartRedis starts redis-server on a free port and waits until it
// answers PING. It returns nil when another process took the port first.
func tryStartRedis(t *testing.T, redisServer, conf, dir string, env []string) *redisProc {
	t.Helper()
	port := freePort(t)
	// Only what must differ for a test: the port and the data directory.
	cmd := exec.Command(redisServer, conf, "--port", strconv.Itoa(port), "--dir", dir)
	cmd.Env = env
	out := &testenv.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	p := &redisProc{cmd: cmd, out: out, done: make(chan struct{}), port: port}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.stop(t) })
	exited := false
	testenv.WaitFor(testenv.Context(t), t, "redis-server to answer PING", func() bool {
		select {
		case <-p.done:
			exited = true
			return true
		default:
		}
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		rc := &respConn{c: c, r: bufio.NewReader(c)}
		v, err := rc.do("PING")
		return err == nil && v == "PONG"
	}, out.String)
	if !exited {
		return p
	}
	if strings.Contains(out.String(), "Address already in use") {
		t.Logf("port %d was taken; trying another", port)
		return nil
	}
	t.Fatalf("redis-server refused deployments/redis/redis.conf (%v):\n%s", cmd.ProcessState, out.String())
	return nil
}

func TestRedisServerAcceptsConf(t *testing.T) {
	redisServer, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (Debian: apt-get install redis-server): redis.conf not loaded by Redis")
	}
	conf, err := filepath.Abs("redis/redis.conf")
	if err != nil {
		t.Fatal(err)
	}
	// Redis changes into "dir" while it reads the file, before the
	// command line's --dir: on a machine without that directory, load a
	// copy whose dir line names the test's directory instead.
	dataDir := t.TempDir()
	for _, d := range redisDirectives(t, conf, false) {
		if d.key != "dir" {
			continue
		}
		if st, err := os.Stat(strings.Trim(d.args, `"`)); err != nil || !st.IsDir() {
			text := regexp.MustCompile(`(?m)^dir .*$`).ReplaceAllString(readFile(t, conf), "dir "+dataDir)
			conf = filepath.Join(t.TempDir(), "redis.conf")
			if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s does not exist here: loading a copy with dir %s", d.args, dataDir)
		}
	}

	p := startRedis(t, redisServer, conf, dataDir)
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", p.port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc := &respConn{c: c, r: bufio.NewReader(c)}
	configGet := func(key string) string {
		v, err := rc.do("CONFIG", "GET", key)
		if err != nil {
			t.Fatalf("CONFIG GET %s: %v", key, err)
		}
		pair, _ := v.([]any)
		if len(pair) != 2 {
			t.Fatalf("CONFIG GET %s: %v", key, v)
		}
		s, _ := pair[1].(string)
		return s
	}
	for key, want := range map[string]string{
		"appendonly":                  "yes",
		"appendfsync":                 "everysec",
		"maxmemory-policy":            "noeviction",
		"tcp-keepalive":               "60",
		"no-appendfsync-on-rewrite":   "no",
		"aof-use-rdb-preamble":        "yes",
		"aof-load-truncated":          "yes",
		"protected-mode":              "yes",
		"timeout":                     "0",
		"save":                        "3600 1 300 100 60 10000",
		"stop-writes-on-bgsave-error": "yes",
		"dir":                         dataDir,
	} {
		if got := configGet(key); got != want {
			t.Errorf("CONFIG GET %s = %q, want %q", key, got, want)
		}
	}

	// A write reaches the append-only file.
	if _, err := rc.do("SET", "dq:deployments-test", "1"); err != nil {
		t.Fatal(err)
	}
	info, err := rc.do("INFO", "persistence")
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := info.(string); !strings.Contains(s, "aof_enabled:1") {
		t.Errorf("INFO persistence: aof_enabled is not 1:\n%s", s)
	}
	testenv.WaitFor(testenv.Context(t), t, "an append-only file in "+dataDir, func() bool {
		// Redis 7: appendonlydir/ (multi-part AOF); 6.2: appendonly.aof.
		aof, _ := filepath.Glob(filepath.Join(dataDir, "appendonlydir", "*.aof"))
		if _, err := os.Stat(filepath.Join(dataDir, "appendonly.aof")); err == nil {
			aof = append(aof, "appendonly.aof")
		}
		return len(aof) > 0
	}, func() string {
		entries, _ := os.ReadDir(dataDir)
		return fmt.Sprint(entries)
	})
	p.stop(t)
	if st := p.cmd.ProcessState; st == nil || !st.Success() {
		t.Errorf("redis-server did not exit cleanly on SIGTERM (%v):\n%s", st, p.out.String())
	}
}

// ---------------------------------------------------------------------------
// docker-compose.yml and the DELAYQ_* variables

// composeCommand returns the compose client: the docker CLI plugin or the
// stand-alone docker-compose.
func composeCommand(t *testing.T) []string {
	t.Helper()
	if docker, err := exec.LookPath("docker"); err == nil {
		if out, err := run(t, "", os.Environ(), docker, "compose", "version"); err == nil {
			t.Logf("using docker compose: %s", strings.TrimSpace(out))
			return []string{docker, "compose"}
		}
	}
	if dc, err := exec.LookPath("docker-compose"); err == nil {
		out, _ := run(t, "", os.Environ(), dc, "version", "--short")
		t.Logf("using docker-compose %s", strings.TrimSpace(out))
		return []string{dc}
	}
	t.Skip("neither the docker compose plugin nor docker-compose is installed (Debian: apt-get install docker-compose): compose file not validated by compose")
	return nil
}

var composeSecrets = []string{"REDIS_PASSWORD", "MYSQL_PASSWORD", "MYSQL_ROOT_PASSWORD", "DELAYQ_HTTP_TOKEN"}

func TestComposeConfig(t *testing.T) {
	compose := composeCommand(t)
	env := []string{}
	for _, e := range os.Environ() {
		keep := true
		for _, s := range composeSecrets {
			keep = keep && !strings.HasPrefix(e, s+"=")
		}
		if keep {
			env = append(env, e)
		}
	}
	dir := t.TempDir()
	withSecrets := filepath.Join(dir, "secrets.env")
	var b strings.Builder
	for _, s := range composeSecrets {
		fmt.Fprintf(&b, "%s=test-%s\n", s, strings.ToLower(strings.ReplaceAll(s, "_", "-")))
	}
	if err := os.WriteFile(withSecrets, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.env")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	config := func(envFile string) (string, error) {
		args := append(compose[1:], "--env-file", envFile, "-f", "docker-compose.yml", "config")
		return run(t, ".", env, compose[0], args...)
	}

	out, err := config(withSecrets)
	if err != nil {
		t.Fatalf("compose config: %v\n%s", err, out)
	}
	for _, want := range []string{
		"service_healthy",
		"docker-entrypoint-initdb.d",
		filepath.Join("deployments", "mysql", "schema.sql"),
		filepath.Join("deployments", "redis", "redis.conf"),
		"/usr/local/etc/redis/redis.conf",
		"interpolateParams=true",
		"READ-COMMITTED",
		"test-mysql-password@tcp(mysql:3306)",
		"DELAYQ_HTTP_TOKEN: test-delayq-http-token",
		"127.0.0.1",
		"healthcheck.sh",
		"redis-cli ping",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("compose config output lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`stop_grace_period: "?(45s|4[5-9]|[5-9][0-9])`).MatchString(out) {
		t.Errorf("compose config: no stop_grace_period of 45s or more:\n%s", out)
	}

	// No default secrets: without them compose refuses.
	out, err = config(empty)
	if err == nil {
		t.Errorf("compose config without the secrets succeeded: a secret has a default\n%s", out)
	} else if !strings.Contains(out, "PASSWORD") && !strings.Contains(out, "TOKEN") {
		t.Errorf("compose config without the secrets failed, but not naming one: %v\n%s", err, out)
	}
}

func TestComposeStatic(t *testing.T) {
	text := readFile(t, "docker-compose.yml")
	limit := shutdownTimeout(t)
	re := regexp.MustCompile(`(?m)^\s*stop_grace_period:\s*"?([0-9a-z.]+)"?`)
	ms := re.FindAllStringSubmatch(text, -1)
	if len(ms) < 2 {
		t.Errorf("docker-compose.yml: want stop_grace_period on delayq and worker, found %d", len(ms))
	}
	for _, m := range ms {
		d, err := time.ParseDuration(m[1])
		if err != nil || d < limit+stopMargin {
			t.Errorf("docker-compose.yml: stop_grace_period %s (%v): want at least %v", m[1], err, limit+stopMargin)
		}
	}
	for _, f := range []string{"redis/redis.conf", "mysql/schema.sql"} {
		if !strings.Contains(text, "./"+f+":") {
			t.Errorf("docker-compose.yml does not mount ./%s", f)
		}
		if _, err := os.Stat(f); err != nil {
			t.Errorf("docker-compose.yml mounts %s: %v", f, err)
		}
	}
	// Secrets come from the environment, without defaults.
	for _, s := range composeSecrets {
		if !strings.Contains(text, "${"+s+":?") {
			t.Errorf("docker-compose.yml: ${%s:?...} not found: a secret must be required, not defaulted", s)
		}
	}
	if regexp.MustCompile(`\$\{[A-Z_]*(PASSWORD|TOKEN)[A-Z_]*:-`).MatchString(text) {
		t.Errorf("docker-compose.yml: a password or token has a default value")
	}
}

// configKeys reads the sections and their keys from configs/delayq.yaml
// (two-space indentation, as written there).
func configKeys(t *testing.T) map[string]map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../configs/delayq.yaml")
	if err != nil {
		t.Skipf("configs/delayq.yaml not readable (%v): DELAYQ_* variables not checked", err)
	}
	keys := map[string]map[string]bool{}
	section := ""
	top := regexp.MustCompile(`^([a-z_]+):`)
	second := regexp.MustCompile(`^  ([a-z_]+):`)
	for _, line := range strings.Split(string(b), "\n") {
		if m := top.FindStringSubmatch(line); m != nil {
			section = m[1]
			keys[section] = map[string]bool{}
		} else if m := second.FindStringSubmatch(line); m != nil && section != "" {
			keys[section][m[1]] = true
		}
	}
	return keys
}

// TestEnvVariablesAreConfigKeys: every DELAYQ_<SECTION>_<KEY> these files
// set or name is a key of configs/delayq.yaml (delayq refuses unknown ones
// at start).
func TestEnvVariablesAreConfigKeys(t *testing.T) {
	keys := configKeys(t)
	re := regexp.MustCompile(`\bDELAYQ_([A-Z]+)_([A-Z0-9_]+)\b`)
	files := []string{"docker-compose.yml", "Dockerfile", "README.md", "compose.env.example"}
	for _, f := range unitFiles {
		files = append(files, f)
	}
	for _, f := range files {
		for _, m := range re.FindAllStringSubmatch(readFile(t, f), -1) {
			section, key := strings.ToLower(m[1]), strings.ToLower(m[2])
			if section == "test" {
				continue // the test suite's own variables
			}
			if !keys[section][key] {
				t.Errorf("%s: %s is not a configuration key (%s.%s is not in configs/delayq.yaml)", f, m[0], section, key)
			}
		}
	}
}

// ---------------------------------------------------------------------------
// Dockerfile

func TestDockerfileStatic(t *testing.T) {
	text := readFile(t, "Dockerfile")
	froms := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(text, -1)
	if len(froms) < 2 {
		t.Fatalf("Dockerfile: %d FROM lines, want a multi-stage build", len(froms))
	}
	if !strings.HasPrefix(froms[0][1], "golang:") {
		t.Errorf("Dockerfile: build stage FROM %s, want golang", froms[0][1])
	}
	for _, want := range []string{"CGO_ENABLED=0", "./app/delayq", "COPY --from=build", "STOPSIGNAL SIGTERM", "-X main.version="} {
		if !strings.Contains(text, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	users := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindAllStringSubmatch(text, -1)
	if len(users) == 0 {
		t.Errorf("Dockerfile: no USER: the runtime image would run as root")
	} else if u := strings.Split(users[len(users)-1][1], ":")[0]; u == "root" || u == "0" {
		t.Errorf("Dockerfile: USER %s, want a non-root user", users[len(users)-1][1])
	}

	// The golang image is the Go of go.mod (major.minor).
	goMod := readFile(t, "../go.mod")
	m := regexp.MustCompile(`(?m)^go\s+([0-9]+\.[0-9]+)`).FindStringSubmatch(goMod)
	if m == nil {
		t.Fatal("go.mod: no go directive")
	}
	arg := regexp.MustCompile(`(?m)^ARG GO_VERSION=(\S+)`).FindStringSubmatch(text)
	if arg == nil || arg[1] != m[1] {
		t.Errorf("Dockerfile: ARG GO_VERSION=%v, want %s (go.mod's go directive)", arg, m[1])
	}

	ignore := readFile(t, "Dockerfile.dockerignore")
	for _, want := range []string{".git", "**/.env"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `$`).MatchString(ignore) {
			t.Errorf("Dockerfile.dockerignore does not exclude %s", want)
		}
	}
}

// TestStaticBuild builds ./app/delayq the way the Dockerfile does and checks
// that the binary needs no libc (it must run on distroless/static) and
// reports the version given with -X main.version.
func TestStaticBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: ./app/delayq not built")
	}
	if runtime.GOOS != "linux" {
		t.Skipf("GOOS=%s: the image's linux binary is not built here", runtime.GOOS)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goBin); err != nil {
			t.Skip("the go command is not on PATH: ./app/delayq not built")
		}
	}
	if mains, _ := filepath.Glob("../app/delayq/*.go"); len(mains) == 0 {
		t.Skip("./app/delayq has no Go files yet")
	}
	bin := filepath.Join(t.TempDir(), "delayq")
	const version = "v0.0.0-deployments-test"
	env := append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	out, err := run(t, "..", env, goBin, "build", "-trimpath", "-ldflags=-s -w -X main.version="+version, "-o", bin, "./app/delayq")
	if err != nil {
		// A compile error fails `go vet ./...` (make lint) already; this
		// test is about what the Dockerfile adds.
		t.Skipf("./app/delayq does not build (go vet reports it): %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the CGO_ENABLED=0 binary has an ELF interpreter: it is dynamically linked and would not run on distroless/static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the CGO_ENABLED=0 binary needs shared libraries %v", libs)
	}
	out, err = run(t, "", os.Environ(), bin, "version")
	if err != nil {
		t.Fatalf("delayq version: %v\n%s", err, out)
	}
	if !strings.Contains(out, version) {
		t.Errorf("delayq version printed %q, want it to contain %s (-X main.version)", out, version)
	}
}

// ---------------------------------------------------------------------------
// README

func TestReadmeNamesEveryFile(t *testing.T) {
	readme := readFile(t, "README.md")
	var missing []string
	err := filepath.Walk(".", func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() || path == "README.md" || path == ".env" {
			return nil
		}
		if !strings.Contains(readme, "`"+filepath.ToSlash(path)+"`") {
			missing = append(missing, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("README.md does not say what these files are for: %v", missing)
	}
	for _, want := range []string{
		"appendfsync everysec", "interpolateParams=true", "READ-COMMITTED",
		"transaction_isolation", "tx_isolation", "delayq-worker@", "/etc/delayq/delayq.env",
		"not claimed", "ledger",
	} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md does not mention %q", want)
		}
	}
}

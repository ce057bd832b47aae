package testenv

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Bounds on waiting for redis-server processes.
const (
	startTimeout   = 30 * time.Second // until a started server answers PING (AOF replay included)
	stopTimeout    = 30 * time.Second // until a SIGTERMed server exits
	killTimeout    = 10 * time.Second // until a SIGKILLed server exits
	clusterTimeout = 60 * time.Second // until a created cluster reports cluster_state:ok everywhere
	pollInterval   = 10 * time.Millisecond
	startAttempts  = 5 // fresh ports tried when another process took the chosen one
)

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{} // ports FreePort handed out in this process
)

// FreePort returns a free TCP port on 127.0.0.1. It never returns the same
// port twice in one test binary, so parallel tests do not race for one port.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freePort(false)
	if err != nil {
		t.Fatalf("testenv: FreePort: %v", err)
	}
	return port
}

// freePort finds a port that can be bound on 127.0.0.1 and that FreePort
// has not handed out before. With bus set, port+10000 (the Redis Cluster bus
// port of a node on port) must be free as well.
func freePort(bus bool) (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	var lastErr error
	for i := 0; i < 100; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			lastErr = err
			continue
		}
		port := l.Addr().(*net.TCPAddr).Port
		ok := !portsGiven[port]
		if ok && bus {
			ok = port+10000 <= 65535 && !portsGiven[port+10000] && canBind(port+10000)
		}
		_ = l.Close()
		if !ok {
			continue
		}
		portsGiven[port] = true
		if bus {
			portsGiven[port+10000] = true
		}
		return port, nil
	}
	if lastErr == nil {
		lastErr = errors.New("no unused port found in 100 tries")
	}
	return 0, lastErr
}

// canBind reports whether port can be listened on at 127.0.0.1 right now.
func canBind(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// RedisOptions configures a redis-server a test starts itself.
type RedisOptions struct {
	// AOF turns on the append-only file (appendonly yes).
	AOF bool
	// Fsync is the appendfsync policy when AOF is on: "always", "everysec"
	// (the default when empty) or "no".
	Fsync string
	// Cluster starts the node in cluster mode (cluster-enabled yes); it
	// serves nothing until it is part of a cluster (see StartCluster).
	Cluster bool
	// ClusterNodeTimeout is cluster-node-timeout: how long a master may
	// not answer before its replica is promoted. Default 5s.
	ClusterNodeTimeout time.Duration
	// Args are extra command-line arguments passed after the config file,
	// e.g. []string{"--maxmemory", "64mb"}.
	Args []string

	// TLS, if set, makes the server speak only TLS (port 0, tls-port on the
	// free port) with the PKI's server certificate. StartRedis then skips
	// the test when redis-server was built without TLS.
	TLS *PKI
	// ClientCerts, with TLS, makes the server demand a client certificate
	// signed by the PKI (tls-auth-clients yes); otherwise it asks for none.
	ClientCerts bool
	// Password, if set, is the server's requirepass.
	Password string
	// Users are ACL rules, one user each, written as "user" directives,
	// e.g. "app on >secret ~app:* &app:* +@all".
	Users []string
}

// RedisServer is a redis-server process a test started itself on a free
// loopback port. Its methods must be called from the test's goroutine (they
// may call t.Fatal).
type RedisServer struct {
	// Addr is the server's address, 127.0.0.1:<port>; it stays the same
	// across Restart.
	Addr string
	// Dir is the server's working directory, a t.TempDir() of its own: it
	// holds redis.conf, redis.log (stdout and stderr), the AOF and, in
	// cluster mode, nodes.conf.
	Dir string

	bin      string
	conf     string
	args     []string
	pki      *PKI   // set for a TLS-only server: clients use its ClientTLS
	password string // the server's requirepass, if any

	mu   sync.Mutex
	proc *testProc // the latest process; nil before the first start
}

// testProc is one run of a server process a test started itself, in a
// process group of its own (see sysProcAttr).
type testProc struct {
	cmd    *exec.Cmd
	logOff int64         // size of the log file when this run started
	done   chan struct{} // closed once the process has exited and been reaped
	err    error         // what Wait returned; read only after done is closed
}

// startProc starts bin with args in dir, its stdout and stderr appended to
// logFile, and reaps it when it exits.
func startProc(bin string, args []string, dir, logFile string) (*testProc, error) {
	logf, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	var logOff int64
	if fi, err := logf.Stat(); err == nil {
		logOff = fi.Size()
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	err = startCmd(cmd)
	_ = logf.Close() // the child holds its own copy
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p := &testProc{cmd: cmd, logOff: logOff, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has exited and been reaped.
func (p *testProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// redisServerBin returns the redis-server binary's path, or skips the test
// when it is not installed.
func redisServerBin(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skipf("testenv: redis-server is not installed (%v); scripts/test-services.sh installs it", err)
	}
	return bin
}

// StartRedis starts redis-server on a free 127.0.0.1 port in its own
// t.TempDir() directory, with no RDB snapshots (save "") and the AOF as opts
// say, waits (bounded) until it answers PING, and kills it (SIGKILL by pid,
// then reaps it) on cleanup. The server runs in a process group of its own,
// so signals sent to the test's group do not reach it.
//
// With opts.TLS it speaks only TLS and waits for a TLS PING (with the
// PKI's client certificate and opts.Password).
//
// It skips the test when the redis-server binary is not installed, or, with
// opts.TLS, was built without TLS.
func StartRedis(t testing.TB, opts RedisOptions) *RedisServer {
	t.Helper()
	bin := redisServerBin(t)
	fsync := opts.Fsync
	switch fsync {
	case "":
		fsync = "everysec"
	case "always", "everysec", "no":
	default:
		t.Fatalf("testenv: StartRedis: Fsync %q is not one of always, everysec, no", opts.Fsync)
	}
	if opts.TLS == nil && opts.ClientCerts || opts.TLS != nil && opts.Cluster {
		t.Fatal("testenv: StartRedis: ClientCerts needs TLS, and TLS does not go with Cluster")
	}

	s := &RedisServer{Dir: t.TempDir(), bin: bin, args: append([]string(nil), opts.Args...),
		pki: opts.TLS, password: opts.Password}
	s.conf = filepath.Join(s.Dir, "redis.conf")
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := s.proc.kill(syscall.SIGKILL, killTimeout); err != nil {
			t.Errorf("testenv: cleanup of redis-server %s: %v", s.Addr, err)
		}
		if t.Failed() {
			t.Logf("testenv: redis-server %s log (tail):\n%s", s.Addr, s.logTail())
		}
	})

	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		port, err := freePort(opts.Cluster)
		if err != nil {
			t.Fatalf("testenv: StartRedis: free port: %v", err)
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if err := s.writeConf(port, opts, fsync); err != nil {
			t.Fatalf("testenv: StartRedis: %v", err)
		}
		s.mu.Lock()
		lastErr = s.start()
		s.mu.Unlock()
		if lastErr == nil {
			return s
		}
		if log := s.logSince(s.proc); opts.TLS != nil && (strings.Contains(log, "Bad directive") &&
			strings.Contains(log, "'tls-port") || strings.Contains(log, "TLS") && strings.Contains(log, "not supported")) {
			t.Skipf("testenv: redis-server was built without TLS:\n%s", log)
		}
		if !errors.Is(lastErr, errAddrInUse) {
			break
		}
	}
	t.Fatalf("testenv: StartRedis: %v\nlog (tail):\n%s", lastErr, s.logTail())
	return nil
}

// writeConf writes the server's redis.conf.
func (s *RedisServer) writeConf(port int, opts RedisOptions, fsync string) error {
	yesno := map[bool]string{true: "yes", false: "no"}
	lines := []string{
		"port " + strconv.Itoa(port),
		"bind 127.0.0.1",
		"protected-mode no",
		"daemonize no",
		`logfile ""`,
		"dir " + strconv.Quote(s.Dir),
		`save ""`,
		"appendonly " + yesno[opts.AOF],
		"appendfsync " + fsync,
	}
	if p := opts.TLS; p != nil {
		lines[0] = "port 0" // TLS only: the free port is the TLS port
		lines = append(lines,
			"tls-port "+strconv.Itoa(port),
			"tls-cert-file "+strconv.Quote(p.ServerCertFile),
			"tls-key-file "+strconv.Quote(p.ServerKeyFile),
			"tls-ca-cert-file "+strconv.Quote(p.CAFile),
			"tls-auth-clients "+yesno[opts.ClientCerts],
		)
	}
	if opts.Password != "" {
		lines = append(lines, "requirepass "+strconv.Quote(opts.Password))
	}
	for _, u := range opts.Users {
		lines = append(lines, "user "+u)
	}
	if opts.Cluster {
		lines = append(lines,
			"cluster-enabled yes",
			"cluster-config-file nodes.conf",
			"cluster-node-timeout "+strconv.FormatInt(cmp.Or(opts.ClusterNodeTimeout, 5*time.Second).Milliseconds(), 10),
			// A replica's first sync starts at once, not 5 s later.
			"repl-diskless-sync-delay 0",
			// A replica cut from its master (CutReplication) is promoted
			// however long ago its link went down.
			"cluster-replica-validity-factor 0",
		)
	}
	return os.WriteFile(s.conf, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

// errAddrInUse means the chosen port was taken by another process.
var errAddrInUse = errors.New("port already in use")

// start starts a new process with the server's config and waits until it
// answers PING. s.mu is held.
func (s *RedisServer) start() error {
	p, err := startProc(s.bin, append([]string{s.conf}, s.args...), s.Dir, s.logFile())
	if err != nil {
		return err
	}
	s.proc = p
	if err := s.waitReady(p); err != nil {
		_ = p.kill(syscall.SIGKILL, killTimeout)
		return err
	}
	return nil
}

// waitReady polls until the process p answers PING at s.Addr (over TLS with
// the PKI's client configuration and with the password, if the server has
// them) and INFO shows it is p (not some other server that holds the port),
// or p exits, or startTimeout passes.
func (s *RedisServer) waitReady(p *testProc) error {
	o := s.clientOptions()
	o.MaxRetries, o.DialerRetries, o.PoolSize = -1, 1, 1
	o.DialTimeout, o.ReadTimeout = 500*time.Millisecond, 2*time.Second
	rdb := redis.NewClient(o)
	defer rdb.Close()
	pid := strconv.Itoa(p.cmd.Process.Pid)
	deadline := time.Now().Add(startTimeout)
	var lastErr error
	for {
		if p.exited() {
			if strings.Contains(s.logSince(p), "Address already in use") {
				return fmt.Errorf("redis-server on %s exited: %w", s.Addr, errAddrInUse)
			}
			return fmt.Errorf("redis-server on %s exited during start-up (%v)", s.Addr, p.err)
		}
		// Probe with a plain dial first: go-redis retries and logs every
		// refused dial, which would flood the test log while the server boots.
		var info string
		c, err := net.DialTimeout("tcp", s.Addr, 500*time.Millisecond)
		if err == nil {
			_ = c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			info, err = rdb.Info(ctx, "server").Result()
			cancel()
		}
		if err == nil {
			if strings.Contains(info, "\nprocess_id:"+pid+"\r") {
				return nil
			}
			err = errors.New("another redis-server answers on this port")
		}
		lastErr = err
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s (pid %s) did not answer within %v: %v", s.Addr, pid, startTimeout, lastErr)
		}
		time.Sleep(pollInterval)
	}
}

// kill sends sig to the process p (if any) and waits (at most timeout)
// until it has exited and been reaped; then it SIGKILLs what is left of its
// process group (a fork child such as an AOF rewrite).
func (p *testProc) kill(sig syscall.Signal, timeout time.Duration) error {
	if p == nil {
		return nil
	}
	pid := p.cmd.Process.Pid
	if !p.exited() {
		// os.Process.Signal uses a pidfd where it can, so it never hits a
		// reused pid.
		if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("signal %v to pid %d: %w", sig, pid, err)
		}
		select {
		case <-p.done:
		case <-time.After(timeout):
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			return fmt.Errorf("pid %d did not exit within %v of %v; killed", pid, timeout, sig)
		}
	}
	// The group's id is the leader's pid (Setpgid); ESRCH when it is empty.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	return nil
}

// Pid returns the process id of the server's latest process (which may have
// exited).
func (s *RedisServer) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// running reports whether the server's latest process has not exited.
func (s *RedisServer) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && !s.proc.exited()
}

// Kill sends SIGKILL to the server's pid and waits until it has exited: no
// shutdown, no final fsync. It does nothing when the server is not running.
func (s *RedisServer) Kill(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.proc.kill(syscall.SIGKILL, killTimeout); err != nil {
		t.Fatalf("testenv: Kill redis-server %s: %v", s.Addr, err)
	}
}

// Stop sends SIGTERM to the server's pid and waits (bounded) until it has
// exited: a clean shutdown, which fsyncs the AOF (and writes no RDB, since
// snapshots are off). It does nothing when the server is not running.
func (s *RedisServer) Stop(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.proc.kill(syscall.SIGTERM, stopTimeout); err != nil {
		t.Fatalf("testenv: Stop redis-server %s: %v", s.Addr, err)
	}
}

// Restart starts the server again on the same port and directory (so an
// AOF is replayed) and waits until it answers PING. A server still running
// is stopped first (SIGTERM); call Kill first to simulate a crash.
func (s *RedisServer) Restart(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.proc.kill(syscall.SIGTERM, stopTimeout); err != nil {
		t.Fatalf("testenv: Restart redis-server %s: stopping it: %v", s.Addr, err)
	}
	// Another process may grab the port in the moment it is free; there is
	// nowhere else to go, so try a few times.
	var err error
	for attempt := 0; attempt < startAttempts; attempt++ {
		if err = s.start(); err == nil || !errors.Is(err, errAddrInUse) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("testenv: Restart redis-server: %v\nlog (tail):\n%s", err, s.logTail())
	}
}

// Client returns a new client to the server (over TLS with the PKI's client
// configuration and with the password, if the server has them); it is
// closed on cleanup.
func (s *RedisServer) Client(t testing.TB) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(s.clientOptions())
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// clientOptions are the options of a client to the server.
func (s *RedisServer) clientOptions() *redis.Options {
	o := &redis.Options{Addr: s.Addr, Password: s.password}
	if s.pki != nil {
		o.TLSConfig = s.pki.ClientTLS()
	}
	return o
}

func (s *RedisServer) logFile() string { return filepath.Join(s.Dir, "redis.log") }

// logSince returns what redis.log holds since the process p (if any) started.
func (s *RedisServer) logSince(p *testProc) string {
	if p == nil {
		return ""
	}
	return readFrom(s.logFile(), p.logOff)
}

// logTail returns the last few KB of the server's redis.log.
func (s *RedisServer) logTail() string { return readFileTail(s.logFile()) }

// readFrom returns what the file at path holds past offset off.
func readFrom(path string, off int64) string {
	b, err := os.ReadFile(path)
	if err != nil || off > int64(len(b)) {
		return ""
	}
	return string(b[off:])
}

// readFileTail returns the last few KB of a log file.
func readFileTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	const max = 4096
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// StartCluster starts n (at least 3) redis-server nodes in cluster mode on
// free ports (each with its own directory, see StartRedis), joins them with
// `redis-cli --cluster create ... --cluster-replicas 0 --cluster-yes` (the
// slots spread evenly over n masters), waits until CLUSTER INFO reports
// cluster_state:ok, all 16384 slots and n known nodes on every node, and
// returns the nodes' addresses. The nodes are killed by pid on cleanup.
//
// It skips the test when redis-server (or redis-cli, which ships with it) is
// not installed.
func StartCluster(t testing.TB, n int) []string {
	t.Helper()
	return StartClusterReplicas(t, n, 0, RedisOptions{}).Addrs()
}

// Cluster is a Redis Cluster a test started (StartClusterReplicas).
type Cluster struct {
	// Nodes are its servers, masters first as created (then each master's
	// replicas); a failover changes which is which (MasterOf).
	Nodes []*RedisServer
}

// Addrs are the addresses of every node.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// StartClusterReplicas starts a cluster of masters (at least 3) with
// replicas replicas each, the nodes started with opts (Cluster set), like
// StartCluster, and waits until every node reports it ok.
func StartClusterReplicas(t testing.TB, masters, replicas int, opts RedisOptions) *Cluster {
	t.Helper()
	if masters < 3 {
		t.Fatalf("testenv: StartCluster: %d masters; a Redis Cluster needs at least 3", masters)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		if _, serr := exec.LookPath("redis-server"); serr != nil {
			t.Skipf("testenv: redis-server is not installed (%v); scripts/test-services.sh installs it", serr)
		}
		t.Skipf("testenv: redis-cli is not installed (%v); scripts/test-services.sh installs it", err)
	}
	opts.Cluster = true
	c := &Cluster{Nodes: make([]*RedisServer, masters*(1+replicas))}
	for i := range c.Nodes {
		c.Nodes[i] = StartRedis(t, opts)
	}

	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.SysProcAttr = sysProcAttr()
	var buf bytes.Buffer
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	err = startCmd(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	out := buf.Bytes()
	if err != nil {
		t.Fatalf("testenv: StartCluster: redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.waitOK(ctx); err != nil {
		t.Fatalf("testenv: StartCluster: %v; redis-cli said:\n%s", err, out)
	}
	return c
}

// WaitOK waits until every node still running reports cluster_state:ok
// with every slot assigned: after a master was killed, once its replica
// has been promoted.
func (c *Cluster) WaitOK(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	if err := c.waitOK(ctx); err != nil {
		t.Fatalf("testenv: Cluster.WaitOK: %v", err)
	}
}

func (c *Cluster) waitOK(ctx context.Context) error {
	var pending []string
	for {
		pending = pending[:0]
		for _, node := range c.Nodes {
			if node.running() && (!clusterReady(ctx, node.Addr, len(c.Nodes)) || !replicaSynced(ctx, node.Addr)) {
				pending = append(pending, node.Addr)
			}
		}
		if len(pending) == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("nodes %v did not report cluster_state:ok within %v", pending, clusterTimeout)
		}
		time.Sleep(pollInterval)
	}
}

// Describe returns CLUSTER NODES as each running node sees it, for a test's
// failure message.
func (c *Cluster) Describe() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var b strings.Builder
	for _, n := range c.Nodes {
		if !n.running() {
			fmt.Fprintf(&b, "%s: not running\n", n.Addr)
			continue
		}
		rdb := probeClient(n.Addr)
		out, err := rdb.ClusterNodes(ctx).Result()
		_ = rdb.Close()
		fmt.Fprintf(&b, "%s (%v):\n%s\n", n.Addr, err, out)
	}
	return b.String()
}

// ReplicaOf returns a replica of master (a node whose INFO replication
// names master's port), or fails the test.
func (c *Cluster) ReplicaOf(t testing.TB, master *RedisServer) *RedisServer {
	t.Helper()
	_, port, _ := net.SplitHostPort(master.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, n := range c.Nodes {
		if n == master || !n.running() {
			continue
		}
		rdb := probeClient(n.Addr)
		info, err := rdb.Info(ctx, "replication").Result()
		_ = rdb.Close()
		if p, _ := infoField(info, "master_port"); err == nil && p == port {
			return n
		}
	}
	t.Fatalf("testenv: Cluster.ReplicaOf(%s): no replica", master.Addr)
	return nil
}

// CutReplication cuts replica from its master as
// SentinelGroup.CutReplication does: what the master acknowledges from
// then on is lost if it dies. The cluster still promotes the replica after
// a kill within cluster-node-timeout × 10 (cluster-replica-validity-factor).
func (c *Cluster) CutReplication(t testing.TB, replica *RedisServer) {
	t.Helper()
	cutReplication(t, replica.Addr)
}

// MasterOf returns the node that serves slot as master, as the first
// running node that answers says (CLUSTER SHARDS is Redis 7's; CLUSTER
// SLOTS answers the same for every version).
func (c *Cluster) MasterOf(t testing.TB, slot int) *RedisServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	for _, node := range c.Nodes {
		if !node.running() {
			continue
		}
		rdb := probeClient(node.Addr)
		slots, err := rdb.ClusterSlots(ctx).Result()
		_ = rdb.Close()
		if err != nil {
			continue
		}
		for _, s := range slots {
			if slot >= s.Start && slot <= s.End && len(s.Nodes) > 0 {
				for _, cand := range c.Nodes {
					if cand.Addr == s.Nodes[0].Addr {
						return cand
					}
				}
			}
		}
	}
	t.Fatalf("testenv: Cluster.MasterOf(%d): no running node knows its master", slot)
	return nil
}

// replicaSynced reports whether the node at addr is a master, or a
// replica whose link to its master is up: one that has not finished its
// first sync has no data, and the cluster would never promote it.
func replicaSynced(ctx context.Context, addr string) bool {
	rdb := probeClient(addr)
	defer rdb.Close()
	info, err := rdb.Info(ctx, "replication").Result()
	if err != nil {
		return false
	}
	return strings.Contains(info, "role:master\r\n") || strings.Contains(info, "master_link_status:up\r\n")
}

// probeClient is a client of one connection to the node at addr that
// fails at once, for the probes of a test's servers; close it after use.
func probeClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, PoolSize: 1})
}

// clusterReady reports whether the node at addr says the cluster is ok,
// with every slot assigned and n nodes known.
func clusterReady(ctx context.Context, addr string, n int) bool {
	rdb := probeClient(addr)
	defer rdb.Close()
	info, err := rdb.ClusterInfo(ctx).Result()
	if err != nil {
		return false
	}
	return strings.Contains(info, "cluster_state:ok\r\n") &&
		strings.Contains(info, "cluster_slots_ok:16384\r\n") &&
		strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)+"\r\n")
}

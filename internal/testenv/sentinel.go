package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Bounds on waiting for a Sentinel group.
const (
	// sentinelReadyTimeout bounds the wait until every Sentinel knows the
	// primary, the replica and the two other Sentinels (hello messages go
	// out every 2 s).
	sentinelReadyTimeout = 60 * time.Second
	// replicaSyncTimeout bounds the wait until the replica's link is up and
	// it has applied what the primary wrote.
	replicaSyncTimeout = 60 * time.Second
)

// SentinelOptions configures StartSentinelGroup. Zero fields take the
// default written next to them.
type SentinelOptions struct {
	// MasterName is the name the Sentinels monitor the primary under.
	// Default "mymaster".
	MasterName string
	// DownAfter is the Sentinels' down-after-milliseconds: how long the
	// primary must not answer before it is taken for down. Default 1 s.
	DownAfter time.Duration
	// FailoverTimeout is the Sentinels' failover-timeout; a failover that
	// did not get a majority of votes is tried again after twice this.
	// Default 3 s.
	FailoverTimeout time.Duration
	// Fsync is the data nodes' appendfsync policy (their AOF is always on).
	// Default "everysec".
	Fsync string
	// Password, if set, is the Sentinels' requirepass (and their
	// sentinel-pass, so they still reach each other); the data nodes stay
	// without one. Default "".
	Password string
}

// SentinelGroup is a Redis primary, one replica of it and three Sentinels
// monitoring them, all processes the test started itself on free loopback
// ports, each in its own t.TempDir() directory, all killed by pid on
// cleanup. The data nodes run with the AOF on; the Sentinels are
// `redis-server <conf> --sentinel` (Sentinel rewrites its conf file, so it
// lives in the Sentinel's directory).
//
// A failover (the primary SIGKILLed with Primary.Kill, see WaitFailover)
// promotes Replica; Primary and Replica keep naming the processes as
// started, not their current roles. Restart starts a data node with its
// original arguments (the replica with --replicaof the first primary), so
// after a failover the Sentinels have to reconfigure a restarted node.
type SentinelGroup struct {
	// MasterName is the name the Sentinels know the primary by.
	MasterName string
	// Primary is the data node started as the master.
	Primary *RedisServer
	// Replica is the data node started as Primary's replica.
	Replica *RedisServer
	// Sentinels are the three Sentinel processes (quorum 2).
	Sentinels []*RedisServer

	opts SentinelOptions
}

// StartSentinelGroup starts a primary and its replica (AOF on, see
// StartRedis) and three Sentinels with a quorum of 2 and the short timings of
// opts, so a failover takes a few seconds. It returns once the replica's
// link is up and it caught up with the primary, and every Sentinel sees the
// primary as a master with one healthy replica and two other Sentinels.
//
// It skips the test when redis-server is not installed.
func StartSentinelGroup(t testing.TB, opts SentinelOptions) *SentinelGroup {
	t.Helper()
	bin := redisServerBin(t)
	if opts.MasterName == "" {
		opts.MasterName = "mymaster"
	}
	if opts.DownAfter == 0 {
		opts.DownAfter = time.Second
	}
	if opts.FailoverTimeout == 0 {
		opts.FailoverTimeout = 3 * time.Second
	}
	if opts.DownAfter < time.Millisecond || opts.FailoverTimeout < time.Millisecond {
		t.Fatalf("testenv: StartSentinelGroup: DownAfter %v and FailoverTimeout %v must be at least 1ms", opts.DownAfter, opts.FailoverTimeout)
	}
	if strings.ContainsAny(opts.MasterName, " \t\r\n\"'") {
		t.Fatalf("testenv: StartSentinelGroup: MasterName %q: no spaces or quotes", opts.MasterName)
	}

	// The primary would wait 5 s (repl-diskless-sync-delay) for more
	// replicas before the first full sync.
	dataArgs := []string{"--repl-diskless-sync-delay", "0"}
	g := &SentinelGroup{MasterName: opts.MasterName, opts: opts}
	g.Primary = StartRedis(t, RedisOptions{AOF: true, Fsync: opts.Fsync, Args: dataArgs})
	host, port, _ := net.SplitHostPort(g.Primary.Addr)
	g.Replica = StartRedis(t, RedisOptions{AOF: true, Fsync: opts.Fsync,
		Args: append(append([]string(nil), dataArgs...), "--replicaof", host, port)})
	g.WaitReplicated(t)

	for i := 0; i < 3; i++ {
		g.Sentinels = append(g.Sentinels, startSentinel(t, bin, opts, g.Primary.Addr))
	}
	ctx, cancel := context.WithTimeout(context.Background(), sentinelReadyTimeout)
	defer cancel()
	var lastErr error
	for {
		lastErr = nil
		for _, s := range g.Sentinels {
			if err := g.sentinelReady(ctx, s.Addr); err != nil {
				lastErr = fmt.Errorf("sentinel %s: %w", s.Addr, err)
				break
			}
		}
		if lastErr == nil {
			return g
		}
		if ctx.Err() != nil {
			t.Fatalf("testenv: StartSentinelGroup: not ready within %v: %v", sentinelReadyTimeout, lastErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startSentinel starts one Sentinel monitoring masterAddr and waits until it
// answers; it is killed by pid on cleanup.
func startSentinel(t testing.TB, bin string, opts SentinelOptions, masterAddr string) *RedisServer {
	t.Helper()
	s := &RedisServer{Dir: t.TempDir(), bin: bin, args: []string{"--sentinel"}, password: opts.Password}
	s.conf = filepath.Join(s.Dir, "sentinel.conf")
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := s.proc.kill(syscall.SIGKILL, killTimeout); err != nil {
			t.Errorf("testenv: cleanup of sentinel %s: %v", s.Addr, err)
		}
		if t.Failed() {
			t.Logf("testenv: sentinel %s log (tail):\n%s", s.Addr, s.logTail())
		}
	})
	mhost, mport, _ := net.SplitHostPort(masterAddr)
	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		port, err := freePort(false)
		if err != nil {
			t.Fatalf("testenv: start sentinel: free port: %v", err)
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		name := opts.MasterName
		lines := []string{
			"port " + strconv.Itoa(port),
			"bind 127.0.0.1",
			"protected-mode no",
			"daemonize no",
			`logfile ""`,
			"dir " + strconv.Quote(s.Dir),
			fmt.Sprintf("sentinel monitor %s %s %s 2", name, mhost, mport),
			fmt.Sprintf("sentinel down-after-milliseconds %s %d", name, opts.DownAfter.Milliseconds()),
			fmt.Sprintf("sentinel failover-timeout %s %d", name, opts.FailoverTimeout.Milliseconds()),
			fmt.Sprintf("sentinel parallel-syncs %s 1", name),
		}
		if opts.Password != "" {
			lines = append(lines, "requirepass "+opts.Password, "sentinel sentinel-pass "+opts.Password)
		}
		if err := os.WriteFile(s.conf, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatalf("testenv: start sentinel: %v", err)
		}
		s.mu.Lock()
		lastErr = s.start()
		s.mu.Unlock()
		if lastErr == nil {
			return s
		}
		if !errors.Is(lastErr, errAddrInUse) {
			break
		}
	}
	t.Fatalf("testenv: start sentinel: %v\nlog (tail):\n%s", lastErr, s.logTail())
	return nil
}

// sentinelReady checks that the Sentinel at addr sees the primary as a
// master with one healthy replica and two other Sentinels.
func (g *SentinelGroup) sentinelReady(ctx context.Context, addr string) error {
	sc := redis.NewSentinelClient(&redis.Options{Addr: addr, Password: g.opts.Password, MaxRetries: -1, DialerRetries: 1, PoolSize: 1})
	defer sc.Close()
	m, err := sc.Master(ctx, g.MasterName).Result()
	if err != nil {
		return err
	}
	if a := net.JoinHostPort(m["ip"], m["port"]); a != g.Primary.Addr || m["flags"] != "master" {
		return fmt.Errorf("master %s with flags %q, want %s with flags master", a, m["flags"], g.Primary.Addr)
	}
	if m["num-other-sentinels"] != "2" || m["num-slaves"] != "1" {
		return fmt.Errorf("knows %s other sentinels and %s replicas, want 2 and 1", m["num-other-sentinels"], m["num-slaves"])
	}
	reps, err := sc.Replicas(ctx, g.MasterName).Result()
	if err != nil {
		return err
	}
	if len(reps) != 1 {
		return fmt.Errorf("%d replicas listed, want 1", len(reps))
	}
	r := reps[0]
	if a := net.JoinHostPort(r["ip"], r["port"]); a != g.Replica.Addr || r["flags"] != "slave" || r["master-link-status"] != "ok" {
		return fmt.Errorf("replica %s flags %q link %q, want %s flags slave link ok", a, r["flags"], r["master-link-status"], g.Replica.Addr)
	}
	return nil
}

// SentinelAddrs returns the Sentinels' addresses, for
// redis.FailoverOptions.SentinelAddrs.
func (g *SentinelGroup) SentinelAddrs() []string {
	addrs := make([]string, len(g.Sentinels))
	for i, s := range g.Sentinels {
		addrs[i] = s.Addr
	}
	return addrs
}

// infoField returns the value of field in an INFO reply, and whether it is
// there.
func infoField(info, field string) (string, bool) {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), field+":"); ok {
			return v, true
		}
	}
	return "", false
}

// replication returns the INFO replication section of the node at addr.
func replication(ctx context.Context, addr string) (string, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, PoolSize: 1})
	defer rdb.Close()
	return rdb.Info(ctx, "replication").Result()
}

// WaitReplicated waits (bounded) until the replica's link to the primary is
// up and it has applied everything the primary had written when
// WaitReplicated was called (its slave_repl_offset reached the primary's
// master_repl_offset). Writes acknowledged before the call then survive a
// failover.
func (g *SentinelGroup) WaitReplicated(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), replicaSyncTimeout)
	defer cancel()
	info, err := replication(ctx, g.Primary.Addr)
	if err != nil {
		t.Fatalf("testenv: WaitReplicated: INFO replication of the primary %s: %v", g.Primary.Addr, err)
	}
	v, _ := infoField(info, "master_repl_offset")
	want, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("testenv: WaitReplicated: primary's master_repl_offset %q: %v", v, err)
	}
	var last string
	for {
		info, err := replication(ctx, g.Replica.Addr)
		if err == nil {
			link, _ := infoField(info, "master_link_status")
			v, _ := infoField(info, "slave_repl_offset")
			got, _ := strconv.ParseInt(v, 10, 64)
			if link == "up" && got >= want {
				return
			}
			last = fmt.Sprintf("master_link_status:%s slave_repl_offset:%d, want up and %d", link, got, want)
		} else {
			last = err.Error()
		}
		if ctx.Err() != nil {
			t.Fatalf("testenv: WaitReplicated: replica %s not caught up within %v: %s", g.Replica.Addr, replicaSyncTimeout, last)
		}
		time.Sleep(pollInterval)
	}
}

// CutReplication stops the replica from applying the primary's writes, as a
// replication link that lags or broke would, without telling the Sentinels
// anything (both nodes stay up and answer them): it gives the replica a
// master user and password the primary does not know and drops its link, so
// each reconnect fails at AUTH. Everything the primary acknowledges from
// then on is missing from the replica, and is lost if the primary dies
// before ResumeReplication. It returns once the replica reports its link
// down.
//
// Sentinel promotes a replica whose link has been down for up to ten times
// DownAfter (plus the primary's down time), so a failover soon after still
// picks it.
func (g *SentinelGroup) CutReplication(t testing.TB) {
	t.Helper()
	cutReplication(t, g.Replica.Addr)
}

// cutReplication cuts the replica at addr from its primary: see
// SentinelGroup.CutReplication.
func cutReplication(t testing.TB, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), replicaSyncTimeout)
	defer cancel()
	rdb := probeClient(addr)
	defer rdb.Close()
	bogus := "cut-" + randomHex(t, 8)
	if err := rdb.ConfigSet(ctx, "masteruser", bogus).Err(); err != nil {
		t.Fatalf("testenv: CutReplication: CONFIG SET masteruser on %s: %v", addr, err)
	}
	if err := rdb.ConfigSet(ctx, "masterauth", bogus).Err(); err != nil {
		t.Fatalf("testenv: CutReplication: CONFIG SET masterauth on %s: %v", addr, err)
	}
	if err := rdb.ClientKillByFilter(ctx, "TYPE", "master").Err(); err != nil {
		t.Fatalf("testenv: CutReplication: CLIENT KILL TYPE master on %s: %v", addr, err)
	}
	for {
		info, err := rdb.Info(ctx, "replication").Result()
		if err == nil {
			if link, _ := infoField(info, "master_link_status"); link == "down" {
				return
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("testenv: CutReplication: replica %s still reports its link up (%v)", addr, err)
		}
		time.Sleep(pollInterval)
	}
}

// ResumeReplication undoes CutReplication: the replica authenticates as
// before (no user, no password) and reconnects by itself within a second
// (a partial resync). It does not wait for that; see WaitReplicated.
func (g *SentinelGroup) ResumeReplication(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), replicaSyncTimeout)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: g.Replica.Addr, MaxRetries: -1, PoolSize: 1})
	defer rdb.Close()
	for _, key := range []string{"masteruser", "masterauth"} {
		if err := rdb.ConfigSet(ctx, key, "").Err(); err != nil {
			t.Fatalf("testenv: ResumeReplication: CONFIG SET %s on %s: %v", key, g.Replica.Addr, err)
		}
	}
}

// MasterAddrs returns the master address each Sentinel reports for the
// group (SENTINEL GET-MASTER-ADDR-BY-NAME), in Sentinels order; an entry is
// "" when that Sentinel did not answer.
func (g *SentinelGroup) MasterAddrs(ctx context.Context) []string {
	out := make([]string, len(g.Sentinels))
	for i, s := range g.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, Password: g.opts.Password, MaxRetries: -1, DialerRetries: 1, PoolSize: 1})
		hp, err := sc.GetMasterAddrByName(ctx, g.MasterName).Result()
		_ = sc.Close()
		if err == nil && len(hp) == 2 {
			out[i] = net.JoinHostPort(hp[0], hp[1])
		}
	}
	return out
}

// WaitFailover waits, at most limit, until every Sentinel names the replica
// as the master and the replica itself reports role:master, and returns
// the replica. Call it after killing the primary (Primary.Kill).
func (g *SentinelGroup) WaitFailover(t testing.TB, limit time.Duration) *RedisServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var last string
	for {
		addrs := g.MasterAddrs(ctx)
		agreed := true
		for _, a := range addrs {
			agreed = agreed && a == g.Replica.Addr
		}
		last = fmt.Sprintf("sentinels name %v", addrs)
		if agreed {
			info, err := replication(ctx, g.Replica.Addr)
			role, _ := infoField(info, "role")
			if err == nil && role == "master" {
				return g.Replica
			}
			last += fmt.Sprintf("; the replica says role:%s (%v)", role, err)
		}
		if ctx.Err() != nil {
			t.Fatalf("testenv: WaitFailover: no failover to %s within %v: %s", g.Replica.Addr, limit, last)
		}
		time.Sleep(pollInterval)
	}
}

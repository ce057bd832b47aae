package testenv

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
)

var nsPattern = regexp.MustCompile(`^t[A-Za-z0-9_]+_[0-9a-f]{8}$`)

func TestSanitizeName(t *testing.T) {
	for in, want := range map[string]string{
		"TestFoo":                         "TestFoo",
		"TestFoo/sub case#01":             "TestFoo_sub_case_01",
		"TestX/{T}:due--é":                "TestX_T_due",
		strings.Repeat("a", 100):          strings.Repeat("a", maxNameLen),
		"Test/" + strings.Repeat("-", 50): "Test",
	} {
		if got := sanitizeName(in); got != want {
			t.Errorf("sanitizeName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRedisNamespaceIsolationAndCleanup(t *testing.T) {
	ctx := context.Background()
	outer, outerNS := Redis(t)

	// A key that merely shares the inner namespace's characters as a prefix,
	// without the ":" separator, must survive the inner cleanup.
	var innerNS string
	t.Run("inner/with odd:name", func(t *testing.T) {
		rdb, ns := Redis(t)
		innerNS = ns
		if !nsPattern.MatchString(ns) {
			t.Fatalf("namespace %q does not match %v", ns, nsPattern)
		}
		if ns == outerNS {
			t.Fatalf("inner and outer namespace are both %q", ns)
		}
		// More keys than one SCAN/UNLINK batch, of several types, with hash tags.
		pipe := rdb.Pipeline()
		for i := 0; i < 3*deleteBatch+7; i++ {
			pipe.Set(ctx, fmt.Sprintf("%s:{topic%d}:k", ns, i), "v", 0)
		}
		pipe.ZAdd(ctx, ns+":{T}:due", redis.Z{Score: 1, Member: "job"})
		pipe.HSet(ctx, ns+":{T}:job", "job", "{}")
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if err := outer.Set(ctx, ns+"x:survivor", "1", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if n := countKeys(t, outer, ns+":*"); n != 3*deleteBatch+9 {
			t.Fatalf("wrote %d keys in the namespace, want %d", n, 3*deleteBatch+9)
		}
	})
	if n := countKeys(t, outer, innerNS+":*"); n != 0 {
		t.Fatalf("%d keys of namespace %q left after its test's cleanup", n, innerNS)
	}
	if n, err := outer.Exists(ctx, innerNS+"x:survivor").Result(); err != nil || n != 1 {
		t.Fatalf("key outside the namespace was deleted by its cleanup (exists=%d, err=%v)", n, err)
	}
	outer.Del(ctx, innerNS+"x:survivor")
}

// countKeys counts the keys matching pattern.
func countKeys(t *testing.T, rdb redis.UniversalClient, pattern string) int {
	t.Helper()
	n := 0
	iter := rdb.Scan(context.Background(), 0, pattern, 1000).Iterator()
	for iter.Next(context.Background()) {
		n++
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRedisNamespacesAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 20; i++ {
		_, ns := Redis(t)
		if seen[ns] {
			t.Fatalf("namespace %q handed out twice", ns)
		}
		seen[ns] = true
	}
}

func TestRedisFailsWhenUnreachable(t *testing.T) {
	t.Setenv(EnvRedisAddr, RefusedAddr(t))
	ft := &fatalRecorder{TB: t}
	runCatchingFatal(ft, func() { Redis(ft) })
	if !ft.fatal || !strings.Contains(ft.msg, "does not answer") || !strings.Contains(ft.msg, EnvRedisAddr) {
		t.Fatalf("Redis on a closed port: fatal=%v msg=%q; want a Fatal naming %s", ft.fatal, ft.msg, EnvRedisAddr)
	}
}

func TestMySQLDSNFailsWhenUnreachable(t *testing.T) {
	t.Setenv(EnvMySQLAddr, RefusedAddr(t))
	ft := &fatalRecorder{TB: t}
	runCatchingFatal(ft, func() { MySQLDSN(ft) })
	if !ft.fatal || !strings.Contains(ft.msg, "does not answer") {
		t.Fatalf("MySQLDSN on a closed port: fatal=%v msg=%q; want a Fatal", ft.fatal, ft.msg)
	}
}

// fatalRecorder records a Fatal/Skip instead of ending the test.
type fatalRecorder struct {
	testing.TB
	fatal, skip bool
	msg         string
}

type stopNow struct{}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.fatal, f.msg = true, fmt.Sprintf(format, args...)
	panic(stopNow{})
}
func (f *fatalRecorder) Fatal(args ...any) {
	f.fatal, f.msg = true, fmt.Sprint(args...)
	panic(stopNow{})
}
func (f *fatalRecorder) Skipf(format string, args ...any) {
	f.skip, f.msg = true, fmt.Sprintf(format, args...)
	panic(stopNow{})
}

func runCatchingFatal(_ *fatalRecorder, fn func()) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(stopNow); !ok {
				panic(r)
			}
		}
	}()
	fn()
}

func TestMiniRedis(t *testing.T) {
	ctx := context.Background()
	var addr string
	t.Run("use", func(t *testing.T) {
		rdb, ns := MiniRedis(t)
		if !nsPattern.MatchString(ns) {
			t.Fatalf("namespace %q does not match %v", ns, nsPattern)
		}
		if err := rdb.Set(ctx, ns+":k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if got, err := rdb.Get(ctx, ns+":k").Result(); err != nil || got != "v" {
			t.Fatalf("GET = %q, %v", got, err)
		}
		addr = rdb.(*redis.Client).Options().Addr
	})
	// The server stopped on cleanup: nothing listens on its address.
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("miniredis at %s still accepts connections after cleanup", addr)
	}
}

func TestMySQLDSNOwnDatabaseDroppedOnCleanup(t *testing.T) {
	ctx := context.Background()
	_, adminDSN := mysqlServer()
	admin, err := sql.Open("mysql", adminDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	var name string
	t.Run("own", func(t *testing.T) {
		dsn := MySQLDSN(t)
		for _, p := range []string{"parseTime=true", "loc=UTC", "multiStatements=true"} {
			if !strings.Contains(dsn, p) {
				t.Errorf("DSN %q lacks %s", dsn, p)
			}
		}
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&name); err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`^dqt_[0-9a-f]{16}$`).MatchString(name) {
			t.Fatalf("database name %q, want dqt_ + 16 hex digits", name)
		}
		if !schemaExists(t, admin, name) {
			t.Fatalf("database %s does not exist", name)
		}
		// multiStatements and parseTime work.
		if _, err := db.ExecContext(ctx, "CREATE TABLE x (id INT PRIMARY KEY, at DATETIME(3)); INSERT INTO x VALUES (1, '2024-01-02 03:04:05.678')"); err != nil {
			t.Fatal(err)
		}
		var at time.Time
		if err := db.QueryRowContext(ctx, "SELECT at FROM x WHERE id = 1").Scan(&at); err != nil {
			t.Fatal(err)
		}
		if want := time.Date(2024, 1, 2, 3, 4, 5, 678e6, time.UTC); !at.Equal(want) || at.Location() != time.UTC {
			t.Fatalf("at = %v, want %v in UTC", at, want)
		}
	})
	if schemaExists(t, admin, name) {
		t.Fatalf("database %s still exists after its test's cleanup", name)
	}
}

func schemaExists(t *testing.T, db *sql.DB, name string) bool {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

type row struct {
	ID   uint `gorm:"primaryKey"`
	Name string
}

func TestMySQLGorm(t *testing.T) {
	db := MySQL(t)
	if err := db.AutoMigrate(&row{}); err != nil {
		t.Fatal(err)
	}
	if err := db.Create(&row{Name: "a"}).Error; err != nil {
		t.Fatal(err)
	}
	var got row
	if err := db.First(&got).Error; err != nil || got.Name != "a" {
		t.Fatalf("First = %+v, %v", got, err)
	}
}

func TestSQLiteConcurrentWriters(t *testing.T) {
	db := SQLite(t)
	var mode string
	if err := db.Raw("PRAGMA journal_mode").Scan(&mode).Error; err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	if err := db.AutoMigrate(&row{}); err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				// A read then a write in one transaction: the pattern that
				// fails with SQLITE_BUSY under deferred transactions.
				errs <- db.Transaction(func(tx *gorm.DB) error {
					var n int64
					if err := tx.Model(&row{}).Count(&n).Error; err != nil {
						return err
					}
					return tx.Create(&row{Name: fmt.Sprint(n)}).Error
				})
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var n int64
	if err := db.Model(&row{}).Count(&n).Error; err != nil || n != writers*each {
		t.Fatalf("count = %d, %v; want %d", n, err, writers*each)
	}
}

func TestFreePort(t *testing.T) {
	seen := map[int]bool{}
	for i := 0; i < 20; i++ {
		p := FreePort(t)
		if seen[p] {
			t.Fatalf("FreePort returned %d twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("FreePort gave %d, which cannot be bound: %v", p, err)
		}
		l.Close()
	}
}

// alive reports whether a process with this pid exists (and is not a zombie
// we failed to reap).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return !errors.Is(err, syscall.ESRCH)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !os.IsNotExist(err)
	}
	fields := strings.Fields(string(b))
	return len(fields) < 3 || fields[2] != "Z"
}

func TestStartRedisAOFSurvivesKill(t *testing.T) {
	ctx := context.Background()
	s := StartRedis(t, RedisOptions{AOF: true, Fsync: "always"})
	rdb := s.Client(t)
	if err := rdb.Set(ctx, "k", "kept", 0).Err(); err != nil {
		t.Fatal(err)
	}
	pid := s.Pid()
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		t.Fatalf("redis-server pid %d is in process group %d (%v), want its own", pid, pgid, err)
	}

	s.Kill(t)
	if alive(pid) {
		t.Fatalf("pid %d still alive (or unreaped) after Kill", pid)
	}
	if c, err := net.DialTimeout("tcp", s.Addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections after Kill", s.Addr)
	}

	s.Restart(t)
	if s.Pid() == pid {
		t.Fatalf("Restart kept pid %d", pid)
	}
	if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "kept" {
		t.Fatalf("after kill + restart with appendfsync always: GET k = %q, %v; want kept", got, err)
	}
	if addr := rdb.Options().Addr; addr != s.Addr {
		t.Fatalf("client address %s, server %s", addr, s.Addr)
	}
}

func TestStartRedisWithoutPersistenceLosesData(t *testing.T) {
	ctx := context.Background()
	s := StartRedis(t, RedisOptions{})
	rdb := s.Client(t)
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	pid := s.Pid()
	s.Stop(t) // a clean shutdown: with save "" it writes no RDB
	if alive(pid) {
		t.Fatalf("pid %d still alive after Stop", pid)
	}
	s.Restart(t)
	if n, err := rdb.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("DBSIZE after restart without persistence = %d, %v; want 0", n, err)
	}
	if _, err := os.Stat(s.Dir + "/dump.rdb"); !os.IsNotExist(err) {
		t.Fatalf("dump.rdb exists (or stat failed: %v) though snapshots are off", err)
	}
}

func TestStartRedisRestartWhileRunning(t *testing.T) {
	s := StartRedis(t, RedisOptions{AOF: true})
	rdb := s.Client(t)
	ctx := context.Background()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	pid := s.Pid()
	s.Restart(t) // stops it (SIGTERM, which fsyncs the AOF) and starts it again
	if alive(pid) {
		t.Fatalf("old pid %d alive after Restart", pid)
	}
	if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET k = %q, %v after restart with AOF everysec and a clean stop", got, err)
	}
}

func TestStartRedisCleanupKills(t *testing.T) {
	var pid int
	t.Run("start", func(t *testing.T) {
		pid = StartRedis(t, RedisOptions{}).Pid()
		if !alive(pid) {
			t.Fatalf("pid %d not alive", pid)
		}
	})
	if alive(pid) {
		t.Fatalf("pid %d still alive after its test's cleanup", pid)
	}
}

func TestStartRedisBadOptionFails(t *testing.T) {
	ft := &fatalRecorder{TB: t}
	runCatchingFatal(ft, func() { StartRedis(ft, RedisOptions{Args: []string{"--no-such-option", "1"}}) })
	if ft.skip {
		t.Skip(ft.msg)
	}
	if !ft.fatal || !strings.Contains(ft.msg, "exited during start-up") {
		t.Fatalf("fatal=%v msg=%q; want a Fatal saying the server exited", ft.fatal, ft.msg)
	}
}

func TestStartCluster(t *testing.T) {
	start := time.Now()
	addrs := StartCluster(t, 3)
	t.Logf("3-node cluster ready in %v", time.Since(start).Round(time.Millisecond))
	if len(addrs) != 3 {
		t.Fatalf("got %d addresses, want 3", len(addrs))
	}
	ctx := context.Background()
	for _, a := range addrs {
		rdb := redis.NewClient(&redis.Options{Addr: a})
		info, err := rdb.ClusterInfo(ctx).Result()
		rdb.Close()
		if err != nil || !strings.Contains(info, "cluster_state:ok") {
			t.Fatalf("CLUSTER INFO on %s: %v\n%s", a, err, info)
		}
	}

	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer cc.Close()
	const keys = 200
	for i := 0; i < keys; i++ {
		if err := cc.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err(); err != nil {
			t.Fatalf("SET through the cluster client: %v", err)
		}
	}
	for i := 0; i < keys; i++ {
		if got, err := cc.Get(ctx, fmt.Sprintf("k%d", i)).Int(); err != nil || got != i {
			t.Fatalf("GET k%d = %d, %v", i, got, err)
		}
	}
	// Keys with one hash tag live on one node; a multi-key command works.
	if err := cc.MSet(ctx, "dq:{T}:a", "1", "dq:{T}:b", "2").Err(); err != nil {
		t.Fatalf("MSET with one hash tag: %v", err)
	}
	// The keys are spread over every master.
	var mu sync.Mutex
	sizes := map[string]int64{}
	err := cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		n, err := node.DBSize(ctx).Result()
		mu.Lock()
		sizes[node.Options().Addr] = n
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sizes) != 3 {
		t.Fatalf("masters: %v, want 3", sizes)
	}
	for a, n := range sizes {
		if n == 0 {
			t.Fatalf("master %s holds no keys: %v", a, sizes)
		}
	}
}

func TestStartClusterNeedsThree(t *testing.T) {
	ft := &fatalRecorder{TB: t}
	runCatchingFatal(ft, func() { StartCluster(ft, 2) })
	if !ft.fatal {
		t.Fatal("StartCluster(2) did not fail")
	}
}

func TestStartDetectsTakenPort(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	s := &RedisServer{Dir: t.TempDir(), bin: bin, Addr: l.Addr().String()}
	s.conf = filepath.Join(s.Dir, "redis.conf")
	if err := s.writeConf(port, RedisOptions{}, "everysec"); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	err = s.start()
	s.mu.Unlock()
	if !errors.Is(err, errAddrInUse) {
		t.Fatalf("start on a taken port: %v; want errAddrInUse\n%s", err, s.logTail())
	}
	if alive(s.Pid()) {
		t.Fatalf("pid %d alive after a failed start", s.Pid())
	}
}

// A cluster with replicas: a killed master's replica is promoted and
// serves its slots, with what was written before the kill.
func TestClusterFailover(t *testing.T) {
	cl := StartClusterReplicas(t, 3, 1, RedisOptions{ClusterNodeTimeout: time.Second})
	ctx := Context(t)
	// A dead master sends no MOVED: the client finds the promoted replica
	// at its next reload of the slot map (go-redis's default: 60 s).
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ClusterStateReloadInterval: 500 * time.Millisecond})
	defer cc.Close()
	if err := cc.Set(ctx, "{x}k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	slot := int(cc.ClusterKeySlot(ctx, "{x}k").Val())
	old := cl.MasterOf(t, slot)
	// The write is on the replica before the kill (WAIT 1 replica).
	if n, err := old.Client(t).Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT: %d, %v", n, err)
	}
	old.Kill(t)
	killed := time.Now()
	WaitFor(ctx, t, "the replica's promotion", func() bool { return cl.MasterOf(t, slot) != old }, cl.Describe)
	cl.WaitOK(t)
	t.Logf("promoted %v after the kill", time.Since(killed))
	// The client learns the new map after a failed call or two.
	WaitFor(ctx, t, "the write read from the promoted replica", func() bool {
		v, err := cc.Get(ctx, "{x}k").Result()
		if err == nil && v != "v" {
			t.Fatalf("after the failover: %q", v)
		}
		return err == nil
	})
	t.Logf("read %v after the kill", time.Since(killed))
}

package backend_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/app/config"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// TestSentinelPassword runs Sentinels that want a password: with
// redis.sentinel_password the program finds the master through them and
// works; without it, or with a wrong one, the Sentinels refuse to name the
// master and the program stops at start naming the key; the password never
// reaches the log.
func TestSentinelPassword(t *testing.T) {
	t.Parallel()
	const password = "sentinel-pw-51c2e8"
	g := testenv.StartSentinelGroup(t, testenv.SentinelOptions{Password: password})
	cfg := func(pw string) config.Config {
		c := config.Defaults()
		c.HTTP.Enabled = false
		c.SQL.SQLitePath = filepath.Join(t.TempDir(), "ledger.db")
		c.Redis.Mode, c.Redis.Addrs, c.Redis.MasterName = "sentinel", g.SentinelAddrs(), g.MasterName
		c.Redis.SentinelPassword = pw
		c.Redis.Namespace = "sentinelauth"
		return c
	}

	logs := &testenv.SyncBuffer{}
	b, err := tlsOpen(t, cfg(password), tlsLogger(logs))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := b.Queue.Enqueue(ctx, "t", queue.NewJob{ID: "via-sentinel"}); err != nil {
		t.Fatalf("enqueue through authenticated sentinels: %v", err)
	}
	if n, err := g.Primary.Client(t).Exists(ctx, "sentinelauth:{t}:due").Result(); err != nil || n != 1 {
		t.Fatalf("the job is not on the primary: %d %v", n, err)
	}

	// Without the password the sentinels name no master: a configuration
	// mistake, so the program stops at start and names the key.
	if _, err := tlsOpen(t, cfg(""), tlsLogger(logs)); err == nil || !strings.Contains(err.Error(), "redis.sentinel_password") {
		t.Fatalf("open without redis.sentinel_password: %v, want an error naming the key", err)
	}
	if _, err := tlsOpen(t, cfg("wrong"), tlsLogger(logs)); err == nil || !strings.Contains(err.Error(), "redis.sentinel_password") {
		t.Fatalf("open with a wrong redis.sentinel_password: %v, want an error naming the key", err)
	}
	if strings.Contains(logs.String(), password) {
		t.Fatal("the sentinel password appears in the log")
	}
}

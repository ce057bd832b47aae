package backend_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/app/backend"
	"github.com/delayq/delayq/app/config"
	"github.com/delayq/delayq/internal/testenv"
)

// In cluster mode the client reloads its slot map every
// redis.cluster_reload_every, not go-redis's 60 s: a master that died
// leaves no MOVED to follow, and its slots' calls fail until a reload.
func TestClusterReloadsItsSlotMap(t *testing.T) {
	addrs := testenv.StartCluster(t, 3)
	cfg := config.Defaults()
	cfg.Redis.Mode, cfg.Redis.Addrs = "cluster", addrs
	cfg.Redis.ClusterReloadEvery = 700 * time.Millisecond
	cfg.SQL.Driver, cfg.SQL.DSN = "mysql", testenv.MySQLDSN(t)
	cfg.Orders.Enabled = false
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	b, err := backend.Open(testenv.Context(t), cfg, testenv.QuietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cc, ok := b.Redis.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("redis.mode cluster opened a %T", b.Redis)
	}
	if got := cc.Options().ClusterStateReloadInterval; got != cfg.Redis.ClusterReloadEvery {
		t.Fatalf("slot map reloaded every %v, want redis.cluster_reload_every (%v)", got, cfg.Redis.ClusterReloadEvery)
	}
	if err := cc.Set(testenv.Context(t), "{x}k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
}

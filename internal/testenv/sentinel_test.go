package testenv

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Sentinel group fails over to its replica when the primary is SIGKILLed;
// a go-redis failover client follows by itself; what the primary
// acknowledged while replication was cut is lost, what was replicated
// before is kept.
func TestStartSentinelGroupFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("a failover takes a few seconds")
	}
	g := StartSentinelGroup(t, SentinelOptions{MasterName: "tmaster"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: g.MasterName, SentinelAddrs: g.SentinelAddrs()})
	defer rdb.Close()

	if err := rdb.Set(ctx, "kept", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	g.WaitReplicated(t)
	g.CutReplication(t)
	if err := rdb.Set(ctx, "lost", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	replica := g.Replica.Client(t)
	if n, err := replica.Exists(ctx, "kept", "lost").Result(); err != nil || n != 1 {
		t.Fatalf("replica holds %d of kept, lost (%v); want only kept", n, err)
	}

	pid := g.Primary.Pid()
	killed := time.Now()
	g.Primary.Kill(t)
	if alive(pid) {
		t.Fatalf("primary pid %d alive after Kill", pid)
	}
	m := g.WaitFailover(t, 30*time.Second)
	t.Logf("sentinels named %s master %v after the kill", m.Addr, time.Since(killed).Round(time.Millisecond))
	if m != g.Replica {
		t.Fatalf("WaitFailover returned %s, want the replica %s", m.Addr, g.Replica.Addr)
	}

	// The failover client finds the new master by itself (bounded).
	var last error
	WaitFor(ContextTimeout(t, 30*time.Second), t, "the failover client to write to the new master", func() bool {
		last = rdb.Set(ctx, "after", "1", 0).Err()
		return last == nil
	}, func() string { return fmt.Sprintf("still failing: %v", last) })
	if v, err := rdb.Get(ctx, "kept").Result(); err != nil || v != "1" {
		t.Fatalf("GET kept after failover = %q, %v", v, err)
	}
	if err := rdb.Get(ctx, "lost").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET lost after failover: %v, want redis.Nil (written while replication was cut)", err)
	}
	if n, err := replica.Exists(ctx, "after").Result(); err != nil || n != 1 {
		t.Fatalf("the write after the failover is not on the replica (%d, %v)", n, err)
	}
}

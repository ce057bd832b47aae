package redislock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/redislock"
	"github.com/delayq/delayq/internal/testenv"
)

func TestOneHolderAtATime(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	ctx := context.Background()
	key := ns + ":lock"
	var holders, maxHolders, ran atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			l := redislock.New(rdb, key, time.Minute)
			did, err := l.Do(ctx, func(ctx context.Context) error {
				n := holders.Add(1)
				for {
					m := maxHolders.Load()
					if n <= m || maxHolders.CompareAndSwap(m, n) {
						break
					}
				}
				time.Sleep(20 * time.Millisecond) // overlap the others' attempts
				holders.Add(-1)
				return nil
			})
			if err != nil {
				t.Error(err)
			}
			if did {
				ran.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	if maxHolders.Load() != 1 || ran.Load() < 1 {
		t.Fatalf("max holders %d, runs %d", maxHolders.Load(), ran.Load())
	}
	if n, _ := rdb.Exists(ctx, key).Result(); n != 0 {
		t.Fatal("lock left behind after release")
	}
}

func TestOnlyTheOwnerReleases(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	ctx := context.Background()
	key := ns + ":lock"
	a := redislock.New(rdb, key, 30*time.Millisecond)
	if ok, err := a.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	// a's TTL runs out; b takes the lock; a's late release must not free it.
	b := redislock.New(rdb, key, time.Minute)
	testenv.WaitFor(testenv.Context(t), t, "the lock to expire", func() bool {
		ok, err := b.TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
	if err := a.Release(ctx); !errors.Is(err, redislock.ErrNotHeld) {
		t.Fatalf("stale owner's release: %v, want ErrNotHeld", err)
	}
	if err := a.Refresh(ctx); !errors.Is(err, redislock.ErrNotHeld) {
		t.Fatalf("stale owner's refresh: %v, want ErrNotHeld", err)
	}
	if n, _ := rdb.Exists(ctx, key).Result(); n != 1 {
		t.Fatal("stale owner freed the new owner's lock")
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// Holder names the owner that took the lock and says how long it has
// left; nobody holds a lock released or never taken.
func TestHolder(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	ctx := context.Background()
	key := ns + ":lock"
	other := redislock.New(rdb, key, time.Minute)
	if _, _, held, err := other.Holder(ctx); held || err != nil {
		t.Fatalf("holder of a free lock: held %v, %v", held, err)
	}
	l := redislock.New(rdb, key, time.Minute).WithOwner("host-a:42")
	if ok, err := l.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("acquire: %v, %v", ok, err)
	}
	owner, ttl, held, err := other.Holder(ctx)
	if !held || err != nil || owner != "host-a:42" || ttl <= 0 || ttl > time.Minute {
		t.Fatalf("holder: %q, %s, held %v, %v; want host-a:42 with up to 1m left", owner, ttl, held, err)
	}
	if err := l.Refresh(ctx); err != nil {
		t.Fatalf("refresh of a lock with an owner: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, held, err := other.Holder(ctx); held || err != nil {
		t.Fatalf("holder after release: held %v, %v", held, err)
	}
	anon := redislock.New(rdb, key, time.Minute)
	if ok, err := anon.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("acquire: %v, %v", ok, err)
	}
	if owner, _, held, err := other.Holder(ctx); !held || err != nil || owner != "" {
		t.Fatalf("holder without an owner: %q, held %v, %v", owner, held, err)
	}
}

package testenv

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// cleanupTimeout bounds the work a cleanup function does against a service.
const cleanupTimeout = 30 * time.Second

// Redis returns a client to the shared test Redis (DELAYQ_TEST_REDIS_ADDR,
// default 127.0.0.1:6379) and a namespace unique to this test ("t" + the
// sanitized test name + "_" + random hex, only [A-Za-z0-9_]). Keys the test
// writes must start with ns+":". On cleanup it deletes every key that starts
// with ns+":" (SCAN MATCH + UNLINK, in batches) and closes the client.
//
// It fails the test with t.Fatal when Redis does not answer PING; it never
// skips.
func Redis(t testing.TB) (redis.UniversalClient, string) {
	t.Helper()
	addr := getenv(EnvRedisAddr, DefaultRedisAddr)
	// A plain dial first gives a prompt, quiet answer when nothing listens
	// (go-redis would retry and log each refused dial).
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("testenv: Redis at %s (%s) does not answer: %v; %s", addr, EnvRedisAddr, err, hint)
	}
	_ = c.Close()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		t.Fatalf("testenv: Redis at %s (%s) does not answer PING: %v; %s", addr, EnvRedisAddr, err, hint)
	}
	ns := namespace(t)
	t.Cleanup(func() {
		defer rdb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := deleteNamespace(ctx, rdb, ns); err != nil {
			t.Errorf("testenv: Redis at %s: deleting the keys of namespace %q: %v", addr, ns, err)
		}
	})
	return rdb, ns
}

// deleteBatch is how many keys one SCAN step asks for and one UNLINK
// removes.
const deleteBatch = 500

// deleteNamespace unlinks every key that starts with ns+":". It repeats the
// scan (a few times at most) until a full pass finds nothing, so keys a
// straggling goroutine wrote during the first pass go too.
func deleteNamespace(ctx context.Context, rdb redis.UniversalClient, ns string) error {
	// ns holds only [A-Za-z0-9_], so it needs no glob escaping.
	match := ns + ":*"
	for pass := 0; pass < 3; pass++ {
		found := 0
		var cursor uint64
		for {
			keys, next, err := rdb.Scan(ctx, cursor, match, deleteBatch).Result()
			if err != nil {
				return err
			}
			for len(keys) > 0 {
				n := min(len(keys), deleteBatch)
				if err := rdb.Unlink(ctx, keys[:n]...).Err(); err != nil {
					return err
				}
				found += n
				keys = keys[n:]
			}
			if next == 0 {
				break
			}
			cursor = next
		}
		if found == 0 {
			return nil
		}
	}
	return nil
}

// MiniRedis starts an in-process miniredis (github.com/alicebob/miniredis/v2)
// and returns a client to it and a namespace unique to this test. On cleanup
// it closes the client and stops the server.
func MiniRedis(t testing.TB) (redis.UniversalClient, string) {
	t.Helper()
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		t.Fatalf("testenv: starting miniredis: %v", err)
	}
	rdb := redis.NewClient(miniredisOptions(mr.Addr()))
	t.Cleanup(func() {
		_ = rdb.Close()
		mr.Close()
	})
	return rdb, namespace(t)
}

// miniredisOptions are the options of the clients MiniRedis returns. Under
// the race detector on a loaded machine, miniredis can take longer than
// go-redis's 3 s read timeout to answer a pipeline of scripts; go-redis
// then sends the whole pipeline again, and the scripts that had run report
// their work as already done. So a call waits for its answer as long as
// its context allows (no deadline of its own), as Context bounds it.
func miniredisOptions(addr string) *redis.Options {
	return &redis.Options{Addr: addr, ReadTimeout: -1, WriteTimeout: -1, ContextTimeoutEnabled: true}
}

// WipeNamespace deletes every key of namespace ns, as a Redis that lost its
// data would have none of them: for tests of what survives that.
func WipeNamespace(ctx context.Context, rdb redis.UniversalClient, ns string) error {
	return deleteNamespace(ctx, rdb, ns)
}

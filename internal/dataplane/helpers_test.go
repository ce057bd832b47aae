package dataplane_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
)

// backend is one Redis the behaviour tests run against.
type backend struct {
	name string
	open func(t testing.TB) (redis.UniversalClient, string)
}

// backends are real Redis (production) and miniredis (the embedded mode):
// the scripts must behave the same on both.
var backends = []backend{
	{"redis", testenv.Redis},
	{"miniredis", testenv.MiniRedis},
}

// env is what one test gets: a client in its own namespace.
type env struct {
	c   *dataplane.Client
	rdb redis.UniversalClient
	ns  string
}

// forEachBackend runs f once per backend, each in its own namespace.
func forEachBackend(t *testing.T, cfg dataplane.Config, f func(t *testing.T, e env)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			rdb, ns := b.open(t)
			cfg := cfg
			cfg.Namespace = ns
			c, err := dataplane.New(rdb, cfg)
			if err != nil {
				t.Fatal(err)
			}
			f(t, env{c: c, rdb: rdb, ns: ns})
		})
	}
}

// keysOf lists every key in the test's namespace.
func keysOf(t testing.TB, e env) []string {
	t.Helper()
	ks, err := e.rdb.Keys(context.Background(), e.ns+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func mustEnqueue(t testing.TB, e env, topic string, j dataplane.NewJob) dataplane.EnqueueResult {
	t.Helper()
	r, err := e.c.Enqueue(testenv.Context(t), topic, j)
	if err != nil {
		t.Fatalf("enqueue %s: %v", j.ID, err)
	}
	if r.Duplicate {
		t.Fatalf("enqueue %s: unexpected duplicate", j.ID)
	}
	return r
}

func mustClaim(t testing.TB, e env, topic string, n int, lease time.Duration) *dataplane.Claimed {
	t.Helper()
	c, err := e.c.Claim(testenv.Context(t), topic, n, lease)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return c
}

func mustGet(t testing.TB, e env, topic, id string) *dataplane.JobInfo {
	t.Helper()
	info, err := e.c.Get(testenv.Context(t), topic, id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return info
}

func ids(jobs []*dataplane.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func refs(jobs []*dataplane.Job) []dataplane.Ref {
	out := make([]dataplane.Ref, len(jobs))
	for i, j := range jobs {
		out[i] = j.Ref()
	}
	return out
}

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }

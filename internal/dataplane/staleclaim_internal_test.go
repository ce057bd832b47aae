package dataplane

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/internal/testenv"
)

// claimSuperseded tells a claim whose job is dead or settled from one
// whose job lives on (its row is then rewritten by the next claim), from
// what Redis holds.
func TestClaimSupersededReadsRedis(t *testing.T) {
	c, _ := idleWorker(t, &memLedger{rows: map[string]int{}})
	ctx := testenv.Context(t)
	if _, err := c.Enqueue(ctx, "t", NewJob{ID: "j"}); err != nil {
		t.Fatal(err)
	}
	cl, err := c.claim(ctx, "t", claimOpts{n: 1, nDue: 1, lease: time.Minute})
	if err != nil || len(cl.Jobs) != 1 {
		t.Fatalf("claim: %v, %d jobs", err, len(cl.Jobs))
	}
	k, _ := c.keysFor("t")
	ref := cl.Jobs[0].Ref()
	check := func(what string, r Ref, want bool) {
		t.Helper()
		got, err := c.claimSuperseded(ctx, r)
		if err != nil || got != want {
			t.Errorf("%s: superseded %v (%v), want %v", what, got, err, want)
		}
	}
	check("its own claim", ref, false)
	check("a job that lives on, claimed again", Ref{Topic: "t", ID: "j", Attempt: ref.Attempt - 1}, false)
	if err := c.rdb.ZAdd(ctx, k.dead, redis.Z{Score: 1, Member: "j"}).Err(); err != nil {
		t.Fatal(err)
	}
	check("a dead job (its envelope kept)", ref, true)
	if err := c.rdb.Del(ctx, k.dead).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.rdb.HDel(ctx, k.job, "j").Err(); err != nil {
		t.Fatal(err)
	}
	check("no trace, no epoch marker (Redis may have lost it)", ref, false)
	if err := c.rdb.ZAdd(ctx, k.gone, redis.Z{Score: 1, Member: "j"}).Err(); err != nil {
		t.Fatal(err)
	}
	check("a tombstone", ref, true)
	if err := c.rdb.Del(ctx, k.gone).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnsureEpoch(ctx, []string{"t"}, "test"); err != nil {
		t.Fatal(err)
	}
	check("no trace, the marker there (settled)", ref, true)
}

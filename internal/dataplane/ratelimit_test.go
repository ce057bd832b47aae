package dataplane_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
)

func mustClaimLimited(t testing.TB, e env, topic string, n int, l dataplane.RateLimit) *dataplane.Claimed {
	t.Helper()
	c, err := e.c.ClaimLimited(testenv.Context(t), topic, n, time.Minute, l)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return c
}

// bucketTokens reads the token bucket of topic; ok is false when there is
// none.
func bucketTokens(t testing.TB, e env, topic string) (tokens float64, ok bool) {
	t.Helper()
	v, err := e.rdb.HGet(testenv.Context(t), e.ns+":{"+topic+"}:rate", "tokens").Result()
	if errors.Is(err, redis.Nil) {
		return 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f, true
}

// A full bucket hands out its burst at once, then one job per token at the
// rate, in due order; the claims never take more than burst + rate ×
// elapsed (Redis's clock), and the bucket never goes negative.
func TestClaimRateLimitBurstThenSteadyRate(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		const jobs = 12
		base := redisNow(t, e) - 1000
		for i := 0; i < jobs; i++ {
			mustEnqueue(t, e, "t", dataplane.NewJob{ID: fmt.Sprintf("j%02d", i), RunAt: base + int64(i)})
		}
		l := dataplane.RateLimit{PerSecond: 40, Burst: 4}
		first := mustClaimLimited(t, e, "t", 10, l)
		if len(first.Jobs) != 4 {
			t.Fatalf("first claim took %d jobs, want the burst of 4", len(first.Jobs))
		}
		if first.NextToken < first.Now+1 || first.NextToken > first.Now+25 {
			t.Fatalf("next token at %d, now %d: want within the 25 ms a token takes", first.NextToken, first.Now)
		}
		got := ids(first.Jobs)
		for len(got) < jobs {
			c := mustClaimLimited(t, e, "t", 10, l)
			got = append(got, ids(c.Jobs)...)
			allowed := float64(l.Burst) + float64(c.Now-first.Now)*l.PerSecond/1000
			if float64(len(got)) > allowed+1e-9 {
				t.Fatalf("%d claimed %d ms after the first claim: more than burst + rate × elapsed = %.2f", len(got), c.Now-first.Now, allowed)
			}
			if tok, ok := bucketTokens(t, e, "t"); ok && tok < 0 {
				t.Fatalf("bucket at %v tokens", tok)
			}
			if len(got) < jobs {
				if c.NextToken == 0 {
					t.Fatalf("due jobs left after %d claimed but no next token", len(got))
				}
				waitRedisPast(t, e, c.NextToken-1)
			} else if c.NextToken != 0 {
				t.Fatalf("nothing due left, but next token %d", c.NextToken)
			}
		}
		want := make([]string, jobs)
		for i := range want {
			want[i] = fmt.Sprintf("j%02d", i)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("claimed %v, want due order %v", got, want)
		}
	})
}

// With no tokens left a claim takes nothing, leaves the due jobs as they
// are, and says when the next token comes.
func TestClaimRateLimitEmptyBucketClaimsNothing(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		for i := 0; i < 3; i++ {
			mustEnqueue(t, e, "t", dataplane.NewJob{ID: fmt.Sprint("j", i)})
		}
		// A token every 100 s: the bucket stays empty between two claims
		// however slow the host.
		l := dataplane.RateLimit{PerSecond: 0.01, Burst: 1}
		c := mustClaimLimited(t, e, "t", 10, l)
		if len(c.Jobs) != 1 {
			t.Fatalf("claimed %d, want 1", len(c.Jobs))
		}
		c = mustClaimLimited(t, e, "t", 10, l)
		if len(c.Jobs) != 0 {
			t.Fatalf("claimed %v with an empty bucket", ids(c.Jobs))
		}
		if c.NextToken <= c.Now || c.NextToken > c.Now+100_000 {
			t.Fatalf("next token %d, now %d: want within 100 s", c.NextToken, c.Now)
		}
		if tok, _ := bucketTokens(t, e, "t"); tok < 0 || tok >= 1 {
			t.Fatalf("bucket at %v tokens, want in [0, 1)", tok)
		}
		st, err := e.c.Stats(testenv.Context(t), "t")
		if err != nil || st.DueNow != 2 || st.InFlight != 1 {
			t.Fatalf("stats %+v, %v: want 2 still due, 1 in flight", st, err)
		}
		// An unlimited claim does not look at the bucket.
		if c = mustClaim(t, e, "t", 10, time.Minute); len(c.Jobs) != 2 || c.NextToken != 0 {
			t.Fatalf("unlimited claim took %v, next token %d", ids(c.Jobs), c.NextToken)
		}
	})
}

// A job buried instead of handed out (its workers died max-attempts times)
// costs no token.
func TestClaimRateLimitBuriedJobsTakeNoToken(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "poison", MaxAttempts: 1})
		held := mustClaim(t, e, "t", 1, time.Millisecond) // its lease expires at once
		waitRedisPast(t, e, held.Now+1)
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "ok"})
		c := mustClaimLimited(t, e, "t", 10, dataplane.RateLimit{PerSecond: 0.001, Burst: 3})
		if len(c.Buried) != 1 || len(c.Jobs) != 1 || c.Jobs[0].ID != "ok" {
			t.Fatalf("buried %v, claimed %v", ids(c.Buried), ids(c.Jobs))
		}
		if tok, ok := bucketTokens(t, e, "t"); !ok || math.Abs(tok-2) > 0.01 {
			t.Fatalf("bucket at %v tokens (exists %v), want 3 - 1 claimed = 2", tok, ok)
		}
	})
}

// The bucket expires (idle, it would be full anyway); an unlimited claim
// and a claim that takes nothing create none; the pause flag (KEYS[5]) is
// left alone.
func TestClaimRateLimitKeys(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		l := dataplane.RateLimit{PerSecond: 100, Burst: 10}
		mustClaimLimited(t, e, "t", 10, l) // nothing due
		mustEnqueue(t, e, "u", dataplane.NewJob{ID: "a"})
		mustClaim(t, e, "u", 10, time.Minute)
		for _, topic := range []string{"t", "u"} {
			if _, ok := bucketTokens(t, e, topic); ok {
				t.Fatalf("topic %s has a bucket though it spent no token", topic)
			}
		}
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "b"})
		mustClaimLimited(t, e, "t", 10, l)
		ttl, err := e.rdb.PTTL(ctx, e.ns+":{t}:rate").Result()
		if err != nil || ttl <= 0 || ttl > time.Second {
			t.Fatalf("bucket TTL %s, %v: want at most max(1 s, 2 × 10/100 s)", ttl, err)
		}
		if n, err := e.rdb.Exists(ctx, e.ns+":{t}:paused").Result(); err != nil || n != 0 {
			t.Fatalf("paused key exists %d, %v", n, err)
		}
	})
}

// Bad limits are refused before Redis is touched.
func TestClaimRateLimitRefusesBadLimits(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "a"})
		for _, l := range []dataplane.RateLimit{
			{PerSecond: -1, Burst: 1}, {PerSecond: math.NaN(), Burst: 1}, {PerSecond: math.Inf(1), Burst: 1},
			{PerSecond: 10, Burst: 0}, {PerSecond: 0, Burst: -1}, {PerSecond: 1e-6, Burst: 1}, {PerSecond: 2e6, Burst: 1},
			{PerSecond: 10, Burst: 2_000_000},
		} {
			if _, err := e.c.ClaimLimited(testenv.Context(t), "t", 1, time.Minute, l); err == nil {
				t.Fatalf("limit %+v accepted", l)
			}
		}
		if st, err := e.c.Stats(testenv.Context(t), "t"); err != nil || st.DueNow != 1 {
			t.Fatalf("stats %+v, %v: a refused claim took the job", st, err)
		}
	})
}

func TestDefaultRateBurst(t *testing.T) {
	for rate, want := range map[float64]int{0.5: 1, 1: 1, 10: 1, 11: 2, 500: 50} {
		if got := dataplane.DefaultRateBurst(rate); got != want {
			t.Errorf("DefaultRateBurst(%v) = %d, want %d", rate, got, want)
		}
	}
}

// A topic's limit is the topic's whatever its partition count: the claims
// of all its partitions together take no more than burst + rate × elapsed,
// a partition with nothing due gives back the tokens it took, and a paused
// topic's partitions take none.
func TestClaimRateLimitIsTheTopicsOverItsPartitions(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		const topic, k, jobs = "limited", 4, 40
		layout, err := e.c.SetPartitions(ctx, topic, k)
		if err != nil {
			t.Fatal(err)
		}
		// The new count's partitions and the topic's own (count 1, where
		// no job goes now): its claims take from the same bucket in its
		// script, as an old layout's do while a raise drains it.
		parts := layout.Names(topic)
		if len(parts) != k+1 || !slices.Contains(parts, topic) {
			t.Fatalf("partitions %v, want the topic's own and %d", parts, k)
		}
		l := dataplane.RateLimit{PerSecond: 40, Burst: 4}

		// Nothing due yet: every claim takes tokens and gives them back.
		for _, p := range parts {
			if c := mustClaimLimited(t, e, p, 10, l); len(c.Jobs) != 0 || c.NextToken != 0 {
				t.Fatalf("%s: claimed %d with nothing due, next token %d", p, len(c.Jobs), c.NextToken)
			}
		}
		// Given back but what refilled while they were held (a give-back
		// never adds the refill the cap would have cut).
		if tok, ok := bucketTokens(t, e, topic); ok && tok < float64(l.Burst)-1 {
			t.Fatalf("bucket at %v after claims that found nothing, want it about full (%d)", tok, l.Burst)
		}

		base := redisNow(t, e) - 1000
		batch := make([]dataplane.NewJob, jobs)
		for i := range batch {
			batch[i] = dataplane.NewJob{ID: fmt.Sprintf("j%02d", i), RunAt: base + int64(i)}
		}
		if _, err := e.c.EnqueueBatch(ctx, topic, batch); err != nil {
			t.Fatal(err)
		}
		// Redis's clock before the first claim: no later than the first
		// take of tokens (a claim's reply reads the clock after its take,
		// so counting from it would understate the refill by a moment).
		first := redisNow(t, e)
		got := 0
		for round := 0; got < jobs; round++ {
			if round > 10*jobs {
				t.Fatalf("%d of %d claimed after %d rounds", got, jobs, round)
			}
			var soonest int64
			for _, p := range parts {
				c := mustClaimLimited(t, e, p, 10, l)
				got += len(c.Jobs)
				allowed := float64(l.Burst) + float64(c.Now-first)*l.PerSecond/1000
				if float64(got) > allowed+1e-9 {
					t.Fatalf("%d claimed over %d partitions %d ms after the first claim: more than burst + rate × elapsed = %.2f",
						got, k, c.Now-first, allowed)
				}
				if tok, ok := bucketTokens(t, e, topic); ok && tok < 0 {
					t.Fatalf("bucket at %v tokens", tok)
				}
				if c.NextToken > 0 && (soonest == 0 || c.NextToken < soonest) {
					soonest = c.NextToken
				}
			}
			if got < jobs {
				if soonest == 0 {
					t.Fatalf("due jobs left after %d claimed, but no partition said when the next token comes", got)
				}
				waitRedisPast(t, e, soonest-1)
			}
		}

		if _, err := e.c.Pause(ctx, &memPauses{}, topic, "test"); err != nil {
			t.Fatal(err)
		}
		before, _ := bucketTokens(t, e, topic)
		waitRedisPast(t, e, redisNow(t, e)+100)
		mustEnqueue(t, e, topic, dataplane.NewJob{ID: "while-paused"})
		for _, p := range parts {
			if c := mustClaimLimited(t, e, p, 10, l); len(c.Jobs) != 0 || !c.Paused {
				t.Fatalf("%s: paused topic's claim took %d jobs, paused=%v", p, len(c.Jobs), c.Paused)
			}
		}
		if after, _ := bucketTokens(t, e, topic); after != before {
			t.Fatalf("a paused topic's claims changed its bucket from %v to %v", before, after)
		}
	})
}

// With the topic's tokens spent by one busy partition, a claim on another
// takes no job but still puts its expired leases back (due now, so it says
// when the next token comes), and a partition with nothing due says
// nothing of tokens: it is not held back, and sleeps until its own next
// due time.
func TestClaimRateLimitWithoutTokensStillTendsThePartition(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		const topic = "tended"
		if _, err := e.c.SetPartitions(ctx, topic, 3); err != nil {
			t.Fatal(err)
		}
		partOf := func(id string) string {
			info, err := e.c.Get(ctx, topic, id)
			if err != nil || info.Job == nil {
				t.Fatalf("get %s: %+v %v", id, info, err)
			}
			return info.Job.Partition
		}
		for i := range 10 {
			mustEnqueue(t, e, topic, dataplane.NewJob{ID: fmt.Sprint("busy", i), PartitionKey: "busy"})
		}
		busy := partOf("busy0")
		var leased, leasedPart string
		for i := 0; leased == ""; i++ {
			id := fmt.Sprint("other", i)
			mustEnqueue(t, e, topic, dataplane.NewJob{ID: id, PartitionKey: id})
			if p := partOf(id); p != busy {
				leased, leasedPart = id, p
			}
		}
		cl, err := e.c.Claim(ctx, leasedPart, 1, 5*time.Millisecond)
		if err != nil || len(cl.Jobs) != 1 || cl.Jobs[0].ID != leased {
			t.Fatalf("claim of %s: %+v %v", leased, cl, err)
		}
		waitRedisPast(t, e, cl.Jobs[0].LeaseUntil)

		l := dataplane.RateLimit{PerSecond: 1, Burst: 4} // a token a second: spent, the bucket stays empty
		if c := mustClaimLimited(t, e, busy, 10, l); len(c.Jobs) != 4 {
			t.Fatalf("busy partition took %d, want the burst", len(c.Jobs))
		}
		c := mustClaimLimited(t, e, leasedPart, 10, l)
		if len(c.Jobs) != 0 || c.NextToken == 0 {
			t.Fatalf("claim without tokens: %d jobs, next token %d; want none and when the next token comes", len(c.Jobs), c.NextToken)
		}
		// Back in due: a job claimed before shows as retrying there.
		if info, err := e.c.Get(ctx, topic, leased); err != nil || info.State != dataplane.StateRetrying {
			t.Fatalf("the expired lease of %s: %+v %v, want it back in due", leased, info, err)
		}
		for _, p := range []string{dataplane.PartitionName(topic, 3, 0), dataplane.PartitionName(topic, 3, 1), dataplane.PartitionName(topic, 3, 2)} {
			if p == busy || p == leasedPart {
				continue
			}
			if c := mustClaimLimited(t, e, p, 10, l); len(c.Jobs) != 0 || c.NextToken != 0 {
				t.Fatalf("idle partition %s: %d jobs, next token %d; want neither", p, len(c.Jobs), c.NextToken)
			}
			return
		}
		t.Fatal("no idle partition left to check")
	})
}

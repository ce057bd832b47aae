package dataplane

import (
	"testing"

	"github.com/delayq/delayq/internal/testenv"
)

// A give-back does not add the refill that came while its tokens were
// held: a claim that held the whole burst for 10 ms at 1,000/s and gives
// it back leaves nothing more to take than the refill since, so the takes
// of others in the meantime and after stay within the limit.
func TestRateGiveBackKeepsTheBound(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	c, err := New(rdb, Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	k, err := c.keysFor("t")
	if err != nil {
		t.Fatal(err)
	}
	var level string
	take := func(want, back int, takenAt int64) (granted, nowUs int64) {
		t.Helper()
		r, err := c.scripts.rateTake.Run(ctx, rdb, []string{k.rate, k.paused}, want, "1000", 10, back, takenAt, level).Slice()
		if err != nil {
			t.Fatal(err)
		}
		if want > 0 {
			level, _ = r[4].(string)
		}
		return asInt64(r[0]), asInt64(r[3])
	}
	a, aAt := take(10, 0, 0)
	aLevel := level
	if a != 10 {
		t.Fatalf("first take: %d, want the burst of 10", a)
	}
	testenv.WaitFor(ctx, t, "10 ms of Redis's clock", func() bool {
		_, now := take(0, 0, 0)
		return now >= aAt+10_000
	})
	b, bAt := take(10, 0, 0) // the refill of the 10 ms
	level = aLevel
	take(0, 10, aAt) // a gives its 10 back
	c2, cAt := take(10, 0, 0)
	// From b's take on, at most burst + rate × elapsed may be taken, give
	// or take the bucket's clock, which counts whole milliseconds (one
	// token at this rate).
	if allowed := 10 + (cAt-bAt)/1000 + 1; b+c2 > allowed {
		t.Fatalf("%d+%d taken within %d µs after a's give-back: more than burst + rate × elapsed = %d", b, c2, cAt-bAt, allowed)
	}

	// Where the cap was not reached, a give-back returns every token: the
	// whole burst taken, half given back 2 ms later, leaves the half plus
	// the refill (not less, as subtracting the refill would).
	if k, err = c.keysFor("u"); err != nil {
		t.Fatal(err)
	}
	level = ""
	if g, at := take(10, 0, 0); g != 10 {
		t.Fatalf("take of u: %d", g)
	} else {
		testenv.WaitFor(ctx, t, "2 ms of Redis's clock", func() bool {
			_, now := take(0, 0, 0)
			return now >= at+2_000
		})
		take(0, 5, at)
		// The 5 and the refill since the take, up to the burst; give or
		// take the bucket's millisecond clock.
		if g2, at2 := take(10, 0, 0); g2 < min(10, 5+(at2-at)/1000-1) || g2 > min(10, 5+(at2-at)/1000+1) {
			t.Fatalf("after giving 5 back %d µs after the take: %d to take, want the 5 and the refill (at most 10)", at2-at, g2)
		}
	}
}

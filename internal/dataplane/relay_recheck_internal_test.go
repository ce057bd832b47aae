package dataplane

import (
	"testing"
	"time"
)

// The rechecks asked for in one second share a member: a long outage,
// with every enqueue failing, adds at most two a second to the ZSET.
func TestRecheckAtSharesASecond(t *testing.T) {
	base := time.UnixMilli(1_700_000_000_000)
	a, b := recheckAt(base), recheckAt(base.Add(999*time.Millisecond))
	if a.Member != b.Member || a.Score != b.Score {
		t.Fatalf("two rechecks in one second: %+v and %+v, want one", a, b)
	}
	if a.Score < float64(base.UnixMilli()) {
		t.Fatalf("recheck at %v is before the time asked for, %d", a.Score, base.UnixMilli())
	}
	if c := recheckAt(base.Add(time.Second)); c.Member == a.Member {
		t.Fatalf("the next second shares the member %v", c.Member)
	}
}

package dataplane_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
)

// Per-minute counts: two processes' counts of a minute add up, the backlog
// is set, a minute nobody wrote reads as zeros with no backlog, a range
// spans hour hashes, and every hash has its TTL and the topic's hash tag.
func TestMinutes(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		base := time.Date(2026, 12, 5, 10, 58, 0, 0, time.UTC).Unix() / 60 // 10:58, two minutes before an hour
		add := func(m dataplane.MinuteCounts) {
			t.Helper()
			if err := e.c.AddMinute(ctx, "t", m); err != nil {
				t.Fatal(err)
			}
		}
		add(dataplane.MinuteCounts{Minute: base, Enqueued: 3, Done: 1, Backlog: -1})
		add(dataplane.MinuteCounts{Minute: base, Enqueued: 2, Retried: 4, Dead: 1, Backlog: 7})
		add(dataplane.MinuteCounts{Minute: base + 3, Done: 5, Backlog: -1}) // 11:01, the next hour's hash
		add(dataplane.MinuteCounts{Minute: base + 1, Backlog: -1})          // nothing to add: no write
		got, err := e.c.Minutes(ctx, "t", base-1, base+3)
		if err != nil {
			t.Fatal(err)
		}
		want := []dataplane.MinuteCounts{
			{Minute: base - 1, Backlog: -1},
			{Minute: base, Enqueued: 5, Done: 1, Retried: 4, Dead: 1, Backlog: 7},
			{Minute: base + 1, Backlog: -1},
			{Minute: base + 2, Backlog: -1},
			{Minute: base + 3, Done: 5, Backlog: -1},
		}
		if len(got) != len(want) {
			t.Fatalf("got %d minutes, want %d: %+v", len(got), len(want), got)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("minute %d: %+v, want %+v", i, got[i], want[i])
			}
		}
		ks := keysOf(t, e)
		if len(ks) != 2 {
			t.Fatalf("keys %v, want two hour hashes", ks)
		}
		for _, k := range ks {
			if !strings.HasPrefix(k, e.ns+":{t}:min:") {
				t.Errorf("key %q: want the topic's hash tag and :min:", k)
			}
			ttl, err := e.rdb.TTL(context.Background(), k).Result()
			if err != nil || ttl <= 24*time.Hour || ttl > dataplane.MinuteTTL {
				t.Errorf("TTL of %s = %v (%v), want just under %v", k, ttl, err, dataplane.MinuteTTL)
			}
		}
		if _, err := e.c.Minutes(ctx, "t", base, base+dataplane.MaxMinutes); err == nil {
			t.Error("a range longer than MaxMinutes was read")
		}
		if err := e.c.AddMinute(ctx, "t", dataplane.MinuteCounts{Minute: base, Done: -1}); err == nil {
			t.Error("a negative count was added")
		}
		if err := e.c.AddMinute(ctx, "bad topic!", dataplane.MinuteCounts{Minute: base, Done: 1}); err == nil {
			t.Error("a bad topic was accepted")
		}
	})
}

package scheduler

import (
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/delayq/delayq/queue/periodic"
)

func TestLatestTick(t *testing.T) {
	s := parseSpec(t, "* * * * * *", nil)
	now := time.Date(2026, 1, 1, 12, 0, 0, 300e6, time.UTC)
	// Nothing missed: the last tick is the latest.
	if got := latestTick(s, now.Truncate(time.Second), now); !got.IsZero() {
		t.Fatalf("nothing missed: %s", got)
	}
	// A day of a per-second schedule missed: the latest, found quickly.
	got := latestTick(s, now.Add(-24*time.Hour), now)
	if want := now.Truncate(time.Second); !got.Equal(want) {
		t.Fatalf("latest missed %s, want %s", got, want)
	}
	h := parseSpec(t, "@daily", nil)
	got = latestTick(h, now.Add(-72*time.Hour), now)
	if want := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("daily: %s, want %s", got, want)
	}
	if got := latestTick(h, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), now); !got.IsZero() {
		t.Fatalf("daily, today's done: %s", got)
	}
}

func parseSpec(t *testing.T, spec string, loc *time.Location) cron.Schedule {
	t.Helper()
	s, err := periodic.ParseSpec(spec, loc)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

package periodic

import (
	"errors"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

func mustParse(t *testing.T, spec string, loc *time.Location) cron.Schedule {
	t.Helper()
	s, err := ParseSpec(spec, loc)
	if err != nil {
		t.Fatalf("ParseSpec(%q): %v", spec, err)
	}
	return s
}

func TestParseSpecSecondsField(t *testing.T) {
	s := mustParse(t, "*/5 * * * * *", nil)
	from := time.Date(2026, 1, 2, 3, 4, 7, 500e6, time.UTC)
	if got, want := s.Next(from), time.Date(2026, 1, 2, 3, 4, 10, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("next of %s: %s, want %s", from, got, want)
	}
	// Five fields: minutes first, seconds zero.
	s = mustParse(t, "30 * * * *", nil)
	if got, want := s.Next(from), time.Date(2026, 1, 2, 3, 30, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("five fields: %s, want %s", got, want)
	}
}

func TestParseSpecZones(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no tzdata:", err)
	}
	from := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	// 09:00 in Berlin in June is 07:00 UTC.
	want := time.Date(2026, 6, 1, 7, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		spec string
		loc  *time.Location
	}{
		{"CRON_TZ=Europe/Berlin 0 9 * * *", nil},
		{"TZ=Europe/Berlin 0 0 9 * * *", nil},
		{"0 9 * * *", berlin},
	} {
		if got := mustParse(t, c.spec, c.loc).Next(from); !got.Equal(want) {
			t.Errorf("%q in %v: %s, want %s", c.spec, c.loc, got.UTC(), want)
		}
	}
	// No zone anywhere: UTC, whatever the host's zone.
	if got := mustParse(t, "0 9 * * *", nil).Next(from); !got.Equal(time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("default zone: %s, want 09:00 UTC", got.UTC())
	}
	if _, err := ParseSpec("CRON_TZ=Europe/Berlin 0 9 * * *", berlin); err == nil {
		t.Error("a zone in the spec and a location: accepted")
	}
}

// @every ticks on multiples of its interval since the epoch, so processes
// started at different times agree on them.
func TestEveryIsAlignedOnTheEpoch(t *testing.T) {
	s := mustParse(t, "@every 10s", nil)
	a := s.Next(time.Date(2026, 1, 1, 0, 0, 3, 0, time.UTC))
	b := s.Next(time.Date(2026, 1, 1, 0, 0, 9, 999e6, time.UTC))
	want := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	if !a.Equal(want) || !b.Equal(want) {
		t.Fatalf("next ticks %s and %s, want %s", a, b, want)
	}
	if got := s.Next(want); !got.Equal(want.Add(10 * time.Second)) {
		t.Fatalf("next after a tick: %s", got)
	}
}

func TestScheduleErrorsNameTheField(t *testing.T) {
	for _, c := range []struct {
		s     Schedule
		field string
	}{
		{Schedule{Name: "a", Spec: "* * *", Topic: "t"}, "spec"},
		{Schedule{Name: "a", Spec: "61 * * * * *", Topic: "t"}, "spec"},
		{Schedule{Name: "a", Spec: "0 0 30 2 *", Topic: "t"}, "spec"}, // February 30th never comes
		{Schedule{Name: "a:b", Spec: "@hourly", Topic: "t"}, "name"},
		{Schedule{Name: "", Spec: "@hourly", Topic: "t"}, "name"},
		{Schedule{Name: "a", Spec: "@hourly", Topic: "t", Missed: "twice"}, "missed"},
		{Schedule{Name: "a", Spec: "@hourly", Topic: "t", MaxAttempts: 101}, "max_attempts"},
		{Schedule{Name: "a", Spec: "CRON_TZ=UTC @hourly", Topic: "t", Location: time.UTC}, "location"},
	} {
		_, err := c.s.check("x")
		var e *Error
		if !errors.As(err, &e) || e.Field != c.field {
			t.Errorf("%+v: error %v, want one on field %s", c.s, err, c.field)
		}
	}
	s := Schedule{Name: "ok", Spec: "@hourly", Topic: "t"}
	if _, err := s.check("ok"); err != nil || s.Missed != MissedSkip {
		t.Fatalf("valid schedule: %v, missed %q", err, s.Missed)
	}
}

func TestJobIDFormat(t *testing.T) {
	tick := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	id := JobID("nightly.report", tick)
	if id != "nightly.report:1772600767000" {
		t.Fatalf("id %q", id)
	}
	name, got, ok := ParseJobID(id)
	if !ok || name != "nightly.report" || !got.Equal(tick) {
		t.Fatalf("ParseJobID(%q) = %q %s %v", id, name, got, ok)
	}
	for _, bad := range []string{"x", "a:b", ":1", "a b:1"} {
		if _, _, ok := ParseJobID(bad); ok {
			t.Errorf("ParseJobID(%q) ok", bad)
		}
	}
}

func TestPayloadOf(t *testing.T) {
	for _, c := range []struct {
		in   any
		want string
	}{
		{nil, ""},
		{"plain text", "plain text"},
		{map[string]any{"k": 1}, `{"k":1}`},
		{[]any{1, "a"}, `[1,"a"]`},
	} {
		b, err := PayloadOf(c.in)
		if err != nil || string(b) != c.want {
			t.Errorf("PayloadOf(%v) = %q, %v; want %q", c.in, b, err, c.want)
		}
	}
}

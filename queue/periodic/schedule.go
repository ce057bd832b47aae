package periodic

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/delayq/delayq/queue"
)

// Missed is the policy for ticks missed while no process ran a schedule.
type Missed string

const (
	// MissedSkip enqueues nothing for missed ticks: the schedule goes on
	// at its next tick. The default.
	MissedSkip Missed = "skip"
	// MissedOnce enqueues one job, due now, for the latest missed tick.
	MissedOnce Missed = "once"
)

// Schedule is one periodic job.
type Schedule struct {
	// Name identifies the schedule across processes and restarts: its last
	// tick is kept under it, and it starts every job id. 1-64 of
	// [A-Za-z0-9_.-].
	Name string
	// Spec is the robfig/cron spec: five fields, six with seconds first,
	// or a descriptor (@every 1m, @daily), with an optional CRON_TZ=<zone>
	// prefix.
	Spec string
	// Location is the zone of a Spec without CRON_TZ=; nil means UTC.
	Location *time.Location
	// Topic the jobs are enqueued to (a Redis or a durable topic).
	Topic string
	// Payload of every job.
	Payload []byte
	// MaxAttempts of every job; 0 means the queue's default.
	MaxAttempts int
	// Priority of every job within its topic, 0 (the default) to
	// queue.MaxPriority (docs/design.md §4.23).
	Priority int
	// Missed is the missed-tick policy; "" means MissedSkip.
	Missed Missed
}

// Error is an invalid Schedule: which one, the field and why.
type Error struct {
	Schedule string // the schedule's name, or its index as "#2" without one
	Field    string // name, spec, location, topic, payload, max_attempts, priority or missed
	Reason   string
}

func (e *Error) Error() string {
	return fmt.Sprintf("periodic: schedule %s: %s: %s", e.Schedule, e.Field, e.Reason)
}

// ParseSpec parses a schedule's spec in loc (nil: UTC) unless the spec names
// its own zone with CRON_TZ= or TZ=. @every schedules tick on multiples of
// their interval since the Unix epoch. An error names what is wrong; a spec
// that never ticks (February 30th) is an error too.
func ParseSpec(spec string, loc *time.Location) (cron.Schedule, error) {
	s, err := parser.Parse(spec)
	if err != nil {
		return nil, err
	}
	ownZone := hasZone(spec)
	if ownZone && loc != nil {
		return nil, fmt.Errorf("the spec names its zone and a location is set too: give one")
	}
	if loc == nil {
		loc = time.UTC
	}
	switch cs := s.(type) {
	case *cron.SpecSchedule:
		if !ownZone {
			cs.Location = loc
		}
	case cron.ConstantDelaySchedule:
		s = every{d: cs.Delay}
	}
	// robfig/cron answers the zero time for a spec with no tick within
	// five years.
	if s.Next(time.Now()).IsZero() {
		return nil, fmt.Errorf("%q never ticks", spec)
	}
	return s, nil
}

// JobID is the id of the job of a schedule's tick: "<name>:<tick as Unix
// ms>".
func JobID(name string, tick time.Time) string {
	return name + ":" + strconv.FormatInt(tick.UnixMilli(), 10)
}

// ParseJobID splits a periodic job's id into the schedule's name and its
// tick; ok is false for an id of another form.
func ParseJobID(id string) (name string, tick time.Time, ok bool) {
	i := strings.LastIndexByte(id, ':')
	if i < 0 {
		return "", time.Time{}, false
	}
	ms, err := strconv.ParseInt(id[i+1:], 10, 64)
	if err != nil || !nameRE.MatchString(id[:i]) {
		return "", time.Time{}, false
	}
	return id[:i], time.UnixMilli(ms), true
}

// ParseMissed reads a missed-tick policy: "" (skip), "skip" or "once".
func ParseMissed(s string) (Missed, error) {
	switch m := Missed(s); m {
	case "":
		return MissedSkip, nil
	case MissedSkip, MissedOnce:
		return m, nil
	}
	return "", fmt.Errorf("%q: want skip or once", s)
}

// PayloadOf turns a configured payload into bytes: a string as is, nil as
// empty, anything else (a YAML map or list) as its JSON.
func PayloadOf(v any) ([]byte, error) {
	switch p := v.(type) {
	case nil:
		return nil, nil
	case string:
		return []byte(p), nil
	case []byte:
		return p, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("not a string nor JSON: %w", err)
	}
	return b, nil
}

// check validates s and returns its parsed spec; at says which schedule it
// is for the error.
func (s *Schedule) check(at string) (cron.Schedule, error) {
	bad := func(field, format string, args ...any) error {
		return &Error{Schedule: at, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if !nameRE.MatchString(s.Name) {
		return nil, bad("name", "%q: want 1-64 of [A-Za-z0-9_.-]", s.Name)
	}
	m, err := ParseMissed(string(s.Missed))
	if err != nil {
		return nil, bad("missed", "%v", err)
	}
	s.Missed = m
	if s.MaxAttempts < 0 || s.MaxAttempts > 100 {
		return nil, bad("max_attempts", "%d: want 0 (the queue's default) to 100", s.MaxAttempts)
	}
	if s.Priority < 0 || s.Priority > queue.MaxPriority {
		return nil, bad("priority", "%d: want 0 (the default) to %d", s.Priority, queue.MaxPriority)
	}
	sched, err := ParseSpec(s.Spec, s.Location)
	if err != nil {
		field := "spec"
		if s.Location != nil && hasZone(s.Spec) {
			field = "location"
		}
		return nil, bad(field, "%q: %v", s.Spec, err)
	}
	return sched, nil
}

// Validate checks the schedule (not its topic, which New checks against
// the queue's configuration): an *Error names the bad field.
func (s Schedule) Validate() error {
	_, err := s.check(s.Name)
	return err
}

// Check is Validate that also fills in the defaults (Missed) and returns
// the parsed spec; its errors name the schedule as label (its name, or its
// place in a list when it has none).
func (s *Schedule) Check(label string) (cron.Schedule, error) { return s.check(label) }

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// parser reads specs with an optional seconds field and descriptors, as
// the recoverer's and the sweeper's schedules do.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ZoneName is the zone the schedule's times are read in, as Info shows it:
// Location's name (UTC when nil), or "" when the spec names its own zone
// (CRON_TZ=).
func (s Schedule) ZoneName() string {
	switch {
	case hasZone(s.Spec):
		return ""
	case s.Location != nil:
		return s.Location.String()
	}
	return "UTC"
}

func hasZone(spec string) bool {
	spec = strings.TrimSpace(spec)
	return strings.HasPrefix(spec, "CRON_TZ=") || strings.HasPrefix(spec, "TZ=")
}

// every is an @every schedule aligned on the Unix epoch. robfig/cron's own
// counts from the time it is asked, which differs between processes, and
// so would their ticks.
type every struct{ d time.Duration }

func (e every) Next(t time.Time) time.Time {
	d := e.d.Milliseconds()
	ms := t.UnixMilli()
	return time.UnixMilli((ms/d + 1) * d).In(t.Location())
}

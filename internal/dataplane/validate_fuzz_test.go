package dataplane

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The fuzz oracle restates validate.go's rules on its own terms (regular
// expressions and plain arithmetic), so that a slip in the hand-written
// byte loop or in a bound is a disagreement, not a shared blind spot.
var (
	fuzzTopicRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	fuzzIDRE    = regexp.MustCompile(`^[A-Za-z0-9_.:@/-]{1,200}$`)
)

// fuzzValidateCfg keeps the limits small, so the fuzzer crosses them with
// short inputs.
var fuzzValidateCfg = Config{MaxPayloadBytes: 64, MaxDelay: 24 * time.Hour, DefaultMaxAttempts: 25}

// fuzzNow is a fixed, millisecond-aligned clock: validate's upper run_at
// bound is now + MaxDelay.
var fuzzNow = time.UnixMilli(1764471294000)

// kindOf is the error each field's refusal must wrap.
var kindOf = map[string]error{
	"topic":        ErrInvalidTopic,
	"id":           ErrInvalidID,
	"payload":      ErrPayloadTooLarge,
	"run_at":       ErrInvalidRunAt,
	"delay":        ErrInvalidRunAt,
	"max_attempts": ErrInvalidMaxAttempts,
}

// violations lists the fields of j that break a rule, per the oracle.
func violations(j NewJob) []string {
	var bad []string
	if !fuzzIDRE.MatchString(j.ID) {
		bad = append(bad, "id")
	}
	if len(j.Payload) > fuzzValidateCfg.MaxPayloadBytes {
		bad = append(bad, "payload")
	}
	if j.Delay != 0 && j.RunAt != 0 {
		bad = append(bad, "run_at")
	}
	if j.Delay < 0 || j.Delay > fuzzValidateCfg.MaxDelay {
		bad = append(bad, "delay")
	}
	earliest := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	latest := fuzzNow.UnixMilli() + fuzzValidateCfg.MaxDelay.Milliseconds()
	if j.RunAt != 0 && (j.RunAt < earliest || j.RunAt > latest) {
		bad = append(bad, "run_at")
	}
	attempts := j.MaxAttempts
	if attempts == 0 {
		attempts = fuzzValidateCfg.DefaultMaxAttempts
	}
	if attempts < 1 || attempts > 100 {
		bad = append(bad, "max_attempts")
	}
	return bad
}

// checkRefusal fails unless err is the ValidationError the API relies on:
// errors.As finds it, it matches ErrInvalid and its field's kind, it names
// a field the oracle says is bad, and its message stays short whatever the
// input (it is logged and sent to clients).
func checkRefusal(t *testing.T, err error, bad []string) {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("refusal %v (%T) is not a *ValidationError", err, err)
	}
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, kindOf[ve.Field]) {
		t.Fatalf("refusal %v: field %q, want ErrInvalid and %v", err, ve.Field, kindOf[ve.Field])
	}
	if !slices.Contains(bad, ve.Field) {
		t.Fatalf("refusal %v names field %q; the oracle finds only %v wrong", err, ve.Field, bad)
	}
	if ve.Reason == "" || !strings.Contains(err.Error(), ve.Field) {
		t.Fatalf("refusal %q: want a reason and the field name", err)
	}
	if len(err.Error()) > 600 {
		t.Fatalf("refusal message of %d bytes: the input is not truncated", len(err.Error()))
	}
}

// checkKeys fails unless the keys of an accepted topic are safe: one hash
// tag that is exactly the topic (so all of them share a cluster slot), three
// ':'-separated parts, and nothing that is special in a key pattern or on a
// redis-cli line.
func checkKeys(t *testing.T, topic string) {
	t.Helper()
	k := newKeys("dq", topic)
	for _, key := range []string{k.due, k.job, k.lease, k.dead, k.epoch, k.wake} {
		open, end := strings.IndexByte(key, '{'), strings.IndexByte(key, '}')
		if open < 0 || end < open+2 || key[open+1:end] != topic ||
			strings.Count(key, "{") != 1 || strings.Count(key, "}") != 1 {
			t.Fatalf("topic %q: key %q has not exactly one hash tag {%s}", topic, key, topic)
		}
		if parts := strings.Split(key, ":"); len(parts) != 3 {
			t.Fatalf("topic %q: key %q splits into %d parts on ':'", topic, key, len(parts))
		}
		if strings.ContainsAny(key, "*?[]\\ \t\r\n\"'\x00") {
			t.Fatalf("topic %q: key %q holds a pattern, quote or blank character", topic, key)
		}
	}
}

// FuzzValidate drives ValidateTopic, ValidateID and the job checks of
// Enqueue (validate) with arbitrary values. Properties: no panic; a job is
// accepted exactly when the oracle finds nothing wrong; every refusal is a
// *ValidationError that matches ErrInvalid, names a field that is wrong and
// wraps that field's kind; an accepted topic yields Redis-key-safe names;
// an accepted job leaves validate with max attempts in 1-100.
func FuzzValidate(f *testing.F) {
	c, err := New(nil, fuzzValidateCfg)
	if err != nil {
		f.Fatal(err)
	}
	hour := int64(time.Hour)
	f.Add("order_close", "order_close:123", []byte(`{"order_no":"123"}`), int64(30*time.Minute), int64(0), 0)
	f.Add("t", "a", []byte{}, int64(0), int64(1764471294000), 100)
	f.Add(strings.Repeat("T", 64), strings.Repeat("i", 200), make([]byte, 64), 24*hour, int64(0), 1)
	f.Add(strings.Repeat("T", 65), strings.Repeat("i", 201), make([]byte, 65), 24*hour+1, int64(0), 101)
	f.Add("a{b}", "x{t}", []byte("\x00"), int64(-1), int64(0), -1)
	f.Add("a:b", "user@host/a.b-c_d:e", []byte(nil), int64(0), int64(978307199999), 0)
	f.Add("caf\u00e9", "\u6f22\u5b57", []byte("\xff\xfe"), int64(time.Second), int64(1764471294000), 0)
	f.Add("a b", "a\nb", []byte("x"), int64(1), int64(1), 0)
	f.Add("", "", []byte(nil), int64(-1<<63), int64(-1<<63), -1<<63)
	f.Add(".", "..", []byte(nil), int64(1<<63-1), int64(1<<63-1), 1<<63-1)
	f.Fuzz(func(t *testing.T, topic, id string, payload []byte, delay, runAt int64, maxAttempts int) {
		terr := ValidateTopic(topic)
		switch {
		case terr != nil && fuzzTopicRE.MatchString(topic):
			t.Fatalf("valid topic %q refused: %v", topic, terr)
		case terr != nil:
			checkRefusal(t, terr, []string{"topic"})
		case !fuzzTopicRE.MatchString(topic):
			t.Fatalf("invalid topic %q accepted", topic)
		default:
			checkKeys(t, topic)
		}
		if ierr := ValidateID(id); (ierr == nil) != fuzzIDRE.MatchString(id) {
			t.Fatalf("ValidateID(%q) = %v; the oracle disagrees", id, ierr)
		} else if ierr != nil {
			checkRefusal(t, ierr, []string{"id"})
		}

		j := NewJob{ID: id, Payload: payload, Delay: time.Duration(delay), RunAt: runAt, MaxAttempts: maxAttempts}
		bad := violations(j)
		err := c.validate(&j, fuzzNow)
		switch {
		case err != nil && len(bad) == 0:
			t.Fatalf("valid job %+v refused: %v", j, err)
		case err != nil:
			checkRefusal(t, err, bad)
		case len(bad) > 0:
			t.Fatalf("job %+v accepted; the oracle finds %v wrong", j, bad)
		case j.MaxAttempts < 1 || j.MaxAttempts > 100 || (maxAttempts != 0 && j.MaxAttempts != maxAttempts):
			t.Fatalf("accepted job has max attempts %d (asked %d)", j.MaxAttempts, maxAttempts)
		}
	})
}

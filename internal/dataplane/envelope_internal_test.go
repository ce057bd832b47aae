package dataplane

import (
	"bytes"
	"errors"
	"testing"
)

func TestEnvelopeRoundTrip(t *testing.T) {
	cases := []Job{
		{Attempt: 0, MaxAttempts: 25, EnqueuedAt: 1764471294000, RunAt: 1764473094000, Payload: []byte(`{"order_no":"123"}`)},
		{Attempt: 3, MaxAttempts: 3, EnqueuedAt: 1, RunAt: 2, LastError: "boom | with | bars\nand newline", Payload: []byte("a|b|c|")},
		{Attempt: 1, MaxAttempts: 100, Payload: []byte{0, 0xff, '|', 0xfe, '\n', 0}},
		{Attempt: 1, MaxAttempts: 1},
	}
	for _, want := range cases {
		var got Job
		if err := decodeEnvelope(encodeEnvelope(&want), &got); err != nil {
			t.Fatalf("decode(encode(%+v)): %v", want, err)
		}
		if got.Attempt != want.Attempt || got.MaxAttempts != want.MaxAttempts || got.EnqueuedAt != want.EnqueuedAt ||
			got.RunAt != want.RunAt || got.LastError != want.LastError || !bytes.Equal(got.Payload, want.Payload) {
			t.Errorf("round trip: got %+v, want %+v", got, want)
		}
	}
}

func TestEnvelopeRejectsMalformed(t *testing.T) {
	for _, raw := range []string{"", "1|", "2|0|1|0|0|0||x", "1|0|1|0|0|5|abc", "1|x|1|0|0|0||", "1|0|1|0|0|-1||", "1|0|1|0|0|3|abcX"} {
		var j Job
		if err := decodeEnvelope([]byte(raw), &j); !errors.Is(err, ErrBadEnvelope) {
			t.Errorf("decode(%q) = %v, want ErrBadEnvelope", raw, err)
		}
	}
}

// An error-text length of math.MaxInt64 made the bounds check wrap
// (elen+1 < 0) and decodeEnvelope index out of range: a panic on a corrupt
// envelope instead of ErrBadEnvelope. FuzzEnvelope's earlier seeds never
// reached it; testdata/fuzz/FuzzEnvelope/huge_error_length now does.
func TestEnvelopeHugeErrorLength(t *testing.T) {
	for _, raw := range []string{
		"1|0|1|0|0|9223372036854775807|x",
		"1|0|1|0|0|9223372036854775807|",
		"1|0|1|0|0|9223372036854775806|x",
	} {
		var j Job
		if err := decodeEnvelope([]byte(raw), &j); !errors.Is(err, ErrBadEnvelope) {
			t.Errorf("decode(%q) = %v, want ErrBadEnvelope", raw, err)
		}
	}
}

// envelopeFields is what an envelope stores, comparable with ==.
type envelopeFields struct {
	attempt, maxAttempts int
	enqueuedAt, runAt    int64
	lastError, payload   string
}

func fieldsOf(j *Job) envelopeFields {
	return envelopeFields{j.Attempt, j.MaxAttempts, j.EnqueuedAt, j.RunAt, j.LastError, string(j.Payload)}
}

// canonicalHeader reports whether raw starts with the six header numbers
// written the way encodeEnvelope writes them (digits, no sign, no leading
// zero). Only then must re-encoding give raw back byte for byte: the
// decoder also takes "+5" or "007", which the scripts never write.
func canonicalHeader(raw []byte) bool {
	parts := bytes.SplitN(raw, []byte("|"), 7)
	if len(parts) < 7 {
		return false
	}
	for _, p := range parts[:6] {
		if len(p) == 0 || (len(p) > 1 && p[0] == '0') {
			return false
		}
		for _, c := range p {
			if c < '0' || c > '9' {
				return false
			}
		}
	}
	return true
}

// FuzzEnvelope decodes arbitrary bytes, as a corrupt or foreign job hash
// would hold. Properties: no panic; a refusal is ErrBadEnvelope; the input
// is not modified and the payload does not alias it (callers reuse
// buffers); what decodes re-encodes to an envelope that decodes to the same
// fields, and to the very same bytes when the header was canonical.
func FuzzEnvelope(f *testing.F) {
	for _, s := range []string{
		"1|0|25|1764471294000|1764473094000|0||{}",
		"1|2|3|4|5|3|err|\x00\xff",
		"1|0|1|0|0|0||",
		"1|0|1|0|0|9223372036854775807|x",
		"1|9223372036854775807|9223372036854775807|9223372036854775807|9223372036854775807|0||",
		"1|0|1|0|0|5|a|b|c|payload|with|bars",
		"1|+1|01|0|0|0||",
		"1|0|1|0|0|-0||",
		"2|0|1|0|0|0||",
		"1|0|1|0|0|99999999999999999999||",
		"1|0|1|0|0|4|\u00e9\u00e9|\u6f22",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		buf := bytes.Clone(raw)
		var j Job
		err := decodeEnvelope(buf, &j)
		if !bytes.Equal(buf, raw) {
			t.Fatalf("decode modified its input %q into %q", raw, buf)
		}
		if err != nil {
			if !errors.Is(err, ErrBadEnvelope) {
				t.Fatalf("decode(%q): untyped error %v", raw, err)
			}
			return
		}
		got := fieldsOf(&j)
		if got.attempt < 0 || got.maxAttempts < 0 || got.enqueuedAt < 0 || got.runAt < 0 {
			t.Fatalf("decode(%q): negative field in %+v", raw, got)
		}
		for i := range buf {
			buf[i] = 0xAA
		}
		if string(j.Payload) != got.payload {
			t.Fatalf("decode(%q): the payload aliases the input buffer", raw)
		}
		enc := encodeEnvelope(&j)
		var again Job
		if err := decodeEnvelope(enc, &again); err != nil {
			t.Fatalf("re-decode of %q (from %q): %v", enc, raw, err)
		}
		if fieldsOf(&again) != got {
			t.Fatalf("re-decode of %q: %+v, want %+v", raw, fieldsOf(&again), got)
		}
		if canonicalHeader(raw) && !bytes.Equal(enc, raw) {
			t.Fatalf("canonical envelope %q re-encoded as %q", raw, enc)
		}
	})
}

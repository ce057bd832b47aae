package queue

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

func FuzzEnvelope(f *testing.F) {
	f.Add([]byte("1|0|25|1764471294000|1764473094000|0||{}"))
	f.Add([]byte("1|2|3|4|5|3|err|\x00\xff"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var j Job
		if err := decodeEnvelope(raw, &j); err != nil {
			if !errors.Is(err, ErrBadEnvelope) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		var again Job
		if err := decodeEnvelope(encodeEnvelope(&j), &again); err != nil {
			t.Fatalf("re-decode of %q: %v", raw, err)
		}
		if again.Attempt != j.Attempt || again.RunAt != j.RunAt || again.LastError != j.LastError || !bytes.Equal(again.Payload, j.Payload) {
			t.Fatalf("re-decode of %q: %+v != %+v", raw, again, j)
		}
	})
}

package dataplane_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
)

func TestBadInputIsRefusedAndWritesNothing(t *testing.T) {
	cfg := dataplane.Config{MaxPayloadBytes: 1024, MaxDelay: 24 * time.Hour}
	forEachBackend(t, cfg, func(t *testing.T, e env) {
		now := time.Now()
		cases := []struct {
			name  string
			topic string
			job   dataplane.NewJob
			kind  error
			field string
		}{
			{"empty topic", "", dataplane.NewJob{ID: "a"}, dataplane.ErrInvalidTopic, "topic"},
			{"topic with brace", "a{b}", dataplane.NewJob{ID: "a"}, dataplane.ErrInvalidTopic, "topic"},
			{"topic with space", "a b", dataplane.NewJob{ID: "a"}, dataplane.ErrInvalidTopic, "topic"},
			{"topic 65 chars", strings.Repeat("t", 65), dataplane.NewJob{ID: "a"}, dataplane.ErrInvalidTopic, "topic"},
			{"topic with colon", "a:b", dataplane.NewJob{ID: "a"}, dataplane.ErrInvalidTopic, "topic"},
			{"empty id", "t", dataplane.NewJob{ID: ""}, dataplane.ErrInvalidID, "id"},
			{"id with brace", "t", dataplane.NewJob{ID: "x{t}"}, dataplane.ErrInvalidID, "id"},
			{"id with space", "t", dataplane.NewJob{ID: "order 1"}, dataplane.ErrInvalidID, "id"},
			{"id with newline", "t", dataplane.NewJob{ID: "a\nb"}, dataplane.ErrInvalidID, "id"},
			{"id 201 chars", "t", dataplane.NewJob{ID: strings.Repeat("i", 201)}, dataplane.ErrInvalidID, "id"},
			{"payload over limit", "t", dataplane.NewJob{ID: "a", Payload: make([]byte, 1025)}, dataplane.ErrPayloadTooLarge, "payload"},
			{"negative delay", "t", dataplane.NewJob{ID: "a", Delay: -time.Millisecond}, dataplane.ErrInvalidRunAt, "delay"},
			{"delay over max", "t", dataplane.NewJob{ID: "a", Delay: 25 * time.Hour}, dataplane.ErrInvalidRunAt, "delay"},
			{"run at in seconds", "t", dataplane.NewJob{ID: "a", RunAt: now.Unix()}, dataplane.ErrInvalidRunAt, "run_at"},
			{"run at before 2001", "t", dataplane.NewJob{ID: "a", RunAt: time.Date(2000, 12, 31, 0, 0, 0, 0, time.UTC).UnixMilli()}, dataplane.ErrInvalidRunAt, "run_at"},
			{"run at past max", "t", dataplane.NewJob{ID: "a", RunAt: now.Add(25 * time.Hour).UnixMilli()}, dataplane.ErrInvalidRunAt, "run_at"},
			{"delay and run at", "t", dataplane.NewJob{ID: "a", Delay: time.Second, RunAt: now.UnixMilli()}, dataplane.ErrInvalidRunAt, "run_at"},
			{"max attempts negative", "t", dataplane.NewJob{ID: "a", MaxAttempts: -1}, dataplane.ErrInvalidMaxAttempts, "max_attempts"},
			{"max attempts 101", "t", dataplane.NewJob{ID: "a", MaxAttempts: 101}, dataplane.ErrInvalidMaxAttempts, "max_attempts"},
		}
		for _, tc := range cases {
			_, err := e.c.Enqueue(testenv.Context(t), tc.topic, tc.job)
			var ve *dataplane.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, tc.kind) || !errors.Is(err, dataplane.ErrInvalid) || ve.Field != tc.field {
				t.Errorf("%s: err = %v, want a ValidationError of %v on field %s", tc.name, err, tc.kind, tc.field)
			}
		}
		if ks := keysOf(t, e); len(ks) != 0 {
			t.Fatalf("bad input wrote keys: %v", ks)
		}
		// The limits themselves are accepted.
		for _, j := range []dataplane.NewJob{
			{ID: strings.Repeat("i", 200), Payload: make([]byte, 1024), MaxAttempts: 100},
			{ID: "order_close:A-1.b@x/y", Delay: 24 * time.Hour, MaxAttempts: 1},
		} {
			if _, err := e.c.Enqueue(testenv.Context(t), strings.Repeat("T", 64), j); err != nil {
				t.Errorf("job at the limits refused: %v", err)
			}
		}
	})
}

func TestConfigRefusesBadValues(t *testing.T) {
	for _, cfg := range []dataplane.Config{
		{Namespace: "a{b}"},
		{MaxPayloadBytes: -1},
		{DefaultMaxAttempts: 101},
		{MaxBatch: -5},
	} {
		if _, err := dataplane.New(nil, cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
}

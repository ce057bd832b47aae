package queue_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

func TestBadInputIsRefusedAndWritesNothing(t *testing.T) {
	cfg := queue.Config{MaxPayloadBytes: 1024, MaxDelay: 24 * time.Hour}
	forEachBackend(t, cfg, func(t *testing.T, e env) {
		now := time.Now()
		cases := []struct {
			name  string
			topic string
			job   queue.NewJob
			kind  error
			field string
		}{
			{"empty topic", "", queue.NewJob{ID: "a"}, queue.ErrInvalidTopic, "topic"},
			{"topic with brace", "a{b}", queue.NewJob{ID: "a"}, queue.ErrInvalidTopic, "topic"},
			{"topic with space", "a b", queue.NewJob{ID: "a"}, queue.ErrInvalidTopic, "topic"},
			{"topic 65 chars", strings.Repeat("t", 65), queue.NewJob{ID: "a"}, queue.ErrInvalidTopic, "topic"},
			{"topic with colon", "a:b", queue.NewJob{ID: "a"}, queue.ErrInvalidTopic, "topic"},
			{"empty id", "t", queue.NewJob{ID: ""}, queue.ErrInvalidID, "id"},
			{"id with brace", "t", queue.NewJob{ID: "x{t}"}, queue.ErrInvalidID, "id"},
			{"id with space", "t", queue.NewJob{ID: "order 1"}, queue.ErrInvalidID, "id"},
			{"id with newline", "t", queue.NewJob{ID: "a\nb"}, queue.ErrInvalidID, "id"},
			{"id 201 chars", "t", queue.NewJob{ID: strings.Repeat("i", 201)}, queue.ErrInvalidID, "id"},
			{"payload over limit", "t", queue.NewJob{ID: "a", Payload: make([]byte, 1025)}, queue.ErrPayloadTooLarge, "payload"},
			{"negative delay", "t", queue.NewJob{ID: "a", Delay: -time.Millisecond}, queue.ErrInvalidRunAt, "delay"},
			{"delay over max", "t", queue.NewJob{ID: "a", Delay: 25 * time.Hour}, queue.ErrInvalidRunAt, "delay"},
			{"run at in seconds", "t", queue.NewJob{ID: "a", RunAt: now.Unix()}, queue.ErrInvalidRunAt, "run_at"},
			{"run at before 2001", "t", queue.NewJob{ID: "a", RunAt: time.Date(2000, 12, 31, 0, 0, 0, 0, time.UTC).UnixMilli()}, queue.ErrInvalidRunAt, "run_at"},
			{"run at past max", "t", queue.NewJob{ID: "a", RunAt: now.Add(25 * time.Hour).UnixMilli()}, queue.ErrInvalidRunAt, "run_at"},
			{"delay and run at", "t", queue.NewJob{ID: "a", Delay: time.Second, RunAt: now.UnixMilli()}, queue.ErrInvalidRunAt, "run_at"},
			{"max attempts negative", "t", queue.NewJob{ID: "a", MaxAttempts: -1}, queue.ErrInvalidMaxAttempts, "max_attempts"},
			{"max attempts 101", "t", queue.NewJob{ID: "a", MaxAttempts: 101}, queue.ErrInvalidMaxAttempts, "max_attempts"},
		}
		for _, tc := range cases {
			_, err := e.c.Enqueue(testenv.Context(t), tc.topic, tc.job)
			var ve *queue.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, tc.kind) || !errors.Is(err, queue.ErrInvalid) || ve.Field != tc.field {
				t.Errorf("%s: err = %v, want a ValidationError of %v on field %s", tc.name, err, tc.kind, tc.field)
			}
		}
		if ks := keysOf(t, e); len(ks) != 0 {
			t.Fatalf("bad input wrote keys: %v", ks)
		}
		// The limits themselves are accepted.
		for _, j := range []queue.NewJob{
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
	for _, cfg := range []queue.Config{
		{Namespace: "a{b}"},
		{MaxPayloadBytes: -1},
		{DefaultMaxAttempts: 101},
		{MaxBatch: -5},
	} {
		if _, err := queue.New(nil, cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
}

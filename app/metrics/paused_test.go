package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/delayq/delayq/app/metrics"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// pausingQueue is a fakeQueue whose topic a is paused.
type pausingQueue struct{ *fakeQueue }

func (pausingQueue) PausesOf(_ context.Context, topics []string) (map[string]queue.PauseState, error) {
	out := map[string]queue.PauseState{}
	for _, t := range topics {
		out[t] = queue.PauseState{Topic: t, Paused: t == "a"}
	}
	return out, nil
}

// delayq_topic_paused is 1 for a paused topic, 0 for the others, read with
// the other state gauges; a QueueReader that cannot tell has no such gauge.
func TestTopicPausedGauge(t *testing.T) {
	m := metrics.New(testenv.QuietLogger())
	q := pausingQueue{&fakeQueue{stats: map[string]queue.Stats{"a": {Topic: "a"}, "b": {Topic: "b"}}}}
	if err := m.WatchState(metrics.StateConfig{Queue: q, MaxAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if got := value(t, m, "delayq_topic_paused", topic("a")); got != 1 {
		t.Errorf("paused{a} = %v, want 1", got)
	}
	if got := value(t, m, "delayq_topic_paused", topic("b")); got != 0 {
		t.Errorf("paused{b} = %v, want 0", got)
	}
	s, err := m.State(context.Background())
	if err != nil || !s.Paused["a"].Paused || s.Paused["b"].Paused {
		t.Fatalf("State.Paused %+v, %v", s.Paused, err)
	}
}

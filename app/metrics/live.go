package metrics

import (
	"sync"
	"sync/atomic"
	"time"
)

// live keeps per-topic totals next to the Prometheus series, in a form the
// dashboard can chart without parsing the exposition format: cumulative
// counts, and the lateness of the handlers started since the last sample
// (a histogram cannot tell a maximum).
type live struct {
	topics sync.Map // topic -> *liveTopic
}

type liveTopic struct {
	enqueued, completed, retried, dead atomic.Int64
	loaded, relayed, reloaded          atomic.Int64 // the relay's pushes

	mu      sync.Mutex
	starts  int64
	lateSum time.Duration
	lateMax time.Duration
}

func (l *live) topic(name string) *liveTopic {
	if t, ok := l.topics.Load(name); ok {
		return t.(*liveTopic)
	}
	t, _ := l.topics.LoadOrStore(name, &liveTopic{})
	return t.(*liveTopic)
}

func (t *liveTopic) started(lateness time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.starts++
	t.lateSum += lateness
	t.lateMax = max(t.lateMax, lateness)
}

// TopicSample is one topic's live totals at one instant.
type TopicSample struct {
	// Totals since the process started.
	Enqueued, Completed, Retried, Dead int64
	// The relay's pushes of a durable topic's jobs since the process
	// started (recovery.RelayReport): loaded, relayed (lost pushes),
	// reloaded.
	Loaded, Relayed, Reloaded int64
	// Started counts the handlers started since the previous sample;
	// LatenessAvg and LatenessMax are their lateness (0 when none started).
	Started     int64
	LatenessAvg time.Duration
	LatenessMax time.Duration
}

// SampleLive returns every topic's totals, and the lateness of the handlers
// started since the previous call: it is meant for one sampler (the
// dashboard's), which it resets.
func (m *Metrics) SampleLive() map[string]TopicSample {
	out := make(map[string]TopicSample)
	m.live.topics.Range(func(k, v any) bool {
		t := v.(*liveTopic)
		s := TopicSample{
			Enqueued: t.enqueued.Load(), Completed: t.completed.Load(),
			Retried: t.retried.Load(), Dead: t.dead.Load(),
			Loaded: t.loaded.Load(), Relayed: t.relayed.Load(), Reloaded: t.reloaded.Load(),
		}
		t.mu.Lock()
		s.Started = t.starts
		if t.starts > 0 {
			s.LatenessAvg = t.lateSum / time.Duration(t.starts)
			s.LatenessMax = t.lateMax
		}
		t.starts, t.lateSum, t.lateMax = 0, 0, 0
		t.mu.Unlock()
		out[k.(string)] = s
		return true
	})
	return out
}

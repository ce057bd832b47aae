package dataplane_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
)

// memPauses is a PauseStore in memory; fail makes every call fail as a
// SQL outage would.
type memPauses struct {
	mu   sync.Mutex
	at   int64
	m    map[string]dataplane.PauseState
	fail error
}

func (s *memPauses) SetPaused(_ context.Context, topic string, paused bool, actor string) (dataplane.PauseState, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return dataplane.PauseState{}, false, s.fail
	}
	if s.m == nil {
		s.m = map[string]dataplane.PauseState{}
	}
	if st, ok := s.m[topic]; ok && st.Paused == paused {
		return st, false, nil
	}
	s.at++
	st := dataplane.PauseState{Topic: topic, Paused: paused, At: s.at, By: actor}
	s.m[topic] = st
	return st, true, nil
}

func (s *memPauses) TopicState(_ context.Context, topic string) (dataplane.PauseState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.m[topic]; ok {
		return st, nil
	}
	return dataplane.PauseState{Topic: topic}, s.fail
}

func (s *memPauses) TopicStates(context.Context) ([]dataplane.PauseState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []dataplane.PauseState
	for _, st := range s.m {
		out = append(out, st)
	}
	return out, s.fail
}

// A paused topic hands out nothing, says so, and still puts expired leases
// back to due; a resume hands its jobs out again and wakes its fetchers.
func TestPauseStopsClaims(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		store := &memPauses{}
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "a"})
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "b"})
		if c := mustClaim(t, e, "t", 1, 5*time.Millisecond); len(c.Jobs) != 1 || c.Paused {
			t.Fatalf("claim before the pause: %+v", c)
		}
		st, err := e.c.Pause(ctx, store, "t", "test")
		if err != nil || !st.Paused || st.By != "test" {
			t.Fatalf("pause: %+v, %v", st, err)
		}
		if got, err := e.c.PauseOf(ctx, "t"); err != nil || got.At != st.At || got.By != st.By || !got.Paused || !st.Changed {
			t.Fatalf("PauseOf: %+v, %v; want %+v", got, err, st)
		}
		waitRedisPast(t, e, redisNow(t, e)+10) // the first job's lease expires
		c := mustClaim(t, e, "t", 10, time.Minute)
		if !c.Paused || len(c.Jobs) != 0 {
			t.Fatalf("claim while paused: paused %v, jobs %v", c.Paused, ids(c.Jobs))
		}
		if c.NextDue == 0 || c.NextDue > c.Now {
			t.Fatalf("next due %d (now %d): both jobs should wait, due", c.NextDue, c.Now)
		}
		// a's lease expired and put it back (it ran once: retrying); b
		// was never claimed.
		for id, want := range map[string]dataplane.State{"a": dataplane.StateRetrying, "b": dataplane.StateWaiting} {
			if info := mustGet(t, e, "t", id); info.State != want {
				t.Fatalf("%s while paused: %s, want %s", id, info.State, want)
			}
		}
		// Pausing a paused topic changes nothing.
		st.Changed = false
		if again, err := e.c.Pause(ctx, store, "t", "other"); err != nil || again != st {
			t.Fatalf("pause again: %+v, %v; want %+v", again, err, st)
		}

		sub := e.rdb.Subscribe(ctx, e.c.WakeChannel("t"))
		defer sub.Close()
		if _, err := sub.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		r, err := e.c.Resume(ctx, store, "t", "test2")
		if err != nil || r.Paused || r.By != "test2" {
			t.Fatalf("resume: %+v, %v", r, err)
		}
		if _, err := sub.ReceiveMessage(ctx); err != nil {
			t.Fatalf("no wake after the resume: %v", err)
		}
		if got, err := e.c.PauseOf(ctx, "t"); err != nil || got.Paused {
			t.Fatalf("PauseOf after resume: %+v, %v", got, err)
		}
		if c := mustClaim(t, e, "t", 10, time.Minute); c.Paused || len(c.Jobs) != 2 {
			t.Fatalf("claim after resume: paused %v, jobs %v", c.Paused, ids(c.Jobs))
		}
	})
}

// The store is written first: with it down nothing is written to Redis;
// with Redis down after it, the error says the intent is saved.
func TestPauseStoreFirst(t *testing.T) {
	ctx := testenv.Context(t)
	rdb, ns := testenv.Redis(t)
	c, err := dataplane.New(rdb, dataplane.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	sqlDown := errors.New("sql down")
	store := &memPauses{fail: sqlDown}
	if _, err := c.Pause(ctx, store, "t", "x"); !errors.Is(err, dataplane.ErrLedger) || !errors.Is(err, sqlDown) {
		t.Fatalf("pause with the store down: %v", err)
	}
	if st, err := c.PauseOf(ctx, "t"); err != nil || st.Paused {
		t.Fatalf("Redis written though the store failed: %+v, %v", st, err)
	}
	if _, err := c.Pause(ctx, &memPauses{}, "bad{topic", "x"); !errors.Is(err, dataplane.ErrInvalidTopic) {
		t.Fatalf("bad topic: %v", err)
	}

	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer down.Close()
	dc, err := dataplane.New(down, dataplane.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	store = &memPauses{}
	if _, err := dc.Pause(ctx, store, "t", "x"); !errors.Is(err, dataplane.ErrNotApplied) || errors.Is(err, dataplane.ErrLedger) {
		t.Fatalf("pause with Redis down: %v", err)
	}
	if st, _ := store.TopicState(ctx, "t"); !st.Paused {
		t.Fatal("the store lost the intent")
	}
	// The relay's ApplyPauses puts it into Redis once it answers.
	states, _ := store.TopicStates(ctx)
	if changed, err := c.ApplyPauses(ctx, states); err != nil || len(changed) != 1 {
		t.Fatalf("ApplyPauses: %v, %v", changed, err)
	}
	if st, err := c.PauseOf(ctx, "t"); err != nil || !st.Paused || st.By != "x" {
		t.Fatalf("after ApplyPauses: %+v, %v", st, err)
	}
	// A topic paused before its first job is listed, so the pause is seen.
	if topics, err := c.Topics(ctx); err != nil || !slices.Contains(topics, "t") {
		t.Fatalf("topics after the pause of a topic without jobs: %v, %v", topics, err)
	}
	if _, err := c.Pause(ctx, &memPauses{}, "fresh", "x"); err != nil {
		t.Fatal(err)
	}
	if topics, err := c.Topics(ctx); err != nil || !slices.Contains(topics, "fresh") {
		t.Fatalf("topics after pausing a topic without jobs: %v, %v", topics, err)
	}
}

// ApplyPauses writes only what differs, and never undoes a pause newer than
// the resume it applies.
func TestApplyPauses(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		store := &memPauses{}
		for _, topic := range []string{"p", "r", "newer"} {
			if _, err := e.c.Pause(ctx, store, topic, "x"); err != nil {
				t.Fatal(err)
			}
		}
		states := []dataplane.PauseState{
			{Topic: "p", Paused: true, At: 1, By: "x"},      // as Redis has it
			{Topic: "r", Paused: false, At: 100, By: "y"},   // resumed after Redis's pause (At 2)
			{Topic: "newer", Paused: false, At: 2, By: "y"}, // older than Redis's pause (At 3)
			{Topic: "lost", Paused: true, At: 7, By: "z"},   // Redis lost it
			{Topic: "never", Paused: false, At: 0, By: ""},  // nothing to do
		}
		changed, err := e.c.ApplyPauses(ctx, states)
		if err != nil {
			t.Fatal(err)
		}
		if len(changed) != 2 || changed[0] != "r" || changed[1] != "lost" {
			t.Fatalf("changed %v, want [r lost]", changed)
		}
		got, err := e.c.PausesOf(ctx, []string{"p", "r", "newer", "lost", "never"})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{"p": true, "r": false, "newer": true, "lost": true, "never": false}
		for topic, p := range want {
			if got[topic].Paused != p {
				t.Errorf("%s paused %v, want %v", topic, got[topic].Paused, p)
			}
		}
		if got["lost"].At != 7 || got["lost"].By != "z" {
			t.Errorf("lost's pause put back as %+v", got["lost"])
		}
		if changed, err := e.c.ApplyPauses(ctx, states); err != nil || len(changed) != 0 {
			t.Fatalf("second ApplyPauses changed %v, %v", changed, err)
		}
	})
}

// A worker of a paused topic: the running handler finishes, nothing else
// starts while jobs fall due; the resume's wake (not polling: MaxIdle is an
// hour) drains them, never more at once than the topic's concurrency.
func TestWorkerPauseResume(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	const conc = 3
	var running, peak atomic.Int64
	var ran testenv.Counter
	started := make(chan string, 100)
	release := make(chan struct{})
	w := newWorker(t, e, dataplane.WorkerConfig{MaxIdle: time.Hour})
	if err := w.Handle("t", dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		started <- j.ID
		if j.ID == "first" {
			<-release
		}
		ran.Add(1)
		return nil
	}), dataplane.TopicConfig{Concurrency: conc}); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	waitSubscribed(t, e.rdb, e.c.WakeChannel("t"))
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "first"})
	if id := <-started; id != "first" {
		t.Fatalf("started %s", id)
	}
	if _, err := e.c.Pause(ctx, e.led, "t", "test"); err != nil {
		t.Fatal(err)
	}
	enqueueMany(t, e.c, "t", "j", 30, nil)
	close(release) // the running handler finishes while paused
	ran.WaitAtLeast(ctx, t, 1, "the handler running at the pause")
	// Jobs keep falling due and wait: a wait of a few claim round trips
	// shows nothing starts (a bounded look, not synchronisation).
	select {
	case id := <-started:
		t.Fatalf("job %s started while the topic was paused", id)
	case <-time.After(300 * time.Millisecond):
	}
	if st, err := e.c.Stats(ctx, "t"); err != nil || st.DueNow != 30 {
		t.Fatalf("while paused: %+v, %v; want 30 due", st, err)
	}
	peak.Store(0)
	if _, err := e.c.Resume(ctx, e.led, "t", "test"); err != nil {
		t.Fatal(err)
	}
	ran.WaitAtLeast(ctx, t, 31, "the backlog after the resume")
	if p := peak.Load(); p > conc {
		t.Fatalf("%d handlers at once after the resume, concurrency %d", p, conc)
	}
}

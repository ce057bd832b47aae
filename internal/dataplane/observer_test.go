package dataplane_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
)

// recorder is an Observer and EnqueueObserver that counts what it is told.
type recorder struct {
	mu         sync.Mutex
	counts     map[string]int // "event/topic" -> jobs
	lateness   []time.Duration
	handled    int
	failed     int
	heartbeats map[string]int
	changed    testenv.Event // notified after every count and heartbeat
}

func newRecorder() *recorder {
	return &recorder{counts: map[string]int{}, heartbeats: map[string]int{}}
}

func (r *recorder) add(event, topic string, n int) {
	r.mu.Lock()
	r.counts[event+"/"+topic] += n
	r.mu.Unlock()
	r.changed.Notify()
}

func (r *recorder) count(event, topic string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[event+"/"+topic]
}

func (r *recorder) Enqueued(topic string, n int)  { r.add("enqueued", topic, n) }
func (r *recorder) Claimed(topic string, n int)   { r.add("claimed", topic, n) }
func (r *recorder) Completed(topic string, n int) { r.add("completed", topic, n) }
func (r *recorder) Retried(topic string, n int)   { r.add("retried", topic, n) }
func (r *recorder) Dead(topic string, n int)      { r.add("dead", topic, n) }
func (r *recorder) Released(topic string, n int)  { r.add("released", topic, n) }

func (r *recorder) Started(topic string, lateness time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lateness = append(r.lateness, lateness)
}

func (r *recorder) Handled(topic string, took time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handled++
	if err != nil {
		r.failed++
	}
}

func (r *recorder) Heartbeat(worker string, at time.Time) {
	r.mu.Lock()
	r.heartbeats[worker]++
	r.mu.Unlock()
	r.changed.Notify()
}

// The observer hears every claim, start, outcome and heartbeat, once each,
// with the lateness of each start.
func TestObserverSeesEveryEvent(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	rec := newRecorder()
	c, err := dataplane.New(rdb, dataplane.Config{Namespace: ns, Observer: rec})
	if err != nil {
		t.Fatal(err)
	}
	db := testenv.MySQL(t)
	e := wenv{env: env{c: c, rdb: rdb, ns: ns}, db: db, led: migratedLedger(t, db)}
	const topic = "obs"
	// ok:1..3 succeed, flaky fails once then succeeds, doomed dies at once.
	for _, id := range []string{"ok:1", "ok:2", "ok:3", "flaky", "doomed"} {
		mustEnqueue(t, e.env, topic, dataplane.NewJob{ID: id})
	}
	if _, err := c.Enqueue(testenv.Context(t), topic, dataplane.NewJob{ID: "ok:1"}); err != nil { // a duplicate: not counted
		t.Fatal(err)
	}
	w := newWorker(t, e, dataplane.WorkerConfig{
		ID:       "obs-worker",
		Observer: rec,
		Topic: dataplane.TopicConfig{Lease: 3 * time.Second, Heartbeat: 50 * time.Millisecond,
			Backoff: dataplane.Backoff{Base: 10 * time.Millisecond, Cap: 10 * time.Millisecond}},
	})
	var flakyOnce sync.Once
	err = w.Handle(topic, dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		switch j.ID {
		case "doomed":
			return dataplane.SkipRetry(errors.New("boom"))
		case "flaky":
			var fail error
			flakyOnce.Do(func() { fail = errors.New("once") })
			return fail
		}
		return nil
	}), dataplane.TopicConfig{})
	if err != nil {
		t.Fatal(err)
	}
	stop := startWorker(t, w)
	rec.changed.Wait(testenv.Context(t), t, "4 completions and 1 death", func() bool {
		return rec.count("completed", topic) == 4 && rec.count("dead", topic) == 1
	})
	rec.changed.Wait(testenv.Context(t), t, "heartbeats", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.heartbeats["obs-worker"] >= 2
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"enqueued": 5, "claimed": 6, "completed": 4, "retried": 1, "dead": 1, "released": 0}
	for event, n := range want {
		if got := rec.count(event, topic); got != n {
			t.Errorf("%s: %d, want %d", event, got, n)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.handled != 6 || rec.failed != 2 || len(rec.lateness) != 6 {
		t.Errorf("handled %d (failed %d), started %d: want 6 (2), 6", rec.handled, rec.failed, len(rec.lateness))
	}
	for _, l := range rec.lateness {
		if l < 0 || l > 10*time.Second {
			t.Errorf("lateness %s: want 0 to 10s", l)
		}
	}
}

// A job handed back unstarted because the ledger failed counts as released.
func TestObserverSeesReleases(t *testing.T) {
	e := newWEnv(t)
	rec := newRecorder()
	mustEnqueue(t, e.env, "rel", dataplane.NewJob{ID: "a"})
	w := newWorkerWith(t, e, failingLedger{ledgerops.Of(e.led)}, dataplane.WorkerConfig{
		Observer: rec,
		// Back off for long after the first failure. Up to two batches are
		// in the ledger at once, so the job may be claimed and released
		// twice before the fetcher backs off.
		ErrorBackoffMin: time.Minute, ErrorBackoffMax: time.Minute,
	})
	if err := w.Handle("rel", dataplane.HandlerFunc(func(context.Context, *dataplane.Job) error { return nil }), dataplane.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	stop := startWorker(t, w)
	rec.changed.Wait(testenv.Context(t), t, "a release", func() bool { return rec.count("released", "rel") >= 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if c, r := rec.count("claimed", "rel"), rec.count("released", "rel"); c != r || c < 1 || c > 2 {
		t.Errorf("claimed %d, released %d: want the same, 1 or 2", c, r)
	}
}

// failingLedger refuses to record.
type failingLedger struct{ dataplane.Ledger }

func (failingLedger) Record(context.Context, []*dataplane.Job, string) error {
	return errors.New("ledger down")
}

package dataplane

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// The pool's rule, slots set by hand: free slots dealt by stride
// scheduling among the asking member and the others that want work, in
// proportion to their weights; a member alone takes what it asks; a pool
// smaller than its members' count serves them in turn (each topic's share
// rounded up to a slot once let the one whose handler just finished take
// its slot back every time, and a third topic got 2% of the starts).
func TestPoolReserveDealsSlotsByWeight(t *testing.T) {
	_, w := idleWorker(t, &memLedger{rows: map[string]int{}})
	for _, topic := range []string{"a", "b", "c", "d", "e", "f"} {
		if err := w.Handle(topic, HandlerFunc(nil), TopicConfig{Concurrency: 2}); err != nil {
			t.Fatal(err)
		}
	}
	pools, err := newPools([]queue.Pool{
		{Name: "p", Concurrency: 8, Weights: map[string]int{"a": 3, "b": 1}},
		{Name: "small", Concurrency: 2, Weights: map[string]int{"d": 1, "e": 1, "f": 1}},
	}, w.topics)
	if err != nil {
		t.Fatal(err)
	}
	p := pools[0]
	a, b := w.topics["a"], w.topics["b"]
	if a.cfg.Concurrency != 8 || cap(a.work) < 8 || w.topics["c"].pool != nil {
		t.Fatalf("a member's concurrency %d (work %d), want the pool's 8; c in a pool: %v", a.cfg.Concurrency, cap(a.work), w.topics["c"].pool != nil)
	}
	take := func(tr *topicRunner, want int) int {
		return tr.pool.reserve(tr.member, tr.testPart(), want, func(n int) { tr.busy.Add(int64(n)) })
	}
	// Alone: what it asks, up to the pool.
	if n := take(a, 5); n != 5 || a.member.wanting() {
		t.Fatalf("a alone asking 5: took %d (wants %v), want 5", n, a.member.wanting())
	}
	if n := take(a, 100); n != 3 || !a.member.wanting() {
		t.Fatalf("a alone asking 100 of 3 free: took %d (wants %v), want 3 and wanting", n, a.member.wanting())
	}
	if n := take(a, 1); n != 0 {
		t.Fatalf("a in a full pool: took %d", n)
	}
	// Both want, the pool empty again: a is dealt 6 of 8, b's 2 stay free
	// for b; b then takes them.
	a.busy.Store(0)
	b.testPart().wants.Store(true)
	p.vt, a.member.pass, b.member.pass = 0, 0, 0
	if n := take(a, 100); n != 6 {
		t.Fatalf("a (weight 3) asking while b (weight 1) wants: took %d of 8, want 6", n)
	}
	if n := take(b, 100); n != 2 {
		t.Fatalf("b after a: took %d, want the 2 left", n)
	}
	// Over the handlers' turnover, the starts go 3 to 1.
	counts := map[*topicRunner]int{}
	for i := range 400 {
		done := a
		if i%2 == 1 {
			done = b
		}
		if done.busy.Load() == 0 {
			continue
		}
		done.busy.Add(-1) // a handler finished; its own fetcher asks first
		for _, tr := range []*topicRunner{done, a, b} {
			counts[tr] += take(tr, 100)
		}
	}
	if share := float64(counts[a]) / float64(counts[a]+counts[b]); share < 0.7 || share > 0.8 {
		t.Errorf("a got %d slots and b %d over the turnover: a's part %.2f, want 0.75", counts[a], counts[b], share)
	}

	// A member back from idle competes from the pool's virtual time, also
	// after a first ask the full pool held back (it then wants: its old
	// pass must not come back, or it would take every slot for a long
	// while: a benchmark saw the bulk topic get none of 2,000 starts).
	a.busy.Store(0)
	b.busy.Store(8)
	a.testPart().wants.Store(false)
	b.testPart().wants.Store(true)
	a.member.pass, b.member.pass, p.vt = 0, 100, 100
	if n := take(a, 100); n != 0 || !a.member.wanting() {
		t.Fatalf("a asking in a full pool: took %d (wants %v)", n, a.member.wanting())
	}
	b.busy.Store(0)
	if n := take(a, 100); n != 6 {
		t.Fatalf("a (weight 3), back from idle, asking while b (weight 1) wants: took %d of 8, want 6", n)
	}

	// Three topics in a pool of 2, all wanting, each finished handler's
	// fetcher asking first: each gets a third of the slots.
	d, e, f := w.topics["d"], w.topics["e"], w.topics["f"]
	for _, tr := range []*topicRunner{d, e, f} {
		tr.testPart().wants.Store(true)
	}
	got := map[*topicRunner]int{d: take(d, 100)}
	got[e] = take(e, 100)
	got[f] = take(f, 100)
	running := []*topicRunner{}
	for _, tr := range []*topicRunner{d, e, f} {
		for range got[tr] {
			running = append(running, tr)
		}
	}
	if len(running) != 2 {
		t.Fatalf("a pool of 2 dealt %d slots", len(running))
	}
	for range 300 {
		done := running[0]
		running = running[1:]
		done.busy.Add(-1)
		for _, tr := range []*topicRunner{done, d, e, f} {
			if n := take(tr, 100); n > 0 {
				got[tr] += n
				for range n {
					running = append(running, tr)
				}
			}
		}
	}
	for _, tr := range []*topicRunner{d, e, f} {
		if part := float64(got[tr]) / float64(got[d]+got[e]+got[f]); part < 0.3 || part > 0.37 {
			t.Errorf("%s got %.2f of the slots of a pool of 2 over 3 equal topics, want a third (%d %d %d)", tr.topic, part, got[d], got[e], got[f])
		}
	}

	if _, err := newPools([]queue.Pool{{Name: "p", Concurrency: 4, Weights: map[string]int{"a": 1, "nope": 1}}}, w.topics); err == nil ||
		!strings.Contains(err.Error(), "topic nope has no handler") {
		t.Errorf("a pool topic without a handler: %v", err)
	}
	// NewWorker refuses bad pools, naming the pool and the field.
	c, _ := idleWorker(t, &memLedger{rows: map[string]int{}})
	for _, bad := range []struct {
		pools []queue.Pool
		want  string
	}{
		{[]queue.Pool{{Name: "a b", Concurrency: 4, Weights: map[string]int{"a": 1}}}, `pool name "a b"`},
		{[]queue.Pool{{Name: "p", Concurrency: 0, Weights: map[string]int{"a": 1}}}, "pool p: concurrency 0"},
		{[]queue.Pool{{Name: "p", Concurrency: 4}}, "pool p: weights"},
		{[]queue.Pool{{Name: "p", Concurrency: 4, Weights: map[string]int{"a": 0}}}, "pool p: weight of a 0"},
		{[]queue.Pool{{Name: "p", Concurrency: 4, Weights: map[string]int{"a": 1}}, {Name: "q", Concurrency: 4, Weights: map[string]int{"a": 1}}}, "topic a is in pool p already"},
		{[]queue.Pool{{Name: "p", Concurrency: 4, Weights: map[string]int{"a": 1}}, {Name: "p", Concurrency: 4, Weights: map[string]int{"b": 1}}}, "pool p: named twice"},
	} {
		if _, err := NewWorker(c, &memLedger{rows: map[string]int{}}, WorkerConfig{Pools: bad.pools}); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("NewWorker with pools %+v: %v, want %q", bad.pools, err, bad.want)
		}
	}
}

// A worker's pool of 8 over two backlogged topics of weights 3 and 1, on
// real Redis: never more than 8 of their jobs run at once, and while both
// have due jobs the first gets about three quarters of the starts (each
// topic alone would get half, with its own concurrency). Then one topic
// alone uses the whole pool. Also with the heavier topic over 8
// partitions, all its jobs on one of them and idle fetchers waking every
// 5 ms: its empty partitions' claims must not say it wants nothing (they
// did, and the weights inverted: light finished first).
func TestPoolSplitsHandlersByWeight(t *testing.T) {
	t.Run("one partition each", func(t *testing.T) { poolSplit(t, 1, time.Second) })
	t.Run("heavy over 8 partitions, its jobs on one", func(t *testing.T) { poolSplit(t, 8, 5*time.Millisecond) })
}

func poolSplit(t *testing.T, heavyParts int, maxIdle time.Duration) {
	c, w := idleWorker(t, &memLedger{rows: map[string]int{}})
	w.cfg.Pools = []queue.Pool{{Name: "shared", Concurrency: 8, Weights: map[string]int{"heavy": 3, "light": 1}}}
	w.cfg.MaxIdle = maxIdle
	ctx := testenv.Context(t)
	if heavyParts > 1 {
		if _, err := c.SetPartitions(ctx, "heavy", heavyParts); err != nil {
			t.Fatal(err)
		}
	}
	const perTopic = 300
	for _, topic := range []string{"heavy", "light"} {
		jobs := make([]NewJob, perTopic)
		for i := range jobs {
			jobs[i] = NewJob{ID: fmt.Sprintf("%s-%d", topic, i), PartitionKey: "one"}
		}
		if _, err := c.EnqueueBatch(ctx, topic, jobs); err != nil {
			t.Fatal(err)
		}
	}
	var running, maxRunning, heavyStarts, lightStarts, lightAlone, maxLight, lightRunning atomic.Int64
	var lightAtHeavysEnd atomic.Int64
	lightAtHeavysEnd.Store(-1)
	raise := func(m *atomic.Int64, v int64) {
		for old := m.Load(); v > old && !m.CompareAndSwap(old, v); old = m.Load() {
		}
	}
	done := make(chan struct{})
	var doneOnce sync.Once
	run := func(f func()) HandlerFunc {
		return func(ctx context.Context, j *Job) error {
			raise(&maxRunning, running.Add(1))
			defer running.Add(-1)
			f()
			time.Sleep(5 * time.Millisecond) // the work: equal for both topics
			return nil
		}
	}
	if err := w.Handle("heavy", run(func() {
		if heavyStarts.Add(1) == perTopic {
			lightAtHeavysEnd.Store(lightStarts.Load())
		}
	}), TopicConfig{Concurrency: 1, Prefetch: -1}); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("light", HandlerFunc(func(ctx context.Context, j *Job) error {
		raise(&maxLight, lightRunning.Add(1))
		defer lightRunning.Add(-1)
		err := run(func() {
			n := lightStarts.Add(1)
			if heavyStarts.Load() == perTopic {
				lightAlone.Add(1)
			}
			if n == perTopic {
				doneOnce.Do(func() { close(done) })
			}
		})(ctx, j)
		return err
	}), TopicConfig{Concurrency: 1, Prefetch: -1}); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- w.Run(runCtx) }()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("not every job ran: heavy %d, light %d", heavyStarts.Load(), lightStarts.Load())
	}
	stop()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if m := maxRunning.Load(); m > 8 {
		t.Errorf("%d jobs ran at once, over the pool's 8", m)
	}
	light := lightAtHeavysEnd.Load()
	if light < 0 {
		t.Fatalf("light ran all its %d jobs before heavy (weight 3) started its %d: heavy had %d", perTopic, perTopic, heavyStarts.Load())
	}
	share := float64(perTopic) / float64(perTopic+light)
	t.Logf("heavy's share of the starts while both had work: %.2f (light %d); light alone: %d starts, at most %d at once", share, light, lightAlone.Load(), maxLight.Load())
	if share < 0.65 || share > 0.85 {
		t.Errorf("heavy got %.2f of the starts while both had due jobs (light started %d of its %d meanwhile), want about 0.75 (weights 3:1)", share, light, perTopic)
	}
	if lightAlone.Load() > 50 && maxLight.Load() < 7 {
		t.Errorf("light alone ran at most %d at once, want the whole pool of 8 (its share is 2)", maxLight.Load())
	}
}

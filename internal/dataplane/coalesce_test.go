package dataplane_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
)

// scriptGate is a go-redis hook that holds the first EVALSHA until
// released, so a test can queue enqueues behind a call in flight, and can
// fail a later one.
type scriptGate struct {
	mu       sync.Mutex
	calls    int
	held     chan struct{} // closed to let the held call go
	started  chan struct{} // gets a value when the held call reached Redis's door
	failCall int           // the script call (1, 2, ...) that fails with failErr
	failErr  error
}

func newScriptGate() *scriptGate {
	return &scriptGate{held: make(chan struct{}), started: make(chan struct{}, 1)}
}

func (g *scriptGate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *scriptGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (g *scriptGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "evalsha" && cmd.Name() != "eval" {
			return next(ctx, cmd)
		}
		g.mu.Lock()
		g.calls++
		first := g.calls == 1
		var fail error
		if g.calls == g.failCall {
			fail = g.failErr
		}
		g.mu.Unlock()
		if first {
			g.started <- struct{}{}
			<-g.held
		}
		if fail != nil {
			cmd.SetErr(fail)
			return fail
		}
		return next(ctx, cmd)
	}
}

// countingObserver counts script calls that wrote jobs, and the jobs.
type countingObserver struct {
	mu          sync.Mutex
	calls, jobs int
}

func (o *countingObserver) Enqueued(topic string, n int) {
	o.mu.Lock()
	o.calls++
	o.jobs += n
	o.mu.Unlock()
}

// gatedClient is a queue client on the shared Redis whose first script
// call is held by a scriptGate.
func gatedClient(t *testing.T, cfg dataplane.Config) (*dataplane.Client, *scriptGate, redis.UniversalClient, string) {
	t.Helper()
	rdb, ns := testenv.Redis(t)
	g := newScriptGate()
	rdb.AddHook(g)
	cfg.Namespace = ns
	c, err := dataplane.New(rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, g, rdb, ns
}

type enqueueAnswer struct {
	res dataplane.EnqueueResult
	err error
}

func enqueueAsync(ctx context.Context, c *dataplane.Client, topic string, j dataplane.NewJob) <-chan enqueueAnswer {
	ch := make(chan enqueueAnswer, 1)
	go func() {
		r, err := c.Enqueue(ctx, topic, j)
		ch <- enqueueAnswer{r, err}
	}()
	return ch
}

// Callers behind a call in flight go out as one script call, and each gets
// what it would have got alone: created, or a duplicate with the first
// job's due time, inside the same coalesced call too.
func TestCoalescedEnqueuesEachGetTheirOwnResult(t *testing.T) {
	ctx := testenv.Context(t)
	obs := &countingObserver{}
	c, g, _, _ := gatedClient(t, dataplane.Config{Observer: obs, CoalesceInFlight: 1})
	first := enqueueAsync(ctx, c, "t", dataplane.NewJob{ID: "first", Delay: time.Hour})
	testenv.Receive(ctx, t, g.started, "first script call")

	// 20 callers: ids a0..a9 twice each (the second of each pair is a
	// duplicate inside the coalesced call), and "first" again.
	var answers []<-chan enqueueAnswer
	var jobs []dataplane.NewJob
	for i := range 20 {
		j := dataplane.NewJob{ID: fmt.Sprintf("a%d", i%10), Delay: time.Duration(i%10+1) * time.Minute}
		jobs = append(jobs, j)
		answers = append(answers, enqueueAsync(ctx, c, "t", j))
	}
	dupFirst := enqueueAsync(ctx, c, "t", dataplane.NewJob{ID: "first", Delay: time.Minute})
	// Nothing of theirs has gone out: the first call is still held.
	testenv.WaitFor(ctx, t, "21 callers queued", func() bool { return len(dupFirst) == 0 && c.EnqueueWaiting("t") == 21 })
	close(g.held)

	a := testenv.Receive(ctx, t, first, "first answer")
	if a.err != nil || a.res.Duplicate {
		t.Fatalf("first: %+v", a)
	}
	due := map[string]int64{}
	created := map[string]int{}
	for i, ch := range answers {
		got := testenv.Receive(ctx, t, ch, "answer")
		if got.err != nil {
			t.Fatalf("caller %d: %v", i, got.err)
		}
		if got.res.ID != jobs[i].ID {
			t.Fatalf("caller %d got the result of %s", i, got.res.ID)
		}
		if !got.res.Duplicate {
			created[got.res.ID]++
			due[got.res.ID] = got.res.RunAt
		}
	}
	for i, ch := range answers {
		_ = ch
		id := jobs[i].ID
		if created[id] != 1 {
			t.Fatalf("%s created %d times, want exactly once", id, created[id])
		}
	}
	// Each duplicate reports the created job's due time.
	for i := range 20 {
		info, err := c.Get(ctx, "t", jobs[i].ID)
		if err != nil || info.Score != due[jobs[i].ID] {
			t.Fatalf("%s: score %v (%v), results said %d", jobs[i].ID, info, err, due[jobs[i].ID])
		}
	}
	d := testenv.Receive(ctx, t, dupFirst, "duplicate of first")
	if d.err != nil || !d.res.Duplicate || d.res.RunAt != a.res.RunAt {
		t.Fatalf("second enqueue of first: %+v, want a duplicate due at %d", d, a.res.RunAt)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.calls != 2 || obs.jobs != 11 {
		t.Fatalf("%d script calls wrote %d jobs; want 2 calls (the first alone, then the 21 waiting together) and 11 jobs", obs.calls, obs.jobs)
	}
}

// A failed coalesced call fails each of its callers with the error a lone
// call would return, and writes nothing; a caller that gives up while
// waiting writes nothing and fails nobody else.
func TestCoalescedEnqueueErrorsAndCancellation(t *testing.T) {
	ctx := testenv.Context(t)
	c, g, _, _ := gatedClient(t, dataplane.Config{CoalesceInFlight: 1})
	down := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
	g.failCall, g.failErr = 2, down // the coalesced call behind the first
	first := enqueueAsync(ctx, c, "t", dataplane.NewJob{ID: "first"})
	testenv.Receive(ctx, t, g.started, "first script call")

	gone, cancel := context.WithCancel(ctx)
	quitter := enqueueAsync(gone, c, "t", dataplane.NewJob{ID: "quitter"})
	testenv.WaitFor(ctx, t, "quitter queued", func() bool { return c.EnqueueWaiting("t") == 1 })
	failing := []<-chan enqueueAnswer{
		enqueueAsync(ctx, c, "t", dataplane.NewJob{ID: "s1"}),
		enqueueAsync(ctx, c, "t", dataplane.NewJob{ID: "s2"}),
	}
	testenv.WaitFor(ctx, t, "3 callers queued", func() bool { return c.EnqueueWaiting("t") == 3 })
	cancel()
	if a := testenv.Receive(ctx, t, quitter, "quitter"); !errors.Is(a.err, context.Canceled) {
		t.Fatalf("quitter: %+v, want context.Canceled", a)
	}
	testenv.WaitFor(ctx, t, "quitter gone from the queue", func() bool { return c.EnqueueWaiting("t") == 2 })
	close(g.held)
	if a := testenv.Receive(ctx, t, first, "first"); a.err != nil {
		t.Fatal(a.err)
	}
	for _, ch := range failing {
		a := testenv.Receive(ctx, t, ch, "caller of the failed call")
		var op *net.OpError
		if !errors.As(a.err, &op) {
			t.Fatalf("caller of the failed call: %+v, want the *net.OpError", a)
		}
	}
	for _, id := range []string{"quitter", "s1", "s2"} {
		if info, err := c.Get(ctx, "t", id); err != nil || info.State != dataplane.StateUnknown {
			t.Fatalf("%s: %+v, %v: want unknown, never written", id, info, err)
		}
	}
	// The topic keeps working.
	if r, err := c.Enqueue(ctx, "t", dataplane.NewJob{ID: "s1"}); err != nil || r.Duplicate {
		t.Fatalf("enqueue after the failure: %+v, %v", r, err)
	}
}

// With two calls in flight (the default), a call that finds one in flight
// still goes out at once; the next ones wait for a place.
func TestCoalesceTwoInFlight(t *testing.T) {
	ctx := testenv.Context(t)
	obs := &countingObserver{}
	c, g, _, _ := gatedClient(t, dataplane.Config{Observer: obs})
	first := enqueueAsync(ctx, c, "t", dataplane.NewJob{ID: "first"})
	testenv.Receive(ctx, t, g.started, "first script call")
	if r, err := c.Enqueue(ctx, "t", dataplane.NewJob{ID: "second"}); err != nil || r.Duplicate {
		t.Fatalf("second, while the first is held: %+v, %v", r, err)
	}
	if c.EnqueueWaiting("t") != 0 {
		t.Fatal("the second call waited")
	}
	close(g.held)
	testenv.Receive(ctx, t, first, "first")
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.calls != 2 {
		t.Fatalf("%d script calls, want 2", obs.calls)
	}
}

// Coalescing off: each call makes its own script call, all in parallel.
func TestCoalesceOff(t *testing.T) {
	ctx := testenv.Context(t)
	obs := &countingObserver{}
	c, g, _, _ := gatedClient(t, dataplane.Config{Observer: obs, Coalesce: -1})
	first := enqueueAsync(ctx, c, "t", dataplane.NewJob{ID: "first"})
	testenv.Receive(ctx, t, g.started, "first script call")
	for i := range 5 {
		if _, err := c.Enqueue(ctx, "t", dataplane.NewJob{ID: fmt.Sprint("o", i)}); err != nil {
			t.Fatal(err) // goes out while the first is held: not queued behind it
		}
	}
	close(g.held)
	testenv.Receive(ctx, t, first, "first")
	if obs.calls != 6 {
		t.Fatalf("%d script calls, want 6", obs.calls)
	}
}

// Many goroutines enqueueing overlapping ids at once: each id is created
// exactly once, whichever coalesced call it landed in, and every duplicate
// reports the created job's due time.
func TestCoalescedEnqueueUnderLoad(t *testing.T) {
	ctx := testenv.Context(t)
	rdb, ns := testenv.Redis(t)
	c, err := dataplane.New(rdb, dataplane.Config{Namespace: ns, Coalesce: 7})
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, perG, ids = 40, 50, 300
	type got struct {
		id  string
		res dataplane.EnqueueResult
	}
	results := make(chan got, 2*goroutines*perG) // a batch call gives two
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				id := fmt.Sprint("j", (g*perG+i*7)%ids)
				if i%5 == 0 {
					br, err := c.EnqueueBatch(ctx, "t", []dataplane.NewJob{{ID: id, Delay: time.Hour}, {ID: id + "b", Delay: time.Hour}})
					if err != nil {
						t.Error(err)
						return
					}
					for _, r := range br {
						results <- got{r.ID, dataplane.EnqueueResult{ID: r.ID, Duplicate: r.Status == dataplane.BatchDuplicate, RunAt: r.RunAt}}
					}
					continue
				}
				r, err := c.Enqueue(ctx, "t", dataplane.NewJob{ID: id, Delay: time.Hour})
				if err != nil {
					t.Error(err)
					return
				}
				results <- got{id, r}
			}
		})
	}
	wg.Wait()
	close(results)
	created := map[string]int64{}
	var dups []got
	for r := range results {
		if r.res.ID != r.id {
			t.Fatalf("asked for %s, got the result of %s", r.id, r.res.ID)
		}
		if r.res.Duplicate {
			dups = append(dups, r)
			continue
		}
		if _, ok := created[r.id]; ok {
			t.Fatalf("%s created twice", r.id)
		}
		created[r.id] = r.res.RunAt
	}
	for _, d := range dups {
		if due, ok := created[d.id]; !ok || d.res.RunAt != due {
			t.Fatalf("duplicate of %s reported due %d, created due %d (created: %v)", d.id, d.res.RunAt, due, ok)
		}
	}
	n, err := rdb.ZCard(ctx, ns+":{t}:due").Result()
	if err != nil || n != int64(len(created)) {
		t.Fatalf("%d jobs due in Redis, %d created", n, len(created))
	}
}

package coalesce_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/delayq/delayq/internal/coalesce"
	"github.com/delayq/delayq/internal/testenv"
)

// gate is a Func whose calls are recorded and, while held, block until
// released one by one: it lets a test queue callers behind a call in flight.
type gate struct {
	mu      sync.Mutex
	calls   [][]int
	ctxs    []context.Context
	held    bool
	started chan int      // each call's first item, as it starts
	release chan error    // one value lets one held call finish, with that error
	fail    map[int]error // an item that makes its call fail
}

func newGate(held bool) *gate {
	return &gate{held: held, started: make(chan int, 100), release: make(chan error)}
}

func (g *gate) run(ctx context.Context, in []int) ([]string, error) {
	g.mu.Lock()
	g.calls = append(g.calls, slices.Clone(in))
	g.ctxs = append(g.ctxs, ctx)
	held := g.held
	g.mu.Unlock()
	g.started <- in[0]
	if held {
		select {
		case err := <-g.release:
			if err != nil {
				return nil, err
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	out := make([]string, len(in))
	for i, v := range in {
		out[i] = fmt.Sprint("r", v)
	}
	return out, nil
}

func (g *gate) batches() [][]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.calls)
}

type answer struct {
	out []string
	err error
}

// doAsync calls b.Do in a goroutine and returns where its answer arrives.
func doAsync(ctx context.Context, b *coalesce.Batcher[int, string], in ...int) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		out, err := b.Do(ctx, in)
		ch <- answer{out, err}
	}()
	return ch
}

// waiting blocks until n callers wait behind the call in flight.
func waiting(ctx context.Context, t *testing.T, b *coalesce.Batcher[int, string], n int) {
	t.Helper()
	testenv.WaitFor(ctx, t, fmt.Sprintf("%d callers waiting", n), func() bool { return b.Waiting() == n },
		func() string { return fmt.Sprint(b.Waiting(), " waiting") })
}

type ctxKey struct{}

func TestLoneCallRunsInlineWithItsContext(t *testing.T) {
	g := newGate(false)
	b := coalesce.New(coalesce.Limits[int]{Items: 10, Depth: 1}, g.run)
	ctx := context.WithValue(testenv.Context(t), ctxKey{}, "mine")
	out, err := b.Do(ctx, []int{7})
	if err != nil || !slices.Equal(out, []string{"r7"}) {
		t.Fatalf("Do = %v, %v", out, err)
	}
	if got := g.ctxs[0]; got != ctx {
		t.Fatalf("a lone call ran with another context (%v): it should be the caller's own", got.Value(ctxKey{}))
	}
	// Twice in a row: the batcher went idle after the first.
	if _, err := b.Do(ctx, []int{8}); err != nil {
		t.Fatal(err)
	}
	if got := g.batches(); !slices.EqualFunc(got, [][]int{{7}, {8}}, slices.Equal) {
		t.Fatalf("calls = %v, want [[7] [8]]", got)
	}
}

func TestCallersWaitingBehindOneCallGoTogetherInOrder(t *testing.T) {
	ctx := testenv.Context(t)
	g := newGate(true)
	b := coalesce.New(coalesce.Limits[int]{Items: 100, Depth: 1}, g.run)
	first := doAsync(ctx, b, 0)
	testenv.Receive(ctx, t, g.started, "first call")
	var answers []<-chan answer
	for i := 1; i <= 5; i++ {
		answers = append(answers, doAsync(ctx, b, i*10, i*10+1))
		waiting(ctx, t, b, i) // one at a time, so arrival order is known
	}
	g.release <- nil
	if a := testenv.Receive(ctx, t, first, "first answer"); a.err != nil || !slices.Equal(a.out, []string{"r0"}) {
		t.Fatalf("first = %+v", a)
	}
	testenv.Receive(ctx, t, g.started, "coalesced call")
	g.release <- nil
	for i, ch := range answers {
		v := (i + 1) * 10
		want := []string{fmt.Sprint("r", v), fmt.Sprint("r", v+1)}
		if a := testenv.Receive(ctx, t, ch, "answer"); a.err != nil || !slices.Equal(a.out, want) {
			t.Fatalf("caller %d got %+v, want %v", i+1, a, want)
		}
	}
	want := [][]int{{0}, {10, 11, 20, 21, 30, 31, 40, 41, 50, 51}}
	if got := g.batches(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("calls = %v, want %v (one coalesced call, in arrival order)", got, want)
	}
}

func TestBatchesAreBoundedAndFair(t *testing.T) {
	ctx := testenv.Context(t)
	g := newGate(true)
	b := coalesce.New(coalesce.Limits[int]{Items: 3, Depth: 1}, g.run)
	first := doAsync(ctx, b, 0)
	testenv.Receive(ctx, t, g.started, "first call")
	var answers []<-chan answer
	ins := [][]int{{1}, {2, 3}, {4}, {5, 6, 7, 8}, {9}, {10}}
	for i, in := range ins {
		answers = append(answers, doAsync(ctx, b, in...))
		waiting(ctx, t, b, i+1)
	}
	for i := range 5 { // the first call, then one per batch
		if i > 0 {
			testenv.Receive(ctx, t, g.started, "next batch")
		}
		g.release <- nil
	}
	testenv.Receive(ctx, t, first, "first answer")
	for i, ch := range answers {
		if a := testenv.Receive(ctx, t, ch, "answer"); a.err != nil || len(a.out) != len(ins[i]) {
			t.Fatalf("caller %d got %+v", i, a)
		}
	}
	// At most 3 items a call, whole callers only, never out of order; the
	// caller with 4 items runs alone.
	want := [][]int{{0}, {1, 2, 3}, {4}, {5, 6, 7, 8}, {9, 10}}
	if got := g.batches(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("calls = %v, want %v", got, want)
	}
}

func TestAnErrorFailsOnlyTheCallersOfItsCall(t *testing.T) {
	ctx := testenv.Context(t)
	g := newGate(true)
	b := coalesce.New(coalesce.Limits[int]{Items: 2, Depth: 1}, g.run)
	first := doAsync(ctx, b, 0)
	testenv.Receive(ctx, t, g.started, "first call")
	a1, a2 := doAsync(ctx, b, 1), doAsync(ctx, b, 2)
	waiting(ctx, t, b, 2)
	a3 := doAsync(ctx, b, 3)
	waiting(ctx, t, b, 3)
	g.release <- nil
	testenv.Receive(ctx, t, first, "first answer")
	testenv.Receive(ctx, t, g.started, "batch {1,2}")
	boom := errors.New("redis down")
	g.release <- boom
	for _, ch := range []<-chan answer{a1, a2} {
		if a := testenv.Receive(ctx, t, ch, "answer"); !errors.Is(a.err, boom) || a.out != nil {
			t.Fatalf("a caller of the failed call got %+v, want its error", a)
		}
	}
	testenv.Receive(ctx, t, g.started, "batch {3}")
	g.release <- nil
	if a := testenv.Receive(ctx, t, a3, "answer"); a.err != nil || !slices.Equal(a.out, []string{"r3"}) {
		t.Fatalf("the next call's caller got %+v", a)
	}
}

func TestShortResultIsAnError(t *testing.T) {
	b := coalesce.New(coalesce.Limits[int]{Items: 10, Depth: 1}, func(ctx context.Context, in []int) ([]string, error) { return []string{"x"}, nil })
	if _, err := b.Do(testenv.Context(t), []int{1, 2}); !errors.Is(err, coalesce.ErrShortResult) {
		t.Fatalf("err = %v, want ErrShortResult", err)
	}
}

func TestCancelledWaiterIsNeverRunAndFailsNobodyElse(t *testing.T) {
	ctx := testenv.Context(t)
	g := newGate(true)
	b := coalesce.New(coalesce.Limits[int]{Items: 10, Depth: 1}, g.run)
	first := doAsync(ctx, b, 0)
	testenv.Receive(ctx, t, g.started, "first call")
	cctx, cancel := context.WithCancel(ctx)
	a1 := doAsync(ctx, b, 1)
	waiting(ctx, t, b, 1)
	gone := doAsync(cctx, b, 2)
	waiting(ctx, t, b, 2)
	a3 := doAsync(ctx, b, 3)
	waiting(ctx, t, b, 3)
	cancel()
	if a := testenv.Receive(ctx, t, gone, "cancelled answer"); !errors.Is(a.err, context.Canceled) {
		t.Fatalf("cancelled caller got %+v, want context.Canceled", a)
	}
	waiting(ctx, t, b, 2)
	g.release <- nil
	testenv.Receive(ctx, t, first, "first answer")
	testenv.Receive(ctx, t, g.started, "coalesced call")
	g.release <- nil
	for _, ch := range []<-chan answer{a1, a3} {
		if a := testenv.Receive(ctx, t, ch, "answer"); a.err != nil {
			t.Fatalf("a caller next to the cancelled one failed: %v", a.err)
		}
	}
	if got, want := g.batches(), [][]int{{0}, {1, 3}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("calls = %v, want %v: the cancelled caller's item must never run", got, want)
	}
	// A context that ended before Do never runs either.
	if _, err := b.Do(cctx, []int{4}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Do with an ended context = %v", err)
	}
	if n := len(g.batches()); n != 2 {
		t.Fatalf("%d calls, want still 2", n)
	}
}

// A caller whose call is in flight waits for it (it may still be reading
// the caller's items); the call is cancelled only when all its callers
// have given up.
func TestCallInFlightEndsOnlyWhenAllItsCallersGiveUp(t *testing.T) {
	ctx := testenv.Context(t)
	g := newGate(true)
	b := coalesce.New(coalesce.Limits[int]{Items: 10, Depth: 1}, g.run)
	first := doAsync(ctx, b, 0)
	testenv.Receive(ctx, t, g.started, "first call")
	c1, cancel1 := context.WithCancel(ctx)
	c2, cancel2 := context.WithCancel(ctx)
	a1, a2 := doAsync(c1, b, 1), doAsync(c2, b, 2)
	waiting(ctx, t, b, 2)
	g.release <- nil
	testenv.Receive(ctx, t, first, "first answer")
	testenv.Receive(ctx, t, g.started, "coalesced call")
	shared := g.ctxs[1]

	cancel1()
	if shared.Err() != nil {
		t.Fatal("the coalesced call was cancelled while one of its callers still waits")
	}
	cancel2()
	<-shared.Done() // the last caller gave up: nobody wants the result
	// Both waited for the call they were in, and got its outcome.
	for _, ch := range []<-chan answer{a1, a2} {
		if a := testenv.Receive(ctx, t, ch, "answer"); !errors.Is(a.err, context.Canceled) {
			t.Fatalf("got %+v, want the call's own context.Canceled", a)
		}
	}
	// The batcher is usable afterwards.
	g.mu.Lock()
	g.held = false
	g.mu.Unlock()
	if out, err := b.Do(ctx, []int{9}); err != nil {
		t.Fatal(err)
	} else if len(out) != 1 {
		t.Fatal(out)
	}
}

func TestPanicInALoneCallDoesNotStrandTheNext(t *testing.T) {
	ctx := testenv.Context(t)
	calls := 0
	b := coalesce.New(coalesce.Limits[int]{Items: 10, Depth: 1}, func(ctx context.Context, in []int) ([]string, error) {
		calls++
		if in[0] == 0 {
			panic("handler bug")
		}
		return []string{"ok"}, nil
	})
	func() {
		defer func() { _ = recover() }()
		_, _ = b.Do(ctx, []int{0})
	}()
	if out, err := b.Do(ctx, []int{1}); err != nil || out[0] != "ok" {
		t.Fatalf("after a panic: %v, %v", out, err)
	}
}

// Many goroutines hammering one batcher: everyone gets exactly their own
// results, and under -race no data race shows.
func TestManyCallersEachGetTheirOwn(t *testing.T) {
	ctx := testenv.Context(t)
	var mu sync.Mutex
	maxSeen := 0
	b := coalesce.New(coalesce.Limits[int]{Items: 16, Depth: 1}, func(ctx context.Context, in []int) ([]string, error) {
		mu.Lock()
		maxSeen = max(maxSeen, len(in))
		mu.Unlock()
		out := make([]string, len(in))
		for i, v := range in {
			out[i] = fmt.Sprint(v)
		}
		return out, nil
	})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 64 {
		wg.Go(func() {
			for i := range 200 {
				v := g*1000 + i
				out, err := b.Do(ctx, []int{v, -v})
				if err != nil || len(out) != 2 || out[0] != fmt.Sprint(v) || out[1] != fmt.Sprint(-v) {
					errs <- fmt.Errorf("caller %d got %v, %v", v, out, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if maxSeen > 16 {
		t.Fatalf("a call carried %d items, bound is 16", maxSeen)
	}
}

// With a depth of 2, a second caller goes out at once while the first is
// in flight; a third waits, then goes with whoever queued behind it.
func TestDepthTwoKeepsTwoCallsInFlight(t *testing.T) {
	ctx := testenv.Context(t)
	g := newGate(true)
	b := coalesce.New(coalesce.Limits[int]{Items: 10, Depth: 2}, g.run)
	a0 := doAsync(ctx, b, 0)
	testenv.Receive(ctx, t, g.started, "first call")
	a1 := doAsync(ctx, b, 1)
	testenv.Receive(ctx, t, g.started, "second call, next to the first")
	a2 := doAsync(ctx, b, 2)
	waiting(ctx, t, b, 1)
	a3 := doAsync(ctx, b, 3)
	waiting(ctx, t, b, 2)
	g.release <- nil // one of the two in flight ends; a flusher takes its place
	testenv.Receive(ctx, t, g.started, "third call")
	g.release <- nil
	g.release <- nil
	for i, ch := range []<-chan answer{a0, a1, a2, a3} {
		if a := testenv.Receive(ctx, t, ch, "answer"); a.err != nil || len(a.out) != 1 || a.out[0] != fmt.Sprint("r", i) {
			t.Fatalf("caller %d got %+v", i, a)
		}
	}
	if got, want := g.batches(), [][]int{{0}, {1}, {2, 3}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("calls = %v, want %v", got, want)
	}
}

// A cost budget (bytes) closes a batch before the item bound does; a
// caller over it alone still runs.
func TestCostBoundsABatch(t *testing.T) {
	ctx := testenv.Context(t)
	g := newGate(true)
	b := coalesce.New(coalesce.Limits[int]{Items: 100, Depth: 1, Cost: 10, CostOf: func(v int) int { return v % 100 }}, g.run)
	first := doAsync(ctx, b, 0)
	testenv.Receive(ctx, t, g.started, "first call")
	var answers []<-chan answer
	for i, in := range [][]int{{4}, {5}, {2}, {50}, {1}} { // costs 4, 5, 2, 50, 1
		answers = append(answers, doAsync(ctx, b, in...))
		waiting(ctx, t, b, i+1)
	}
	for i := range 5 { // the first call, then four batches
		if i > 0 {
			testenv.Receive(ctx, t, g.started, "next batch")
		}
		g.release <- nil
	}
	testenv.Receive(ctx, t, first, "first")
	for _, ch := range answers {
		if a := testenv.Receive(ctx, t, ch, "answer"); a.err != nil {
			t.Fatal(a.err)
		}
	}
	if got, want := g.batches(), [][]int{{0}, {4, 5}, {2}, {50}, {1}}; !slices.EqualFunc(got, want, slices.Equal) {
		// {4,5} costs 9; adding 2 would make 11 > 10; 50 alone is over.
		t.Fatalf("calls = %v, want %v", got, want)
	}
}

// A panic in a coalesced call, which runs in a flusher goroutine, fails its
// callers with ErrPanic instead of crashing the process, and the batcher
// goes on.
func TestPanicInACoalescedCallFailsItsCallers(t *testing.T) {
	ctx := testenv.Context(t)
	g := newGate(true)
	b := coalesce.New(coalesce.Limits[int]{Items: 10, Depth: 1}, func(ctx context.Context, in []int) ([]string, error) {
		if in[0] == 13 {
			panic("observer bug")
		}
		return g.run(ctx, in)
	})
	first := doAsync(ctx, b, 0)
	testenv.Receive(ctx, t, g.started, "first call")
	bad := doAsync(ctx, b, 13, 14)
	waiting(ctx, t, b, 1)
	g.release <- nil
	testenv.Receive(ctx, t, first, "first")
	if a := testenv.Receive(ctx, t, bad, "panicked call"); !errors.Is(a.err, coalesce.ErrPanic) {
		t.Fatalf("got %+v, want ErrPanic", a)
	}
	g.mu.Lock()
	g.held = false
	g.mu.Unlock()
	if out, err := b.Do(ctx, []int{1}); err != nil || len(out) != 1 {
		t.Fatalf("after the panic: %v, %v", out, err)
	}
}

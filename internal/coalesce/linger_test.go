package coalesce_test

import (
	"slices"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/coalesce"
	"github.com/delayq/delayq/internal/testenv"
)

// negative items are lazy in these tests.
func lazyIfNegative(v int) bool { return v < 0 }

func TestLazyCallerWaitsForTheNextUrgentOne(t *testing.T) {
	ctx := testenv.Context(t)
	g := newGate(false)
	// A linger far longer than the test: only the urgent caller can end it.
	b := coalesce.New(coalesce.Limits[int]{Items: 100, Depth: 1, Lazy: lazyIfNegative, Linger: time.Hour}, g.run)
	lazy := doAsync(ctx, b, -1, -2)
	waiting(ctx, t, b, 1)
	if got := g.batches(); len(got) != 0 {
		t.Fatalf("a lazy caller started a call on its own: %v", got)
	}
	if out, err := b.Do(ctx, []int{5}); err != nil || !slices.Equal(out, []string{"r5"}) {
		t.Fatalf("urgent Do = %v, %v", out, err)
	}
	if a := testenv.Receive(ctx, t, lazy, "lazy answer"); a.err != nil || !slices.Equal(a.out, []string{"r-1", "r-2"}) {
		t.Fatalf("lazy = %+v", a)
	}
	if got, want := g.batches(), [][]int{{-1, -2, 5}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("calls = %v, want %v: the lazy caller rides with the urgent one", got, want)
	}
}

func TestLazyCallerGoesAloneAfterItsLinger(t *testing.T) {
	ctx := testenv.Context(t)
	g := newGate(false)
	b := coalesce.New(coalesce.Limits[int]{Items: 100, Depth: 1, Lazy: lazyIfNegative, Linger: time.Millisecond}, g.run)
	if out, err := b.Do(ctx, []int{-3}); err != nil || !slices.Equal(out, []string{"r-3"}) {
		t.Fatalf("lazy Do = %v, %v", out, err)
	}
	// Then an urgent caller alone still runs inline: nothing lingers.
	if _, err := b.Do(ctx, []int{4}); err != nil {
		t.Fatal(err)
	}
	if got, want := g.batches(), [][]int{{-3}, {4}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("calls = %v, want %v", got, want)
	}
}

func TestLazyCallersBehindACallLingerForTheNextUrgentOne(t *testing.T) {
	ctx := testenv.Context(t)
	g := newGate(true)
	b := coalesce.New(coalesce.Limits[int]{Items: 100, Depth: 1, Lazy: lazyIfNegative, Linger: time.Hour}, g.run)
	first := doAsync(ctx, b, 1)
	testenv.Receive(ctx, t, g.started, "first call")
	lazy := doAsync(ctx, b, -1)
	waiting(ctx, t, b, 1)
	g.release <- nil
	testenv.Receive(ctx, t, first, "first answer")
	// The call in flight ended with only a lazy caller waiting: it lingers
	// instead of starting a call of its own.
	if got := g.batches(); len(got) != 1 {
		t.Fatalf("calls = %v: the lazy caller should linger", got)
	}
	urgent := doAsync(ctx, b, 2)
	testenv.Receive(ctx, t, g.started, "joint call")
	g.release <- nil
	testenv.Receive(ctx, t, urgent, "urgent answer")
	testenv.Receive(ctx, t, lazy, "lazy answer")
	if got, want := g.batches(), [][]int{{1}, {-1, 2}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("calls = %v, want %v", got, want)
	}
}

func TestUrgentCallersBehindACallGoAtOnce(t *testing.T) {
	ctx := testenv.Context(t)
	g := newGate(true)
	b := coalesce.New(coalesce.Limits[int]{Items: 100, Depth: 1, Lazy: lazyIfNegative, Linger: time.Hour}, g.run)
	first := doAsync(ctx, b, 1)
	testenv.Receive(ctx, t, g.started, "first call")
	lazy := doAsync(ctx, b, -1)
	waiting(ctx, t, b, 1)
	urgent := doAsync(ctx, b, 2)
	waiting(ctx, t, b, 2)
	g.release <- nil
	testenv.Receive(ctx, t, first, "first answer")
	testenv.Receive(ctx, t, g.started, "next call")
	g.release <- nil
	testenv.Receive(ctx, t, urgent, "urgent answer")
	testenv.Receive(ctx, t, lazy, "lazy answer")
	if got, want := g.batches(), [][]int{{1}, {-1, 2}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("calls = %v, want %v", got, want)
	}
}

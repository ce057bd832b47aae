// Package coalesce groups concurrent calls into one: the calls that arrive
// while one is in flight wait, then go together as a single call of the
// underlying function (a group commit). It serves delayq's enqueue, where one
// Redis script call for fifty callers costs Redis little more than one for a
// single caller.
//
// There is no timer: a call that finds room in flight (fewer than the
// batcher's depth of calls) and nobody waiting runs at once, in its own
// goroutine and with its own context, so a lone caller sees no added
// latency. Batching only ever happens under load, and then for free: the
// callers would have waited for the calls in flight anyway.
package coalesce

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Func runs one coalesced call: in holds every waiting caller's items, in
// arrival order, and the result must hold one Out per item, in the same
// order. An error fails every caller of this call (and only them); an error
// that concerns one item belongs in its Out.
type Func[In, Out any] func(ctx context.Context, in []In) ([]Out, error)

// ErrShortResult is returned to the callers of a call whose Func returned
// a number of results other than its number of items.
var ErrShortResult = errors.New("coalesce: result count does not match item count")

// ErrPanic is returned to the callers of a coalesced call whose Func
// panicked in a flusher goroutine.
var ErrPanic = errors.New("coalesce: the call panicked")

// Batcher coalesces the calls of one key (delayq: one topic). Its zero
// value is not usable; see New.
type Batcher[In, Out any] struct {
	run Func[In, Out]
	lim Limits[In]

	mu       sync.Mutex
	inFlight int
	waiting  []*call[In, Out] // FIFO
	queued   atomic.Int64     // len(waiting), readable without mu
	// urgent counts the waiting callers that do not linger; linger is
	// armed while only lingering callers wait and a place in flight is
	// free (Limits.Linger).
	urgent int
	linger *time.Timer
}

// call is one caller's share of a coalesced call.
type call[In, Out any] struct {
	ctx context.Context
	in  []In
	// lazy: the caller may linger (Limits.Lazy); at is when it arrived.
	lazy bool
	at   time.Time
	out  []Out
	err  error
	done chan struct{} // closed once out/err are set
}

// Limits bound a Batcher. A coalesced call takes whole callers, in arrival
// order, while their items fit both Items and Cost; a single caller over
// either bound still runs, alone.
type Limits[In any] struct {
	// Items is the most items one call carries (at least 1).
	Items int
	// Cost, when CostOf is set, is the most total cost one call carries:
	// a byte budget, so that many large items do not make one huge call.
	Cost   int
	CostOf func(In) int
	// Depth is how many calls may be in flight at once (at least 1). With
	// 2, the next batch goes out while the one before is still on the
	// wire, so the server is not idle while the client hands out results.
	Depth int
	// Lazy, if set, tells the callers whose items can wait a little for
	// company: a lazy caller that finds room in flight does not start a
	// call at once but lingers up to Linger, so that the next non-lazy
	// caller takes it along (delayq's ledger: settlements wait to ride
	// with the next record, which cannot wait). Non-lazy callers never
	// linger, and a lazy one waits no longer than Linger for a place.
	Lazy   func(In) bool
	Linger time.Duration
}

// New returns a Batcher that runs run within lim.
func New[In, Out any](lim Limits[In], run Func[In, Out]) *Batcher[In, Out] {
	lim.Items, lim.Depth = max(lim.Items, 1), max(lim.Depth, 1)
	return &Batcher[In, Out]{run: run, lim: lim}
}

// Waiting says how many callers are waiting for the call in flight.
func (b *Batcher[In, Out]) Waiting() int { return int(b.queued.Load()) }

// Do runs in, coalesced with the calls of other goroutines that arrive
// while one is in flight, and returns its own items' results.
//
// A caller whose ctx ends while it waits returns ctx's error and its items
// are never passed to Func. One whose call is already in flight waits for
// it and gets its result, as a call of its own would (Func may still be
// reading the caller's items until then). Either way the other callers are
// not affected: a coalesced call's context is cancelled only when every
// one of its callers has given up.
func (b *Batcher[In, Out]) Do(ctx context.Context, in []In) ([]Out, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lazy := b.lazy(in)
	b.mu.Lock()
	if b.inFlight < b.lim.Depth && len(b.waiting) == 0 && !lazy {
		// Room in flight and nobody ahead: run now, in this goroutine,
		// with this context.
		b.inFlight++
		b.mu.Unlock()
		out, err := b.runInline(ctx, in)
		return out, err
	}
	c := &call[In, Out]{ctx: ctx, in: in, lazy: lazy, at: time.Now(), done: make(chan struct{})}
	b.waiting = append(b.waiting, c)
	b.queued.Add(1)
	if !lazy {
		b.urgent++
	}
	if b.inFlight < b.lim.Depth {
		// Only lingering callers were waiting for room that is free: this
		// one takes them along now, or (lazy too) lingers with them.
		b.startOrLinger()
	}
	b.mu.Unlock()

	select {
	case <-c.done:
		return c.out, c.err
	case <-ctx.Done():
		b.mu.Lock()
		removed := b.remove(c)
		b.mu.Unlock()
		if removed {
			return nil, ctx.Err()
		}
		<-c.done // in flight: its outcome is this caller's
		return c.out, c.err
	}
}

// runInline runs a lone caller's items, then hands whatever queued up
// meanwhile to a flusher goroutine, so that this caller returns at once.
func (b *Batcher[In, Out]) runInline(ctx context.Context, in []In) (out []Out, err error) {
	defer b.handOff() // also when run panics: the waiting must not be stranded
	out, err = b.run(ctx, in)
	if err == nil && len(out) != len(in) {
		return nil, fmt.Errorf("%w: %d results for %d items", ErrShortResult, len(out), len(in))
	}
	return out, err
}

// handOff ends a call in flight: if callers wait, a flusher takes its
// place in flight.
func (b *Batcher[In, Out]) handOff() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inFlight--
	b.startOrLinger()
}

// startOrLinger starts a flusher for the waiting callers if one of them
// may not linger, or the oldest has lingered Linger already; otherwise it
// arms the linger timer for that moment. Call with mu held and a place in
// flight free.
func (b *Batcher[In, Out]) startOrLinger() {
	if len(b.waiting) == 0 {
		return
	}
	wait := time.Duration(0)
	if b.urgent == 0 {
		wait = b.lim.Linger - time.Since(b.waiting[0].at)
	}
	if wait <= 0 {
		if b.linger != nil {
			b.linger.Stop()
			b.linger = nil
		}
		b.inFlight++
		go b.flush()
		return
	}
	if b.linger == nil {
		b.linger = time.AfterFunc(wait, b.lingered)
	}
}

// lingered ends a linger: the waiting callers go out if a place is free.
func (b *Batcher[In, Out]) lingered() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.linger = nil
	if b.inFlight < b.lim.Depth {
		b.startOrLinger()
	}
}

// lazy says whether a caller with items in may linger.
func (b *Batcher[In, Out]) lazy(in []In) bool {
	if b.lim.Lazy == nil || b.lim.Linger <= 0 {
		return false
	}
	for _, v := range in {
		if !b.lim.Lazy(v) {
			return false
		}
	}
	return true
}

// remove takes c out of the waiting list and reports whether it was
// there (it is not once a flusher took it). Call with mu held.
func (b *Batcher[In, Out]) remove(c *call[In, Out]) bool {
	i := slices.Index(b.waiting, c)
	if i < 0 {
		return false
	}
	if !c.lazy {
		b.urgent--
	}
	b.waiting = slices.Delete(b.waiting, i, i+1) // zeroes the freed slot
	b.queued.Add(-1)
	return true
}

// flush runs the next batch of waiting callers, then hands its place in
// flight on (handOff): to a flusher of the next batch, or to a linger.
func (b *Batcher[In, Out]) flush() {
	batch := b.take()
	if batch == nil {
		return
	}
	defer b.handOff()
	b.runBatch(batch)
}

// take removes the next batch from the waiting list, in arrival order:
// callers while their items fit in max (always at least one), skipping
// those whose context already ended. It returns nil, and gives up the
// flusher's place in flight, when nobody waits.
func (b *Batcher[In, Out]) take() []*call[In, Out] {
	b.mu.Lock()
	defer b.mu.Unlock()
	var batch []*call[In, Out]
	n, cost, taken := 0, 0, 0
	for _, c := range b.waiting {
		cc := b.cost(c.in)
		if len(batch) > 0 && (n+len(c.in) > b.lim.Items || b.lim.CostOf != nil && cost+cc > b.lim.Cost) {
			break
		}
		taken++
		if !c.lazy {
			b.urgent--
		}
		if err := c.ctx.Err(); err != nil {
			c.err = err
			close(c.done)
			continue
		}
		batch = append(batch, c)
		n += len(c.in)
		cost += cc
	}
	rest := copy(b.waiting, b.waiting[taken:])
	clear(b.waiting[rest:])
	b.waiting = b.waiting[:rest]
	if rest == 0 && cap(b.waiting) > 1024 {
		b.waiting = nil // a burst's backing array is not kept for good
	}
	b.queued.Store(int64(rest))
	if len(batch) == 0 && rest == 0 {
		b.inFlight--
		return nil
	}
	return batch
}

// cost is the total cost of one caller's items (0 without CostOf).
func (b *Batcher[In, Out]) cost(in []In) int {
	if b.lim.CostOf == nil {
		return 0
	}
	n := 0
	for _, v := range in {
		n += b.lim.CostOf(v)
	}
	return n
}

// runBatch runs one coalesced call and gives each caller its share. A
// panic in run fails the batch's callers instead of the process: it
// happens in a flusher goroutine, where nobody could recover it.
func (b *Batcher[In, Out]) runBatch(batch []*call[In, Out]) {
	if len(batch) == 0 {
		return
	}
	ctx, cancel := sharedContext(batch)
	defer cancel()
	answered := false
	defer func() {
		if answered {
			return
		}
		err := fmt.Errorf("%w: %v", ErrPanic, recover())
		for _, c := range batch {
			c.err = err
			close(c.done)
		}
	}()
	var in []In
	if len(batch) == 1 {
		in = batch[0].in
	} else {
		n := 0
		for _, c := range batch {
			n += len(c.in)
		}
		in = make([]In, 0, n)
		for _, c := range batch {
			in = append(in, c.in...)
		}
	}
	out, err := b.run(ctx, in)
	answered = true
	if err == nil && len(out) != len(in) {
		err = fmt.Errorf("%w: %d results for %d items", ErrShortResult, len(out), len(in))
	}
	at := 0
	for _, c := range batch {
		if err != nil {
			c.err = err
		} else {
			c.out = out[at : at+len(c.in) : at+len(c.in)]
		}
		at += len(c.in)
		close(c.done)
	}
}

// sharedContext is the context of a coalesced call: it carries the first
// caller's values, and it is cancelled only when every caller's context has
// ended, so no single caller's cancellation fails the others.
func sharedContext[In, Out any](batch []*call[In, Out]) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].ctx))
	live := atomic.Int64{}
	live.Store(int64(len(batch)))
	stops := make([]func() bool, 0, len(batch))
	for _, c := range batch {
		if c.ctx.Done() == nil {
			// This caller can never give up, so neither can the call.
			for _, stop := range stops {
				stop()
			}
			return ctx, cancel
		}
		stops = append(stops, context.AfterFunc(c.ctx, func() {
			if live.Add(-1) == 0 {
				cancel()
			}
		}))
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

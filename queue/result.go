package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
)

// MaxResultBytes is the most a job's result may take, as JSON. A result is
// a receipt for the job's history row (an order number closed, a count, an
// id the handler made), not a store: more belongs in the service's own
// tables. The bound keeps each history row small enough that a drain's
// batched completion stays one cheap statement.
const MaxResultBytes = 4096

// ErrResultTooLarge is returned by RecordResult for a result over
// MaxResultBytes.
var ErrResultTooLarge = errors.New("queue: job result over 4096 bytes of JSON")

// ErrNoResultRecorder is returned by RecordResult with a context that is not
// a running job's (a handler called outside a worker, say).
var ErrNoResultRecorder = errors.New("queue: no job result can be recorded here: not a running job's context")

// resultKey is the context key of a running job's result slot.
type resultKey struct{}

// resultSlot holds what a handler recorded. A handler may record from
// goroutines of its own, hence the lock.
type resultSlot struct {
	mu  sync.Mutex
	val []byte
}

// RecordResult keeps v, as JSON, as the result of the job whose handler
// ctx belongs to: when the handler then succeeds, the job's history row
// (Ledger.History, `delayq history`, the dashboard's job page) carries it.
// A later call replaces an earlier one; a failed run's result is dropped
// with the run. It returns ErrResultTooLarge for a result whose JSON is over
// MaxResultBytes, and ErrNoResultRecorder outside a running job.
//
// With transactional completion (ledger.Transactional) record the result
// before the transaction commits: the history row is written in it.
func RecordResult(ctx context.Context, v any) error {
	slot, _ := ctx.Value(resultKey{}).(*resultSlot)
	if slot == nil {
		return ErrNoResultRecorder
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("queue: job result: %w", err)
	}
	if len(b) > MaxResultBytes {
		return fmt.Errorf("%w (%d bytes)", ErrResultTooLarge, len(b))
	}
	slot.mu.Lock()
	slot.val = b
	slot.mu.Unlock()
	return nil
}

// WithResultRecorder returns a context in which RecordResult keeps a
// result, and a function that returns it (nil: none recorded).
//
// Plumbing: the worker calls it around each handler run; a service never
// does.
func WithResultRecorder(ctx context.Context) (context.Context, func() []byte) {
	slot := &resultSlot{}
	return context.WithValue(ctx, resultKey{}, slot), func() []byte {
		slot.mu.Lock()
		defer slot.mu.Unlock()
		return slot.val
	}
}

// RecordedResult returns the result recorded so far in ctx, a running
// job's context (nil: none, or not a job's context).
//
// Plumbing: transactional completion reads it to write the history row in
// the handler's transaction.
func RecordedResult(ctx context.Context) []byte {
	if ctx == nil {
		return nil
	}
	slot, _ := ctx.Value(resultKey{}).(*resultSlot)
	if slot == nil {
		return nil
	}
	slot.mu.Lock()
	defer slot.mu.Unlock()
	return slot.val
}

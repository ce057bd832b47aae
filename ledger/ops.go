package ledger

import (
	"context"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/seal"
	"github.com/delayq/delayq/queue"
)

// ops is the ledger as delayq's own packages use it: its public methods,
// and the steps of a claim's life and of recovery that no service calls
// itself (the worker's record, complete, retry, bury, extend, unclaim; the
// coordinators' lookup and reschedule; the recoverer's and the relay's
// reads; a periodic tick's claim).
type ops struct{ *Ledger }

// The worker's view of the ledger is dataplane.Ledger, the reschedule's
// dataplane.RescheduleLedger; ops must stay both.
var (
	_ dataplane.Ledger           = ops{}
	_ dataplane.RescheduleLedger = ops{}
	_ dataplane.TickStore        = ops{}
)

// Internal returns the ledger's internal steps, for delayq's engine and
// program (seal.Open). Its key cannot be made outside this module.
func (l *Ledger) Internal(seal.Key) any { return ops{l} }

func (o ops) Record(ctx context.Context, jobs []*queue.Job, worker string) error {
	return o.record(ctx, jobs, worker)
}

func (o ops) Complete(ctx context.Context, refs []queue.Ref) error { return o.complete(ctx, refs) }

func (o ops) DropClaim(ctx context.Context, ref queue.Ref, worker string) error {
	return o.dropClaim(ctx, ref, worker)
}

func (o ops) Unclaim(ctx context.Context, refs []queue.Ref) error { return o.unclaim(ctx, refs) }

func (o ops) Extend(ctx context.Context, refs []queue.Ref, leaseUntil int64) error {
	return o.extend(ctx, refs, leaseUntil)
}

func (o ops) MarkRetrying(ctx context.Context, retries []dataplane.RetryRequest) error {
	return o.markRetrying(ctx, retries)
}

func (o ops) Bury(ctx context.Context, dead []queue.DeadJob) error { return o.bury(ctx, dead) }

func (o ops) Lookup(ctx context.Context, topic, id string) (*dataplane.RestoreRow, error) {
	return o.lookup(ctx, topic, id)
}

func (o ops) Reschedule(ctx context.Context, ref queue.Ref, from, runAt int64) (bool, error) {
	return o.reschedule(ctx, ref, from, runAt)
}

func (o ops) Claims(ctx context.Context, ids []int64) (map[int64]Claim, error) {
	return o.claims(ctx, ids)
}

func (o ops) Scheduled(ctx context.Context, topic string, after Cursor, upTo int64, limit int) ([]Entry, error) {
	return o.scheduled(ctx, topic, after, upTo, limit)
}

func (o ops) EnqueueTick(ctx context.Context, q *dataplane.Client, topic, name string, tick int64, j queue.NewJob) (queue.TickResult, error) {
	return o.enqueueTick(ctx, q, topic, name, tick, j)
}

func (o ops) Transaction(ctx context.Context, q *dataplane.Client, fn func(tx *gorm.DB, enq *TxEnqueuer) error) error {
	return o.enqueueTransaction(ctx, q, fn)
}

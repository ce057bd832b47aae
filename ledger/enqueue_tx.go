package ledger

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/queue"
)

// Transaction runs fn in a transaction on the ledger's database, with a
// TxEnqueuer that enqueues jobs of durable topics in that same transaction:
// business rows and the jobs they need commit together or not at all (an
// order and the job that closes it if unpaid). fn's error, or a failed
// commit, rolls everything back and is returned; nothing reaches Redis.
// After the commit, the jobs are pushed to Redis (dataplane.Client.Push); a push
// that fails is not an error of the transaction, which did commit: the
// relay pushes those jobs (docs/design.md §4.11).
//
// The transaction is not run again when the server rolls it back (a
// deadlock, a Galera certification conflict, a Galera node not ready): fn
// may have done more than SQL. The error then wraps ErrRetryable: nothing
// committed, and the caller may run it again. See the engine's
// ExampleEngine_Transaction.
func (l ops) Transaction(ctx context.Context, q *dataplane.Client, fn func(tx *gorm.DB, enq *TxEnqueuer) error) error {
	return l.TransactionOn(ctx, q, -1, fn)
}

// TransactionOn is Transaction on ledger shard shard of q's store
// (docs/design.md §7.1, "Ledger shards"): this ledger is that shard, and
// the enqueuer refuses, before writing anything, a job whose partition is
// on another shard (queue.ErrOtherShard). A shard below 0 is Transaction.
func (l ops) TransactionOn(ctx context.Context, q *dataplane.Client, shard int, fn func(tx *gorm.DB, enq *TxEnqueuer) error) error {
	if q == nil {
		return errors.New("ledger: transaction: a *dataplane.Client is required")
	}
	var enq *TxEnqueuer
	err := l.conn(ctx).Transaction(func(tx *gorm.DB) error {
		enq = &TxEnqueuer{q: q, store: l.Tx(tx)}
		if shard >= 0 {
			enq.store = dataplane.PinShard(enq.store, shard)
		}
		return fn(tx, enq)
	})
	if err != nil {
		return retryableTx(err)
	}
	for _, s := range enq.staged {
		// Its error is the relay's business, and Push bounds it by
		// queue.Config.PushTimeout.
		_ = q.Push(ctx, s)
	}
	return nil
}

// TxEnqueuer enqueues jobs inside the transaction of Engine.Transaction.
// Like the transaction, it is for fn's goroutine only, and only until fn
// returns.
type TxEnqueuer struct {
	q      *dataplane.Client
	store  queue.DurableStore
	staged []*dataplane.Staged
}

// Enqueue enqueues one job to a durable topic in the transaction
// (the engine's EnqueueTx): its result is final once the transaction
// commits. An invalid job returns its *queue.ValidationError, and a topic
// that is not durable queue.ErrNotDurable; neither writes anything.
func (e *TxEnqueuer) Enqueue(ctx context.Context, topic string, j queue.NewJob) (queue.BatchResult, error) {
	out, err := e.EnqueueBatch(ctx, topic, []queue.NewJob{j})
	if err != nil {
		return queue.BatchResult{}, err
	}
	if out[0].Status == queue.BatchInvalid {
		return out[0], out[0].Err
	}
	return out[0], nil
}

// EnqueueBatch enqueues jobs to a durable topic in the transaction, one
// result per job as Engine.EnqueueBatch gives them (invalid jobs are
// reported and skipped).
func (e *TxEnqueuer) EnqueueBatch(ctx context.Context, topic string, jobs []queue.NewJob) ([]queue.BatchResult, error) {
	s, err := e.q.EnqueueTx(ctx, e.store, topic, jobs...)
	if err != nil {
		return nil, fmt.Errorf("ledger: enqueue in a transaction: %w", err)
	}
	e.staged = append(e.staged, s)
	return s.Results(), nil
}

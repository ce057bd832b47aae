package engine

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// Enqueue schedules one job: on a durable topic it is
// committed to the store before Enqueue returns. The id is the
// idempotency key; bad input is a *queue.ValidationError naming the field,
// and writes nothing.
func (e *Engine) Enqueue(ctx context.Context, topic string, j queue.NewJob) (queue.EnqueueResult, error) {
	return e.q.Enqueue(ctx, topic, j)
}

// EnqueueBatch schedules up to Queue.MaxBatch jobs of one topic in one
// round trip, each with its own result.
func (e *Engine) EnqueueBatch(ctx context.Context, topic string, jobs []queue.NewJob) ([]queue.BatchResult, error) {
	return e.q.EnqueueBatch(ctx, topic, jobs)
}

// Transaction runs fn in a transaction on the store's database with an
// enqueuer whose jobs (of durable topics) commit or roll back with fn's
// own writes; after the commit they are pushed to Redis at once. fn's error rolls everything back.
//
// Over ledger shards (Config.Shards) the transaction is on the home shard,
// the store's database: see TransactionOn.
func (e *Engine) Transaction(ctx context.Context, fn func(tx *gorm.DB, enq *ledger.TxEnqueuer) error) error {
	return e.TransactionOn(ctx, 0, fn)
}

// TransactionOn is Transaction on ledger shard shard's database (0 is the
// store given to New, i > 0 Config.Shards[i-1]). The enqueuer writes each
// job to its partition in the transaction, and refuses, before writing
// anything, a job whose partition is on another shard
// (queue.ErrOtherShard, naming partition_key): a shop whose own tables are
// sharded by customer, with the same function (ShardOfKey), commits a
// customer's order and its close job together on the customer's shard by
// giving the job the customer as its partition key, on a topic whose
// partition count is a multiple of the shards (docs/design.md §7.1).
func (e *Engine) TransactionOn(ctx context.Context, shard int, fn func(tx *gorm.DB, enq *ledger.TxEnqueuer) error) error {
	if shard < 0 || shard >= e.LedgerShards() {
		return fmt.Errorf("engine: transaction on shard %d: there are %d (0 to %d)", shard, e.LedgerShards(), e.LedgerShards()-1)
	}
	if e.shards == nil {
		return e.ops.Transaction(ctx, e.q, fn)
	}
	return e.shards.Shard(shard).TransactionOn(ctx, e.q, shard, fn)
}

// LedgerShards is the number of ledger shards: 1 + len(Config.Shards).
func (e *Engine) LedgerShards() int { return len(e.ledgers) }

// LedgerShard is ledger shard i (0: the store given to New), or nil out of
// range.
func (e *Engine) LedgerShard(i int) *ledger.Ledger {
	if i < 0 || i >= len(e.ledgers) {
		return nil
	}
	return e.ledgers[i]
}

// ShardOfKey is the ledger shard of the jobs whose partition key is key,
// on every topic whose partition count is a multiple of LedgerShards
// (FNV-1a of key modulo the shards): the shard to shard one's own rows of
// that key on, and to open TransactionOn.
func (e *Engine) ShardOfKey(key string) int { return dataplane.ShardOfKey(key, e.LedgerShards()) }

// EnqueueTx enqueues jobs of a durable topic inside tx, a transaction the
// caller runs on the store's database (with tx's context: gorm's
// db.WithContext(ctx).Transaction): they exist exactly when tx commits.
// An id already taken is not an error (that job stands); the first job
// that is not valid is returned as its *queue.ValidationError, and the
// valid ones stay written in tx, so return the error to roll back. A topic
// that is not durable is queue.ErrNotDurable. The jobs reach Redis through
// the relay, within Relay.Every + Relay.Grace of their due time at the
// latest; use Transaction to push them at the commit. Over ledger shards
// tx is the home shard's, and a job whose partition is on another shard
// is refused (queue.ErrOtherShard) before anything is written: use
// TransactionOn for the others.
func (e *Engine) EnqueueTx(tx *gorm.DB, topic string, jobs ...queue.NewJob) error {
	var store queue.DurableStore = e.store.Tx(tx)
	if e.shards != nil {
		// Over ledger shards tx is the home shard's (the store's
		// database): its jobs must be too.
		store = dataplane.PinShard(store, 0)
	}
	s, err := e.q.EnqueueTx(tx.Statement.Context, store, topic, jobs...)
	if err != nil {
		return err
	}
	for _, r := range s.Results() {
		if r.Status == queue.BatchInvalid {
			return r.Err
		}
	}
	return nil
}

// Find returns a job wherever it is: in Redis, or, for a durable job that
// Redis does not hold (beyond the horizon, not pushed yet, lost), as its
// row in the store says. A job that neither store
// holds (never enqueued, finished, cancelled or purged) is
// queue.StateUnknown.
func (e *Engine) Find(ctx context.Context, topic, id string) (*queue.JobInfo, error) {
	return e.q.Find(ctx, e.steps(), topic, id)
}

// Cancel removes a job that waits to run, from Redis and from the store:
// queue.ErrInFlight while a worker holds it (CancelRunning cancels its
// run), queue.ErrDead once it died.
func (e *Engine) Cancel(ctx context.Context, topic, id string) (*queue.Job, error) {
	return e.q.Cancel(ctx, e.steps(), topic, id)
}

// CancelRunning asks the worker that holds a job (its handler running, or
// claimed and about to start), in whichever process, to cancel its run,
// and returns the job and when the cancel was first asked (Unix ms,
// Redis's clock). The handler's context is cancelled with cause
// queue.ErrCancelRequested; a run that then ends in an error ends
// cancelled, never retried (history outcome cancelled), and one that
// returns nil has done its work and ends succeeded. A handler that
// ignores its context is not stopped: Get shows the job in flight with
// its CancelRequestedAt until it returns. queue.ErrNotFound when no worker
// holds the job: Cancel removes a waiting one.
func (e *Engine) CancelRunning(ctx context.Context, topic, id string) (*queue.Job, int64, error) {
	return e.q.CancelRunning(ctx, e.steps(), topic, id)
}

// Reschedule moves the due time of a job that waits: to queue.RescheduleAt, RescheduleIn or RescheduleBy. A job
// never runs before the last due time a Reschedule returned.
func (e *Engine) Reschedule(ctx context.Context, topic, id string, to queue.When) (*queue.Rescheduled, error) {
	return e.q.Reschedule(ctx, e.steps(), topic, id, to)
}

// Pause stops every worker of the deployment from claiming topic's jobs
// until Resume, on behalf of actor (kept with the state); the state is
// written to the store first, so that no Redis loss lifts it.
// Every call is logged as an audit line (topic, action, actor, time,
// changed).
func (e *Engine) Pause(ctx context.Context, topic, actor string) (queue.PauseState, error) {
	return e.q.SetPaused(ctx, e.store, e.log, topic, actor, true)
}

// Resume lifts a Pause, audited like it.
func (e *Engine) Resume(ctx context.Context, topic, actor string) (queue.PauseState, error) {
	return e.q.SetPaused(ctx, e.store, e.log, topic, actor, false)
}

// Stats counts one topic's jobs in Redis at one instant of Redis's clock.
func (e *Engine) Stats(ctx context.Context, topic string) (queue.Stats, error) {
	return e.q.Stats(ctx, topic)
}

// List pages through one topic's jobs in Redis in one state.
func (e *Engine) List(ctx context.Context, topic string, state queue.State, offset, limit int) (*queue.Page, error) {
	return e.q.List(ctx, topic, state, offset, limit)
}

// Topics lists the topics that have keys in Redis.
func (e *Engine) Topics(ctx context.Context) ([]string, error) {
	return e.q.Topics(ctx)
}

// Workers lists the worker processes of the namespace's registry, every
// engine's worker included, live or gone (docs/design.md §4.19).
func (e *Engine) Workers(ctx context.Context) ([]queue.WorkerInfo, error) {
	return e.q.Workers(ctx)
}

// History reads the finished jobs f selects from the ledger's job history
// (docs/design.md §4.18): over ledger shards, every shard's, merged
// (ledger.HistoryShards).
func (e *Engine) History(ctx context.Context, f ledger.HistoryFilter) ([]ledger.HistoryRow, string, error) {
	return ledger.HistoryShards(ctx, e.ledgers, f)
}

// RequeueDead makes one dead job wait to run again, now, with fresh
// attempts.
func (e *Engine) RequeueDead(ctx context.Context, topic, id string) error {
	return e.q.RequeueDead(ctx, topic, id)
}

// RequeueAllDead requeues every dead job of topic and says how many.
func (e *Engine) RequeueAllDead(ctx context.Context, topic string) (int, error) {
	return e.q.RequeueAllDead(ctx, topic)
}

// PurgeDead deletes the dead jobs of topic that died at or before before
// (Unix ms) and says how many.
func (e *Engine) PurgeDead(ctx context.Context, topic string, before int64) (int, error) {
	return e.q.PurgeDead(ctx, topic, before)
}

// DeleteDead deletes one dead job for good and turns its history rows to
// purged; queue.ErrNotFound when the job is not dead (nothing is touched).
// SQL failing after Redis's delete is returned wrapped: the job is gone,
// its history still says dead.
func (e *Engine) DeleteDead(ctx context.Context, topic, id string) error {
	if err := e.q.DeleteDead(ctx, topic, id); err != nil {
		return err
	}
	// The history rows are on the shard of the job's partition: every
	// shard's (the mark covers all the topic's partitions).
	for s, l := range e.ledgers {
		if _, err := l.MarkPurgedID(ctx, topic, id); err != nil {
			return fmt.Errorf("engine: dead job %s/%s deleted, its history not marked purged (ledger shard %d): %w", topic, id, s, err)
		}
	}
	return nil
}

// The engine is the Enqueuer a handler's follow-up jobs go through.
var _ queue.Enqueuer = (*Engine)(nil)

// Package ledgerops gives delayq's own packages the ledger's internal steps:
// the worker's writes, the coordinators' lookups, the recoverer's and the
// relay's scans, a periodic tick's claim and the transactional enqueue. A
// *ledger.Ledger keeps them off its public method set (behind a seal.Key),
// so that a service sees only what it calls itself.
package ledgerops

import (
	"context"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/internal/seal"
	"github.com/delayq/delayq/ledger"
)

// Ops is a ledger as the engine's parts use it.
type Ops interface {
	dataplane.Ledger
	dataplane.RescheduleLedger
	dataplane.TickStore
	recoverer.Store
	recoverer.RelayStore
	// Transaction runs fn in a transaction whose enqueued jobs commit with
	// fn's writes and are pushed through q after the commit.
	Transaction(ctx context.Context, q *dataplane.Client, fn func(tx *gorm.DB, enq *ledger.TxEnqueuer) error) error
	// TransactionOn is Transaction on ledger shard shard of q's store:
	// a job whose partition is on another shard is refused.
	TransactionOn(ctx context.Context, q *dataplane.Client, shard int, fn func(tx *gorm.DB, enq *ledger.TxEnqueuer) error) error
}

// Router is what the steps of a job's life need of a ledger (the data
// plane's enqueue, the worker's writes, the coordinators' lookups and
// reschedules, periodic ticks): Ops, and Shards, which sends each to its
// shard.
type Router interface {
	dataplane.Ledger
	dataplane.RescheduleLedger
	dataplane.TickStore
}

// Of returns l's internal steps.
func Of(l *ledger.Ledger) Ops { return seal.Open[Ops](l) }

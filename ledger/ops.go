package ledger

import (
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/seal"
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

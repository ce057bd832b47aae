package ledgerops_test

import (
	"testing"

	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/seal"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
)

// A ledger's internal steps are every store the engine's parts take
// (Of would panic at the engine's start otherwise); a caller without the
// key gets nothing.
func TestALedgerOpensAsEveryStore(t *testing.T) {
	led, err := ledger.New(testenv.SQLite(t), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ops := led.Internal(seal.Key{})
	if _, ok := ops.(ledgerops.Ops); !ok {
		t.Fatalf("%T lacks a method of ledgerops.Ops", ops)
	}
	if _, ok := any(led).(ledgerops.Ops); ok {
		t.Fatal("*ledger.Ledger has the internal steps among its public methods")
	}
}

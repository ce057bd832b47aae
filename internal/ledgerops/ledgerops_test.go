package ledgerops_test

import (
	"testing"

	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
)

// A ledger opens as every store the engine's parts take; a mistake here
// would panic at the engine's start.
func TestALedgerOpensAsEveryStore(t *testing.T) {
	led, err := ledger.New(testenv.SQLite(t), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ledgerops.Of(led) == nil {
		t.Fatal("no internal steps")
	}
}

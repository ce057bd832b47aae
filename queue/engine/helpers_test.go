package engine_test

import (
	"testing"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
)

// migratedLedger returns a ledger on db (a database of the test's own),
// its tables created.
func migratedLedger(t *testing.T, db *gorm.DB) *ledger.Ledger {
	t.Helper()
	store, err := ledger.New(db, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(testenv.Context(t)); err != nil {
		t.Fatal(err)
	}
	return store
}

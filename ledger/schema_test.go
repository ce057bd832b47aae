package ledger

import (
	"context"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/testenv"
)

// TestSchemaSQLMatchesMigrations proves deployments/mysql/schema.sql and
// the migrations create the same tables on MariaDB: one fresh database gets
// the SQL file, another Migrate, and their columns (name, position, type,
// nullability, default, collation, extra), indexes, engine and collation
// must agree, as must SHOW CREATE TABLE. The file records every migration
// as applied, so Migrate over its tables writes nothing.
func TestSchemaSQLMatchesMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fromFile := testenv.MatchSchemaFile(t, "../deployments/mysql/schema.sql", func(db *gorm.DB) error {
		newLedger(t, db, Options{})
		return nil
	}, ledgerTables...)

	log := &stmtLog{}
	l, err := New(fromFile.Session(&gorm.Session{Logger: log}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := l.MigrationStatus(ctx)
	if err != nil || !st.UpToDate() || st.Version != st.Latest {
		t.Fatalf("schema.sql does not record every migration: %+v, %v", st, err)
	}
	for _, m := range st.Migrations {
		if m.How != MigrationSchemaFile || m.Name != mustMigrations(t)[m.Version-1].Name {
			t.Errorf("schema.sql records %+v", m)
		}
	}
	if err := l.Migrate(ctx); err != nil {
		t.Fatalf("Migrate over schema.sql: %v", err)
	}
	for _, q := range log.Take() {
		if v := verbs([]string{q})[0]; v == "ALTER" || v == "CREATE" || v == "DROP" || v == "INSERT" {
			t.Errorf("Migrate over schema.sql changed the schema: %s", q)
		}
	}
}

// TestMigrateIsIdempotent checks that a second Migrate changes nothing, and
// that two prefixes live side by side in one database (SQLite's index names
// are global to the database, so they must carry the prefix).
func TestMigrateIsIdempotent(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, log := newLedger(t, db, Options{})
		if err := l.Migrate(ctx); err != nil {
			t.Fatalf("second Migrate: %v", err)
		}
		for _, q := range log.Take() {
			if v := verbs([]string{q})[0]; v == "ALTER" || v == "CREATE" || v == "DROP" || v == "INSERT" {
				t.Errorf("second Migrate changed the schema: %s", q)
			}
		}

		other, _ := newLedger(t, db, Options{TablePrefix: "tenant2_"})
		if other.LedgerTable() != "tenant2_ledger" || other.DeadLetterTable() != "tenant2_dead_letter" {
			t.Fatalf("tables %s, %s", other.LedgerTable(), other.DeadLetterTable())
		}
		mustRecord(t, l, "h:1", job("t", "a", 1))
		mustRecord(t, other, "h:2", job("t", "a", 1), job("t", "b", 1))
		if n, m := count(t, l), count(t, other); n != 1 || m != 2 {
			t.Fatalf("rows: dq_ %d (want 1), tenant2_ %d (want 2)", n, m)
		}
	})
}

func TestNewRejectsBadOptions(t *testing.T) {
	db := testenv.SQLite(t)
	for _, p := range []string{"dq-", "a b", "x;DROP", strings.Repeat("p", 33)} {
		if _, err := New(db, Options{TablePrefix: p}); err == nil {
			t.Errorf("prefix %q accepted", p)
		}
	}
	if _, err := New(db, Options{MaxPlaceholders: -1}); err == nil {
		t.Error("negative MaxPlaceholders accepted")
	}
	if _, err := New(nil, Options{}); err == nil {
		t.Error("nil db accepted")
	}
}

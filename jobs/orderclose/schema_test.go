package orderclose_test

import (
	"context"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/jobs/orderclose"
)

// orderTables are the tables orderclose owns in deployments/mysql/schema.sql
// (the file holds the ledger's too, which ledger's schema test checks).
var orderTables = []string{"order_close_log", "order_items", "orders", "skus"}

// TestSchemaSQLMatchesMigrate proves that deployments/mysql/schema.sql and
// Migrate create the same orders tables on MariaDB: one fresh database gets
// the SQL file, another Migrate, and their columns (name, position, type,
// nullability, default, collation, extra), indexes, check constraints,
// engine and collation must agree, as must SHOW CREATE TABLE. Then Migrate
// runs over the file's tables and must not alter anything.
func TestSchemaSQLMatchesMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fromFile := testenv.MatchSchemaFile(t, "../../deployments/mysql/schema.sql", func(db *gorm.DB) error {
		return orderclose.Migrate(ctx, db)
	}, orderTables...)

	log := &stmtLog{}
	if err := orderclose.Migrate(ctx, fromFile.Session(&gorm.Session{Logger: log})); err != nil {
		t.Fatalf("Migrate over schema.sql: %v", err)
	}
	for _, q := range log.Take() {
		if v := strings.ToUpper(strings.Fields(q)[0]); v == "ALTER" || v == "CREATE" || v == "DROP" {
			t.Errorf("Migrate over schema.sql changed the schema: %s", q)
		}
	}
}

// TestMigrateIsIdempotent runs Migrate twice on MariaDB and on SQLite (the
// embedded mode): the second run changes nothing.
func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(testing.TB) *gorm.DB{"mariadb": testenv.MySQL, "sqlite": testenv.SQLite} {
		t.Run(name, func(t *testing.T) {
			db := open(t)
			if err := orderclose.Migrate(testenv.Context(t), db); err != nil {
				t.Fatal(err)
			}
			log := &stmtLog{}
			if err := orderclose.Migrate(testenv.Context(t), db.Session(&gorm.Session{Logger: log})); err != nil {
				t.Fatal(err)
			}
			for _, q := range log.Take() {
				if v := strings.ToUpper(strings.Fields(q)[0]); v == "ALTER" || v == "CREATE" || v == "DROP" {
					t.Errorf("second Migrate changed the schema: %s", q)
				}
			}
		})
	}
}

// stmtLog records the statements gorm sends.
type stmtLog = testenv.StatementLog

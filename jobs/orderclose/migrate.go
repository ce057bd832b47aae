package orderclose

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// mysqlTableOptions are the ledger's: InnoDB, utf8mb4 with the binary
// collation (order numbers and SKUs compare byte-wise).
const mysqlTableOptions = "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"

// models lists the package's tables, in the order Migrate creates them.
func models() []any { return []any{&SKU{}, &Order{}, &OrderItem{}, &CloseLog{}} }

// Migrate creates the orders tables (orders, order_items, skus,
// order_close_log) on db, or brings existing ones up to the models, with
// gorm's AutoMigrate. On MySQL/MariaDB they are created exactly as
// deployments/mysql/schema.sql creates them, so Migrate over that file's
// tables changes nothing. db must be the ledger's database: the close
// handler writes these tables in the ledger's transaction.
func Migrate(ctx context.Context, db *gorm.DB) error {
	db = db.WithContext(ctx)
	if db.Dialector.Name() == "mysql" {
		db = db.Set("gorm:table_options", mysqlTableOptions)
	}
	for _, m := range models() {
		if err := db.AutoMigrate(m); err != nil {
			return fmt.Errorf("orderclose: migrate %T: %w", m, err)
		}
	}
	return nil
}

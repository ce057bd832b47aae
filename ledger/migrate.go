package ledger

import (
	"context"
	"fmt"
)

// Migrate creates the ledger's tables (in-flight, dead letters, topic
// state, the periodic schedules' ticks), or brings existing ones up to the
// models, with gorm's AutoMigrate. On MySQL the tables are InnoDB, utf8mb4
// with a binary collation, exactly as deployments/mysql/schema.sql creates
// them (a test keeps the two in agreement), so either way of creating them
// gives the same schema and Migrate over schema.sql changes nothing.
func (l *Ledger) Migrate(ctx context.Context) error {
	db := l.conn(ctx)
	if l.dialect.tableOptions != "" {
		db = db.Set("gorm:table_options", l.dialect.tableOptions)
	}
	// Table() makes gorm parse the model under that name, so the index
	// names (idx_<table>_...) follow the prefix: SQLite's index names are
	// per database, not per table, and would collide across prefixes.
	if err := db.Table(l.ledgerTable).AutoMigrate(&Entry{}); err != nil {
		return fmt.Errorf("ledger: migrate %s: %w", l.ledgerTable, err)
	}
	if err := db.Table(l.deadTable).AutoMigrate(&DeadLetter{}); err != nil {
		return fmt.Errorf("ledger: migrate %s: %w", l.deadTable, err)
	}
	if err := db.Table(l.stateTable).AutoMigrate(&TopicState{}); err != nil {
		return fmt.Errorf("ledger: migrate %s: %w", l.stateTable, err)
	}
	if err := db.Table(l.PeriodicTable()).AutoMigrate(&PeriodicTick{}); err != nil {
		return fmt.Errorf("ledger: migrate %s: %w", l.PeriodicTable(), err)
	}
	return nil
}

// Drop removes the ledger's tables and all they hold: the undo of
// Migrate, for a sandbox (the benchmark) that created them under a table
// prefix of its own.
func (l *Ledger) Drop(ctx context.Context) error {
	if err := l.conn(ctx).Migrator().DropTable(l.ledgerTable, l.deadTable, l.stateTable, l.PeriodicTable()); err != nil {
		return fmt.Errorf("ledger: drop %s, %s, %s and %s: %w", l.ledgerTable, l.deadTable, l.stateTable, l.PeriodicTable(), err)
	}
	return nil
}

// Ping checks that the database answers: the readiness probe's SQL check.
func (l *Ledger) Ping(ctx context.Context) error {
	sqlDB, err := l.db.DB()
	if err == nil {
		err = sqlDB.PingContext(ctx)
	}
	if err != nil {
		return fmt.Errorf("ledger: ping: %w", err)
	}
	return nil
}

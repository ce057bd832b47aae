package ledger

import (
	"fmt"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Open opens the database dialector names (gorm.io/driver/mysql's
// mysql.Open(dsn), or a SQLite driver's) with gorm's logger off, since the
// ledger reports its own errors, and returns the Ledger on it, as New
// does. Like New, it creates no table: apply the migrations first
// (Migrate, or delayq migrate).
func Open(dialector gorm.Dialector, opts Options) (*Ledger, error) {
	db, err := gorm.Open(dialector, &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return nil, fmt.Errorf("ledger: open: %w", err)
	}
	l, err := New(db, opts)
	if err != nil {
		if sqlDB, derr := db.DB(); derr == nil {
			_ = sqlDB.Close()
		}
		return nil, err
	}
	return l, nil
}

// Must returns l, and panics if err is not nil: for a program's main,
// where a store that cannot be opened ends the program anyway.
func Must(l *Ledger, err error) *Ledger {
	if err != nil {
		panic(err)
	}
	return l
}

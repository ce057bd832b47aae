package orderclose

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"gorm.io/gorm"
)

// isDuplicate reports whether err (or an error it wraps) is a unique-key
// violation, on whatever dialect db speaks: the dialector translates its
// driver's error into gorm.ErrDuplicatedKey.
func isDuplicate(db *gorm.DB, err error) bool {
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return true
	}
	tr, ok := db.Dialector.(gorm.ErrorTranslator)
	if !ok {
		return false
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if errors.Is(tr.Translate(e), gorm.ErrDuplicatedKey) {
			return true
		}
	}
	return false
}

// erDeadlock is MySQL/MariaDB's ER_LOCK_DEADLOCK: InnoDB rolled the whole
// transaction back and asks for a restart.
const erDeadlock = 1213

func isDeadlock(err error) bool {
	var me *mysqldriver.MySQLError
	return errors.As(err, &me) && me.Number == erDeadlock
}

// deadlockAttempts bounds how often a transaction chosen as a deadlock
// victim is run again.
const deadlockAttempts = 5

// retryDeadlocks runs the transaction tx, and runs it again (a few times,
// after a short random pause) when InnoDB rolled it back as a deadlock
// victim. The package takes SKU rows in one order everywhere, so deadlocks
// are rare; a victim's transaction was rolled back whole, so running it
// again is safe.
func retryDeadlocks(ctx context.Context, tx func() error) error {
	for attempt := 1; ; attempt++ {
		err := tx()
		if err == nil || attempt == deadlockAttempts || !isDeadlock(err) {
			return err
		}
		pause := time.Duration(1<<attempt)*time.Millisecond + rand.N(2*time.Millisecond)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

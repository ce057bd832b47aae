package ledger

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
)

// deadlockAttempts bounds how often a statement chosen as a deadlock victim
// is run again.
const deadlockAttempts = 5

// erDeadlock is MySQL/MariaDB's ER_LOCK_DEADLOCK.
const erDeadlock = 1213

// RetryDeadlocks runs op, and runs it again (up to 5 times in all, after a
// short random pause) when MySQL/MariaDB rolled it back as a deadlock victim
// (error 1213). op must be safe to run again: a whole transaction, or a
// statement that is one on its own. Handlers with transactions of their own
// (see Transactional) use it too.
//
// Concurrent batches deadlock even on disjoint jobs: under REPEATABLE READ
// the range scan of a batched DELETE/UPDATE takes next-key locks on the
// unique index, which block the insert-intention locks of another worker's
// Record into the same gaps, and vice versa. InnoDB then rolls one statement
// (its whole transaction) back and asks for a restart. Every write of the
// ledger is safe to repeat (upserts, fenced deletes and updates, Bury's
// transaction rolled back as a whole), so restarting here is right; handing
// the error up would make the worker drop a claimed batch (Record) or run
// finished jobs again (Complete).
// Batches are also sorted by key so that statements lock in the same order,
// which makes deadlocks rarer; READ COMMITTED isolation on the ledger's
// connections removes the gap locks altogether.
func RetryDeadlocks(ctx context.Context, op func() error) error {
	for attempt := 1; ; attempt++ {
		err := op()
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

func isDeadlock(err error) bool {
	var me *mysqldriver.MySQLError
	return errors.As(err, &me) && me.Number == erDeadlock
}

package ledger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
)

// deadlockAttempts bounds how often a statement chosen as a deadlock victim
// is run again.
const deadlockAttempts = 5

// erDeadlock is MySQL/MariaDB's ER_LOCK_DEADLOCK. On a Galera cluster a
// transaction that lost the certification against another node's (the
// same rows written on two nodes at once) is rolled back with it too.
const erDeadlock = 1213

// erNotReady is ER_UNKNOWN_COM_ERROR, which a Galera node answers ("WSREP
// has not yet prepared node for application use") to every statement while
// it is not part of the cluster's primary component: cut off from the
// majority, still joining, or told to refuse queries (wsrep_reject_queries)
// during maintenance. The statement did not run.
const erNotReady = 1047

// DefaultNotReadyWait is Options.NotReadyWait when it is 0: how long the
// ledger keeps trying a write that a Galera node refused as not ready. A
// node that lost its peers for a moment is back in the primary component
// within a few seconds; one that stays out needs the operator (or a
// connection through another node), and a caller is better told (503) than
// held.
const DefaultNotReadyWait = 3 * time.Second

// ErrRetryable reports that the SQL server rolled a caller's transaction
// back as a whole, through no fault of its statements: a deadlock victim, a
// Galera certification conflict (both error 1213), or a Galera node not
// ready (error 1047). Nothing of it committed; running it again is right.
// The ledger runs its own transactions again itself; a transaction that
// runs a caller's function (Engine.Transaction, Transactional) is never
// run again by the ledger, because the function may have done more than
// SQL: its error wraps ErrRetryable instead (and still the server's
// error), for the caller to decide. Test with errors.Is or Retryable.
var ErrRetryable = errors.New("ledger: the server rolled the transaction back (deadlock, certification conflict or node not ready); run it again")

// Retryable reports whether err means a statement or transaction that the
// server refused or rolled back as a whole and that is right to run again:
// ErrRetryable, a deadlock (1213) or a Galera node not ready (1047).
func Retryable(err error) bool {
	return errors.Is(err, ErrRetryable) || isDeadlock(err) || isNotReady(err)
}

// retryableTx wraps err, the error of a transaction that ran a caller's
// function, in ErrRetryable when the server rolled it back (see
// ErrRetryable).
func retryableTx(err error) error {
	if err == nil || errors.Is(err, ErrRetryable) || !(isDeadlock(err) || isNotReady(err)) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrRetryable, err)
}

// RetryDeadlocks runs op, and runs it again when the server rolled it back
// as a deadlock victim (error 1213: up to 5 times in all, after a short
// random pause) or a Galera node refused it as not ready (error 1047: with
// growing pauses, for up to DefaultNotReadyWait). op must be safe to run
// again: a whole transaction, or a statement that is one on its own.
// Handlers with transactions of their own (see Transactional) use it too.
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
	return retry(ctx, DefaultNotReadyWait, op, nil)
}

// retry is RetryDeadlocks with the wait for a node not ready, and a
// function told of each error that is run again (nil: none).
func retry(ctx context.Context, notReadyWait time.Duration, op func() error, again func(error)) error {
	var notReadySince time.Time
	deadlocks, notReady := 0, 0
	for {
		err := op()
		var pause time.Duration
		switch {
		case err == nil:
			return nil
		case isDeadlock(err):
			if deadlocks++; deadlocks == deadlockAttempts {
				return err
			}
			pause = time.Duration(1<<deadlocks)*time.Millisecond + rand.N(2*time.Millisecond)
		case isNotReady(err):
			if notReadySince.IsZero() {
				notReadySince = time.Now()
			}
			left := notReadyWait - time.Since(notReadySince)
			if left <= 0 {
				return err
			}
			// 50 ms, doubling to 500 ms: a node back within a moment is
			// found at once, one that stays out costs a few statements.
			notReady++
			pause = min(25*time.Millisecond<<min(notReady, 5), 500*time.Millisecond, left)
		default:
			return err
		}
		if again != nil {
			again(err)
		}
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

func isNotReady(err error) bool {
	var me *mysqldriver.MySQLError
	return errors.As(err, &me) && me.Number == erNotReady
}

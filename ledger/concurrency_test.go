package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	mysqldriver "github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/delayq/delayq/queue"
)

// TestConcurrentWorkers runs several workers recording, extending and
// completing their own batches at once. On MariaDB such batches deadlock on
// gap locks even though their jobs are disjoint; the ledger must absorb that
// (sorted batches, deadlock retry), so no call may fail and nothing may be
// left behind.
func TestConcurrentWorkers(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		const workers, rounds, batch = 8, 25, 50
		var wg sync.WaitGroup
		errs := make(chan error, workers*rounds)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := 0; r < rounds; r++ {
					// Interleaved ids: every worker's keys fall in the
					// gaps between the others'.
					js := make([]*queue.Job, batch)
					for i := range js {
						js[i] = job("t", fmt.Sprintf("j%03d-r%03d-w%d", i, r, w), 1)
					}
					worker := fmt.Sprintf("h:%d", w)
					if err := opsOf(l).Record(ctx, js, worker); err != nil {
						errs <- err
						return
					}
					if err := opsOf(l).Extend(ctx, refsOf(js), fixedNow.UnixMilli()+60_000); err != nil {
						errs <- err
						return
					}
					if err := opsOf(l).Complete(ctx, refsOf(js)); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if n := count(t, l); n != 0 {
			t.Errorf("%d rows left", n)
		}
	})
}

func TestRetryDeadlocks(t *testing.T) {
	ctx := context.Background()
	deadlock := fmt.Errorf("wrapped: %w", &mysqldriver.MySQLError{Number: erDeadlock, Message: "Deadlock found"})

	calls := 0
	err := RetryDeadlocks(ctx, func() error {
		calls++
		if calls < 3 {
			return deadlock
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("two deadlocks then success: err %v after %d calls", err, calls)
	}

	calls = 0
	if err := RetryDeadlocks(ctx, func() error { calls++; return deadlock }); !errors.Is(err, deadlock) || calls != deadlockAttempts {
		t.Errorf("endless deadlocks: err %v after %d calls, want %d", err, calls, deadlockAttempts)
	}

	calls = 0
	other := &mysqldriver.MySQLError{Number: 1062, Message: "Duplicate entry"}
	if err := RetryDeadlocks(ctx, func() error { calls++; return other }); !errors.Is(err, other) || calls != 1 {
		t.Errorf("other error: err %v after %d calls, want 1", err, calls)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	calls = 0
	if err := RetryDeadlocks(cancelled, func() error { calls++; return deadlock }); err == nil || calls != 1 {
		t.Errorf("cancelled context: err %v after %d calls, want 1", err, calls)
	}
}

package queue_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// closed is a business table: one row per job, unique by job id.
type closed struct {
	JobID string `gorm:"primaryKey;type:varchar(200)"`
}

// A handler wrapped with ledger.Transactional: the attempt whose
// transaction rolls back leaves its ledger row (and no business row); the
// one that commits removes the ledger row in the same transaction.
func TestTransactionalCompletion(t *testing.T) {
	e := newWEnv(t)
	if err := e.db.AutoMigrate(&closed{}); err != nil {
		t.Fatal(err)
	}
	var rowDuringRetry atomic.Int64
	var attempts atomic.Int64
	w := newWorker(t, e, queue.WorkerConfig{})
	h := ledger.Transactional(e.led, func(ctx context.Context, tx *gorm.DB, j *queue.Job) error {
		attempts.Add(1)
		if err := tx.Create(&closed{JobID: j.ID}).Error; err != nil {
			return err
		}
		if j.Attempt == 1 {
			return errors.New("fails after its business write")
		}
		// Second attempt: the first one's rollback left no business row,
		// and its ledger row was kept (marked retrying, now re-recorded).
		var n int64
		if err := e.db.Model(&closed{}).Count(&n).Error; err == nil && n == 0 {
			rowDuringRetry.Store(1)
		}
		return nil
	})
	if err := w.Handle("t", queue.HandlerFunc(h), queue.TopicConfig{Backoff: queue.Backoff{Base: 300 * time.Millisecond, Jitter: -1}}); err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, e.env, "t", queue.NewJob{ID: "order_close:1"})
	startWorker(t, w)

	// Between the attempts: no business row, the ledger row kept as retrying.
	testenv.WaitFor(testenv.Context(t), t, "the first attempt to fail", func() bool {
		row, err := e.led.Row(testenv.Context(t), "t", "order_close:1")
		return err == nil && row.State == "retrying"
	})
	var n int64
	if err := e.db.Model(&closed{}).Count(&n).Error; err != nil || n != 0 {
		t.Fatalf("rolled-back attempt left %d business rows (%v)", n, err)
	}
	testenv.WaitFor(testenv.Context(t), t, "the second attempt to commit", func() bool {
		var n int64
		return e.db.Model(&closed{}).Count(&n).Error == nil && n == 1
	})
	// The commit removed the ledger row with the business write.
	if _, err := e.led.Row(testenv.Context(t), "t", "order_close:1"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("ledger row after commit: %v, want ErrNotFound", err)
	}
	if attempts.Load() != 2 || rowDuringRetry.Load() != 1 {
		t.Fatalf("attempts %d, clean retry %d", attempts.Load(), rowDuringRetry.Load())
	}
}

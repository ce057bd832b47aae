package dataplane_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
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
	// What the first attempt left, seen just before the second is
	// recorded: strictly between the attempts.
	type leftover struct {
		row          ledger.Entry
		rowErr       error
		businessRows int64
		countErr     error
	}
	between := make(chan leftover, 1)
	obs := &settled{}
	w := newWorkerWith(t, e, beforeRecord{Ledger: ledgerops.Of(e.led), look: func(ctx context.Context, jobs []*dataplane.Job) {
		for _, j := range jobs {
			if j.Attempt == 2 {
				var l leftover
				l.row, l.rowErr = e.led.Row(ctx, j.Topic, j.ID)
				l.countErr = e.db.WithContext(ctx).Model(&closed{}).Count(&l.businessRows).Error
				select {
				case between <- l:
				default: // a second claim of attempt 2: the first one's look is what counts
				}
			}
		}
	}}, dataplane.WorkerConfig{Observer: obs})
	h := ledger.Transactional(e.led, func(ctx context.Context, tx *gorm.DB, j *dataplane.Job) error {
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
	if err := w.Handle("t", dataplane.HandlerFunc(h), dataplane.TopicConfig{Backoff: dataplane.Backoff{Base: 300 * time.Millisecond, Jitter: -1}}); err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "order_close:1"})
	startWorker(t, w)

	// Between the attempts: no business row, the ledger row kept as retrying.
	l := testenv.Receive(testenv.Context(t), t, between, "the second attempt's claim")
	if l.rowErr != nil || l.row.State != "retrying" {
		t.Fatalf("ledger row after the first attempt: %+v, %v; want it kept as retrying", l.row, l.rowErr)
	}
	if l.countErr != nil || l.businessRows != 0 {
		t.Fatalf("rolled-back attempt left %d business rows (%v)", l.businessRows, l.countErr)
	}
	obs.completed.WaitAtLeast(testenv.Context(t), t, 1, "the second attempt to commit")
	var n int64
	if err := e.db.Model(&closed{}).Count(&n).Error; err != nil || n != 1 {
		t.Fatalf("after the commit: %d business rows (%v), want 1", n, err)
	}
	// The commit removed the ledger row with the business write.
	if _, err := e.led.Row(testenv.Context(t), "t", "order_close:1"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("ledger row after commit: %v, want ErrNotFound", err)
	}
	if attempts.Load() != 2 || rowDuringRetry.Load() != 1 {
		t.Fatalf("attempts %d, clean retry %d", attempts.Load(), rowDuringRetry.Load())
	}
}

// beforeRecord is a ledger that calls look with each claimed batch before
// recording it: look sees the ledger as the previous attempts left it.
type beforeRecord struct {
	dataplane.Ledger
	look func(ctx context.Context, jobs []*dataplane.Job)
}

func (l beforeRecord) Record(ctx context.Context, jobs []*dataplane.Job, worker string) error {
	l.look(ctx, jobs)
	return l.Ledger.Record(ctx, jobs, worker)
}

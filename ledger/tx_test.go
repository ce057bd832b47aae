package ledger

import (
	"context"
	"errors"
	"testing"

	"gorm.io/gorm"

	"github.com/delayq/delayq/queue"
)

// closedOrder is the business row of the transactional tests, with the
// unique key that makes closing an order idempotent.
type closedOrder struct {
	ID      int64  `gorm:"primaryKey;autoIncrement"`
	OrderNo string `gorm:"type:varchar(64);not null;uniqueIndex"`
}

func (closedOrder) TableName() string { return "test_closed_orders" }

func businessRows(t *testing.T, db *gorm.DB) int64 {
	t.Helper()
	var n int64
	if err := db.Model(&closedOrder{}).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

func TestTransactional(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		if err := db.AutoMigrate(&closedOrder{}); err != nil {
			t.Fatal(err)
		}
		errBusiness := errors.New("payment service says no")
		closeOrder := Transactional(l, func(ctx context.Context, tx *gorm.DB, job *queue.Job) error {
			if err := tx.Create(&closedOrder{OrderNo: job.ID}).Error; err != nil {
				return err
			}
			if string(job.Payload) == "fail" {
				return errBusiness
			}
			return nil
		})

		// Commit: business row and ledger row removal together.
		ok := job("orders", "o1", 1)
		mustRecord(t, l, "h:1", ok)
		if err := closeOrder(ctx, ok); err != nil {
			t.Fatalf("handler: %v", err)
		}
		if _, err := l.Row(ctx, "orders", "o1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("ledger row after commit: %v, want ErrNotFound", err)
		}
		if n := businessRows(t, db); n != 1 {
			t.Errorf("business rows after commit: %d, want 1", n)
		}
		// The worker's batched Complete afterwards is a harmless no-op.
		if err := opsOf(l).Complete(ctx, []queue.Ref{ok.Ref()}); err != nil {
			t.Errorf("Complete after transactional completion: %v", err)
		}

		// Rollback: fn wrote, then failed; neither write survives.
		bad := job("orders", "o2", 1)
		bad.Payload = []byte("fail")
		mustRecord(t, l, "h:1", bad)
		if err := closeOrder(ctx, bad); !errors.Is(err, errBusiness) {
			t.Fatalf("failing handler returned %v, want %v", err, errBusiness)
		}
		if r := mustRow(t, l, "orders", "o2"); r.Attempt != 1 || r.State != queue.StateInFlight {
			t.Errorf("ledger row after rollback: %+v", r)
		}
		if n := businessRows(t, db); n != 1 {
			t.Errorf("business rows after rollback: %d, want 1", n)
		}

		// Claim lost: the job was taken over (row is attempt 2); this
		// attempt-1 run must not commit its effect.
		taken := job("orders", "o3", 1)
		mustRecord(t, l, "h:2", job("orders", "o3", 2))
		if err := closeOrder(ctx, taken); !errors.Is(err, ErrClaimLost) {
			t.Fatalf("handler of a lost claim returned %v, want ErrClaimLost", err)
		}
		if r := mustRow(t, l, "orders", "o3"); r.Attempt != 2 {
			t.Errorf("row of the new claim: %+v", r)
		}
		if n := businessRows(t, db); n != 1 {
			t.Errorf("business rows after lost claim: %d, want 1", n)
		}

		// Exactly-once: a finished job redelivered after the commit (its
		// ack lost) is refused at its record: its row is gone and its
		// history says it succeeded, so the worker never runs it...
		var gone *queue.GoneError
		if err := opsOf(l).Record(ctx, []*queue.Job{job("orders", "o1", 2)}, "h:1"); !errors.As(err, &gone) {
			t.Fatalf("record of a finished job's redelivery: %v, want a GoneError", err)
		}
		// ...and run anyway, it hits the business unique key and changes
		// nothing.
		if err := closeOrder(ctx, job("orders", "o1", 2)); err == nil {
			t.Error("second close of o1 succeeded; the unique key should refuse it")
		}
		if n := businessRows(t, db); n != 1 {
			t.Errorf("business rows after redelivery: %d, want 1", n)
		}
	})
}

// TestDeleteInTx is the do-it-yourself form: a handler that runs its own
// transaction.
func TestDeleteInTx(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		if err := db.AutoMigrate(&closedOrder{}); err != nil {
			t.Fatal(err)
		}
		a, b := job("orders", "a", 1), job("orders", "b", 1)
		mustRecord(t, l, "h:1", a, b)

		errAbort := errors.New("abort")
		err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := tx.Create(&closedOrder{OrderNo: "b"}).Error; err != nil {
				return err
			}
			if err := l.DeleteInTx(tx, b.Ref()); err != nil {
				return err
			}
			return errAbort
		})
		if !errors.Is(err, errAbort) {
			t.Fatalf("transaction: %v", err)
		}
		mustRow(t, l, "orders", "b") // rolled back: still there
		if n := businessRows(t, db); n != 0 {
			t.Errorf("business rows after rollback: %d", n)
		}

		err = db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := tx.Create(&closedOrder{OrderNo: "a"}).Error; err != nil {
				return err
			}
			return l.DeleteInTx(tx, a.Ref())
		})
		if err != nil {
			t.Fatalf("transaction: %v", err)
		}
		assertRows(t, l, map[string]int{"orders/b": 1})
		if n := businessRows(t, db); n != 1 {
			t.Errorf("business rows after commit: %d", n)
		}
		if err := db.Transaction(func(tx *gorm.DB) error { return l.DeleteInTx(tx, queue.Ref{Topic: "orders", ID: "b", Attempt: 9}) }); !errors.Is(err, ErrClaimLost) {
			t.Errorf("DeleteInTx with a stale attempt: %v, want ErrClaimLost", err)
		}
		mustRow(t, l, "orders", "b")
	})
}

package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// TestScheduleTx: Schedule bound to a caller's gorm transaction writes
// exactly when it commits.
func TestScheduleTx(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		if err := db.AutoMigrate(&closedOrder{}); err != nil {
			t.Fatal(err)
		}
		errAbort := errors.New("abort")
		err := db.Transaction(func(tx *gorm.DB) error {
			if err := tx.Create(&closedOrder{OrderNo: "o1"}).Error; err != nil {
				return err
			}
			// A caller's chained conditions stay out of the ledger's
			// statements.
			mustSchedule(t, l.Tx(tx.Where("order_no = ?", "o1")), "t", queue.NewJob{ID: "a", MaxAttempts: 1})
			return errAbort
		})
		if !errors.Is(err, errAbort) {
			t.Fatal(err)
		}
		if n := count(t, l); n != 0 || businessRows(t, db) != 0 {
			t.Fatalf("rolled back: %d ledger rows, %d business rows", n, businessRows(t, db))
		}

		err = db.Transaction(func(tx *gorm.DB) error {
			if err := tx.Create(&closedOrder{OrderNo: "o1"}).Error; err != nil {
				return err
			}
			out, _ := mustSchedule(t, l.Tx(tx), "t", queue.NewJob{ID: "a", MaxAttempts: 1}, queue.NewJob{ID: "a", MaxAttempts: 1})
			if out[0].Duplicate || !out[1].Duplicate {
				t.Errorf("results %+v", out)
			}
			// The transaction sees its own rows.
			if out, _ := mustSchedule(t, l.Tx(tx), "t", queue.NewJob{ID: "a", MaxAttempts: 1}); !out[0].Duplicate {
				t.Errorf("second Schedule in the transaction: %+v", out)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if r := mustRow(t, l, "t", "a"); r.State != queue.StateWaiting || businessRows(t, db) != 1 {
			t.Fatalf("committed: row %+v, %d business rows", r, businessRows(t, db))
		}
		if _, _, err := l.Tx(nil).Schedule(ctx, "t", []queue.NewJob{{ID: "x", MaxAttempts: 1}}); err == nil {
			t.Error("Tx(nil) accepted")
		}
	})
}

// TestScheduleSQLTx is TestScheduleTx for a *sql.Tx.
func TestScheduleSQLTx(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		sqlDB, err := db.DB()
		if err != nil {
			t.Fatal(err)
		}
		for _, commit := range []bool{false, true} {
			tx, err := sqlDB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := mustSchedule(t, l.SQLTx(tx), "t", queue.NewJob{ID: "a", MaxAttempts: 1}, queue.NewJob{ID: "b", MaxAttempts: 1})
			if out[0].Duplicate || out[1].Duplicate {
				t.Errorf("results %+v", out)
			}
			if commit {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
			want := int64(0)
			if commit {
				want = 2
			}
			if n := count(t, l); n != want {
				t.Errorf("commit %v: %d rows, want %d", commit, n, want)
			}
		}
		// The swap of the connection did not leak into the ledger's handle.
		out, _ := mustSchedule(t, l, "t", queue.NewJob{ID: "c", MaxAttempts: 1})
		if out[0].Duplicate || count(t, l) != 3 {
			t.Errorf("after the transactions: %+v, %d rows", out, count(t, l))
		}
	})
}

// TestScheduleTxRaceUnderRepeatableRead: in a REPEATABLE READ transaction
// whose snapshot predates a concurrent enqueue of the same id, Schedule's
// first read misses the row, its INSERT fails on the unique key, and the
// locking read that follows finds it: a duplicate, not an error, and the
// transaction goes on. MariaDB only: SQLite's writing transaction holds
// the whole database, so no other connection can enqueue meanwhile.
func TestScheduleTxRaceUnderRepeatableRead(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	l, _ := newLedger(t, db, Options{})
	ctx := context.Background()
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"gorm", "sql"} {
		t.Run(kind, func(t *testing.T) {
			id := "x-" + kind
			var store queue.DurableStore
			var done func() error
			if kind == "gorm" {
				tx := db.Begin(&sql.TxOptions{Isolation: sql.LevelRepeatableRead})
				t.Cleanup(func() { tx.Rollback() }) // after a failure: no locks left behind
				store, done = l.Tx(tx), func() error { return tx.Commit().Error }
			} else {
				tx, err := sqlDB.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = tx.Rollback() })
				store, done = l.SQLTx(tx), tx.Commit
			}
			// The snapshot: the first read of the transaction.
			mustSchedule(t, store, "t", queue.NewJob{ID: "first-" + kind, MaxAttempts: 1})
			winner, _ := mustSchedule(t, l, "t", queue.NewJob{ID: id, Delay: time.Minute, MaxAttempts: 1})
			out, _ := mustSchedule(t, store, "t", queue.NewJob{ID: id, MaxAttempts: 1}, queue.NewJob{ID: "y-" + kind, MaxAttempts: 1})
			if !out[0].Duplicate || out[0].RunAt != winner[0].RunAt || out[1].Duplicate {
				t.Errorf("results %+v, the winner's run_at %d", out, winner[0].RunAt)
			}
			if err := done(); err != nil {
				t.Fatal(err)
			}
			mustRow(t, l, "t", "y-"+kind)
		})
	}
}

// TestTransaction: a business row and its job commit together; the job is
// pushed to Redis after the commit and never after a rollback.
func TestTransaction(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := testenv.Context(t)
		l, _ := newLedger(t, db, Options{})
		if err := db.AutoMigrate(&closedOrder{}); err != nil {
			t.Fatal(err)
		}
		rdb, ns := testenv.Redis(t)
		q, err := dataplane.New(rdb, queue.Config{Namespace: ns, Store: l,
			TopicDurability: map[string]queue.Durability{"t": queue.DurabilityDurable}})
		if err != nil {
			t.Fatal(err)
		}
		state := func(id string) queue.State {
			t.Helper()
			info, err := q.Get(ctx, "t", id)
			if err != nil {
				t.Fatal(err)
			}
			return info.State
		}

		errAbort := errors.New("abort")
		err = opsOf(l).Transaction(ctx, q, func(tx *gorm.DB, enq *TxEnqueuer) error {
			if err := tx.Create(&closedOrder{OrderNo: "o1"}).Error; err != nil {
				return err
			}
			if _, err := enq.Enqueue(ctx, "t", queue.NewJob{ID: "close:o1", Delay: time.Minute}); err != nil {
				return err
			}
			return errAbort
		})
		if !errors.Is(err, errAbort) {
			t.Fatal(err)
		}
		if n := count(t, l); n != 0 || businessRows(t, db) != 0 || state("close:o1") != queue.StateUnknown {
			t.Fatalf("rolled back: %d ledger rows, %d business rows, Redis %s", n, businessRows(t, db), state("close:o1"))
		}

		var inside queue.State
		err = opsOf(l).Transaction(ctx, q, func(tx *gorm.DB, enq *TxEnqueuer) error {
			if err := tx.Create(&closedOrder{OrderNo: "o1"}).Error; err != nil {
				return err
			}
			r, err := enq.Enqueue(ctx, "t", queue.NewJob{ID: "close:o1", Delay: time.Minute})
			if err != nil || r.Status != queue.BatchCreated {
				return fmt.Errorf("enqueue: %+v, %v", r, err)
			}
			out, err := enq.EnqueueBatch(ctx, "t", []queue.NewJob{{ID: "close:o1"}, {ID: "bad id"}, {ID: "close:o2"}})
			if err != nil {
				return err
			}
			if out[0].Status != queue.BatchDuplicate || out[0].RunAt != r.RunAt || out[1].Status != queue.BatchInvalid ||
				out[2].Status != queue.BatchCreated {
				return fmt.Errorf("batch results %+v", out)
			}
			if _, err := enq.Enqueue(ctx, "t", queue.NewJob{ID: "bad id"}); err == nil {
				return errors.New("an invalid job was accepted")
			}
			if _, err := enq.Enqueue(ctx, "not-durable", queue.NewJob{ID: "x"}); !errors.Is(err, queue.ErrNotDurable) {
				return fmt.Errorf("enqueue to a topic that is not durable: %v", err)
			}
			inside = state("close:o1")
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if inside != queue.StateUnknown {
			t.Errorf("the job was in Redis before the commit: %s", inside)
		}
		for _, id := range []string{"close:o1", "close:o2"} {
			if s := state(id); s != queue.StateWaiting {
				t.Errorf("%s after the commit: Redis says %s", id, s)
			}
			if r := mustRow(t, l, "t", id); r.State != queue.StateWaiting {
				t.Errorf("%s: row %+v", id, r)
			}
		}
		if businessRows(t, db) != 1 {
			t.Errorf("%d business rows", businessRows(t, db))
		}
		if err := opsOf(l).Transaction(ctx, nil, func(*gorm.DB, *TxEnqueuer) error { return nil }); err == nil {
			t.Error("nil client accepted")
		}
	})
}

package ledger

import (
	"context"
	"errors"
	"testing"
	"time"

	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/internal/unavailable"
	"github.com/delayq/delayq/queue"
)

// The ledger on a 3-node MariaDB Galera cluster (deployments/README.md,
// "Galera"): a node that refuses statements as not ready (1047) is waited
// for, within Options.NotReadyWait, then its error is retryable; a
// transaction that runs a caller's function and loses a certification
// conflict to another node is not run again, and says it may be.
func TestGalera(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node Galera cluster")
	}
	g := testenv.StartGalera(t, 3)
	g.Nodes[0].Exec(t, "CREATE DATABASE dq")
	ctx := testenv.Context(t)
	open := func(t *testing.T, i int, opts Options) (*gorm.DB, *Ledger) {
		t.Helper()
		// wsrep_sync_wait=1: a read waits until the node has applied what
		// the cluster committed before it (a test reads on one node what
		// it wrote on another).
		db, err := gorm.Open(mysql.Open(g.Nodes[i].DSN("root", "", "dq",
			"interpolateParams=true&tx_isolation=%27READ-COMMITTED%27&wsrep_sync_wait=1")), &gorm.Config{Logger: logger.Discard})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if s, err := db.DB(); err == nil {
				_ = s.Close()
			}
		})
		l, err := New(db, opts)
		if err != nil {
			t.Fatal(err)
		}
		return db, l
	}
	db0, l0 := open(t, 0, Options{})
	if err := l0.Migrate(ctx); err != nil {
		t.Fatalf("Migrate through node 0: %v", err)
	}
	if err := db0.AutoMigrate(&closedOrder{}); err != nil {
		t.Fatal(err)
	}
	// rejectQueries has node i answer 1047 to every client statement (as
	// a node out of the primary component does) until it is undone.
	rejectQueries := func(t *testing.T, i int) func() {
		g.Nodes[i].Exec(t, "SET GLOBAL wsrep_reject_queries = ALL")
		undo := func() { g.Nodes[i].Exec(t, "SET GLOBAL wsrep_reject_queries = NONE") }
		t.Cleanup(undo)
		return undo
	}

	t.Run("NotReadyWaitedFor", func(t *testing.T) {
		_, l1 := open(t, 1, Options{NotReadyWait: time.Minute})
		_, l2 := open(t, 2, Options{})
		// A connection in the pool before the node stops serving: the
		// retries go to the same node.
		mustRecord(t, l1, "w:1", job("galera", "warm", 1))
		undo := rejectQueries(t, 1)
		done := make(chan error, 1)
		go func() { done <- opsOf(l1).Record(ctx, []*queue.Job{job("galera", "a1", 1)}, "w:1") }()
		testenv.WaitFor(ctx, t, "a refused write", func() bool { return l1.WriteStats().NotReady >= 2 })
		select {
		case err := <-done:
			t.Fatalf("Record returned %v while the node refused it", err)
		default:
		}
		undo()
		if err := <-done; err != nil {
			t.Fatalf("Record after the node came back: %v", err)
		}
		if r := mustRow(t, l2, "galera", "a1"); r.Attempt != 1 || r.State != queue.StateInFlight {
			t.Errorf("the row on node 2: %+v", r)
		}
	})

	t.Run("NotReadyPastTheWaitIsRetryable", func(t *testing.T) {
		_, l1 := open(t, 1, Options{NotReadyWait: 300 * time.Millisecond})
		mustRecord(t, l1, "w:1", job("galera", "warm2", 1))
		rejectQueries(t, 1)
		start := time.Now()
		err := opsOf(l1).Record(ctx, []*queue.Job{job("galera", "b1", 1)}, "w:1")
		if err == nil {
			t.Fatal("Record succeeded on a node that refuses every statement")
		}
		if !Retryable(err) || !unavailable.Is(err) {
			t.Errorf("Record's error %v: Retryable %v, unavailable %v; want both (a 503)", err, Retryable(err), unavailable.Is(err))
		}
		if n := l1.WriteStats().NotReady; n < 1 {
			t.Errorf("NotReady %d, want at least 1 (it was tried again)", n)
		}
		// Not a timing claim: a bound on "never a hang" (the wait is 300 ms).
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("Record took %v against a 300ms wait", d)
		}
	})

	t.Run("CertificationConflictIsRetryable", func(t *testing.T) {
		db2, l2 := open(t, 2, Options{})
		_, l1 := open(t, 1, Options{})
		j := job("galera", "c1", 1)
		mustRecord(t, l1, "w:1", j)
		calls := 0
		handler := Transactional(l1, func(ctx context.Context, tx *gorm.DB, job *queue.Job) error {
			calls++
			if err := tx.Create(&closedOrder{OrderNo: job.ID}).Error; err != nil {
				return err
			}
			// Another node commits the same key first: node 1 applies it,
			// and this transaction loses (brute-force abort or failed
			// certification), 1213 either way.
			return db2.WithContext(ctx).Create(&closedOrder{OrderNo: job.ID}).Error
		})
		err := handler(ctx, j)
		if !errors.Is(err, ErrRetryable) || !isDeadlock(err) {
			t.Fatalf("Transactional after losing to another node: %v, want ErrRetryable wrapping 1213", err)
		}
		if calls != 1 {
			t.Errorf("fn ran %d times, want 1 (a caller's function is not run again)", calls)
		}
		if r := mustRow(t, l2, "galera", "c1"); r.Attempt != 1 {
			t.Errorf("the job's row after the rollback: %+v, want it left at attempt 1", r)
		}
		var n int64
		if err := db2.WithContext(ctx).Model(&closedOrder{}).Where("order_no = ?", "c1").Count(&n).Error; err != nil || n != 1 {
			t.Errorf("business rows of c1: %d (%v), want the other node's 1", n, err)
		}
	})
}

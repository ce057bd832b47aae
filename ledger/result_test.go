package ledger

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/delayq/delayq/queue"
)

// historyResult returns the result of topic/id's newest history row.
func historyResult(t *testing.T, l *Ledger, topic, id string) (JobResult, int) {
	t.Helper()
	rows, _, err := l.History(context.Background(), HistoryFilter{Topic: topic, ID: id, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		return nil, 0
	}
	return rows[0].Result, len(rows)
}

// A handler's result lands in its job's history row: through the batched
// completion (each job its own, none for the others), and through
// transactional completion, in the handler's transaction. A rolled-back
// transaction leaves neither, and a fenced-off completion writes no row.
func TestHistoryKeepsHandlerResults(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		o := opsOf(l)

		a, b, c, stale := job("t", "a", 1), job("t", "b", 1), job("t", "c", 1), job("t", "stale", 2)
		mustRecord(t, l, "w:1", a, b, c, stale)
		refs := []queue.Ref{c.Ref(), a.Ref(), b.Ref(), {Topic: "t", ID: "stale", Attempt: 1}}
		results := [][]byte{[]byte(`{"closed":"c"}`), []byte(`"a's"`), nil, []byte(`1`)}
		if err := o.CompleteResults(ctx, refs, results); err != nil {
			t.Fatal(err)
		}
		for id, want := range map[string]string{"a": `"a's"`, "b": "", "c": `{"closed":"c"}`} {
			got, n := historyResult(t, l, "t", id)
			if n != 1 || string(got) != want {
				t.Errorf("history of %s: %d rows, result %q, want 1 row with %q", id, n, got, want)
			}
		}
		if _, n := historyResult(t, l, "t", "stale"); n != 0 {
			t.Errorf("a fenced-off completion left %d history rows", n)
		}
		if err := o.CompleteResults(ctx, []queue.Ref{stale.Ref()}, [][]byte{[]byte(strings.Repeat("1", queue.MaxResultBytes+1))}); !errors.Is(err, queue.ErrResultTooLarge) {
			t.Errorf("an oversized result: %v, want ErrResultTooLarge", err)
		}
		if err := o.CompleteResults(ctx, []queue.Ref{stale.Ref()}, [][]byte{nil, nil}); err == nil {
			t.Error("results not one per ref: accepted")
		}

		// Transactional completion: the result recorded in the handler.
		tx := Transactional(l, func(ctx context.Context, _ *gorm.DB, j *queue.Job) error {
			if err := queue.RecordResult(ctx, map[string]string{"order": j.ID}); err != nil {
				return err
			}
			if string(j.Payload) == "fail" {
				return errors.New("business says no")
			}
			return nil
		})
		d, e := job("t", "d", 1), job("t", "e", 1)
		e.Payload = []byte("fail")
		mustRecord(t, l, "w:1", d, e)
		hctx, _ := queue.WithResultRecorder(ctx)
		if err := tx(hctx, d); err != nil {
			t.Fatal(err)
		}
		if got, n := historyResult(t, l, "t", "d"); n != 1 || string(got) != `{"order":"d"}` {
			t.Errorf("transactional history of d: %d rows, result %q", n, got)
		}
		// The worker's batched Complete afterwards adds nothing.
		if err := o.Complete(ctx, []queue.Ref{d.Ref()}); err != nil {
			t.Fatal(err)
		}
		if _, n := historyResult(t, l, "t", "d"); n != 1 {
			t.Errorf("transactional then batched completion: %d history rows, want 1", n)
		}
		hctx, _ = queue.WithResultRecorder(ctx)
		if err := tx(hctx, e); err == nil {
			t.Fatal("the failing handler succeeded")
		}
		if _, n := historyResult(t, l, "t", "e"); n != 0 {
			t.Errorf("a rolled-back transaction left %d history rows", n)
		}
		// DeleteInTx reads the result from the transaction's context.
		f := job("t", "f", 1)
		mustRecord(t, l, "w:1", f)
		hctx, _ = queue.WithResultRecorder(ctx)
		if err := queue.RecordResult(hctx, 42); err != nil {
			t.Fatal(err)
		}
		if err := l.conn(ctx).WithContext(hctx).Transaction(func(tx *gorm.DB) error { return l.DeleteInTx(tx, f.Ref()) }); err != nil {
			t.Fatal(err)
		}
		if got, n := historyResult(t, l, "t", "f"); n != 1 || string(got) != "42" {
			t.Errorf("DeleteInTx history of f: %d rows, result %q", n, got)
		}
	})
}

func TestRecordResult(t *testing.T) {
	if err := queue.RecordResult(context.Background(), 1); !errors.Is(err, queue.ErrNoResultRecorder) {
		t.Errorf("outside a job: %v", err)
	}
	ctx, got := queue.WithResultRecorder(context.Background())
	if got() != nil {
		t.Error("a result before any was recorded")
	}
	if err := queue.RecordResult(ctx, strings.Repeat("x", queue.MaxResultBytes)); !errors.Is(err, queue.ErrResultTooLarge) {
		t.Errorf("oversized: %v", err)
	}
	if err := queue.RecordResult(ctx, make(chan int)); err == nil {
		t.Error("a value JSON cannot hold: accepted")
	}
	if err := queue.RecordResult(ctx, []int{1, 2}); err != nil || string(got()) != "[1,2]" {
		t.Errorf("recorded %q, %v", got(), err)
	}
}

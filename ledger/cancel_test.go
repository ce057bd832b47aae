package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// Cancelling a job that waits for a retry removes its ledger row as well,
// so no recovery run can bring it back; a job in flight keeps both.
func TestCancelRetryingJobRemovesItsRow(t *testing.T) {
	ctx := context.Background()
	rdb, ns := testenv.Redis(t)
	q, err := queue.New(rdb, queue.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(testenv.MySQL(t), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"retrying", "running"} {
		if _, err := q.Enqueue(ctx, "t", queue.NewJob{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := q.Claim(ctx, "t", 2, time.Minute)
	if err != nil || len(c.Jobs) != 2 {
		t.Fatalf("claim: %v %v", c, err)
	}
	if err := l.Record(ctx, c.Jobs, "w:1"); err != nil {
		t.Fatal(err)
	}
	for _, j := range c.Jobs {
		if j.ID != "retrying" {
			continue
		}
		runAt := time.Now().Add(time.Hour).UnixMilli()
		if err := l.MarkRetrying(ctx, []queue.RetryRequest{{Ref: j.Ref(), RunAt: runAt, LeaseUntil: runAt + 60_000, Error: "x"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Retry(ctx, []queue.RetryRequest{{Ref: j.Ref(), RunAt: runAt, Error: "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	job, err := l.Cancel(ctx, q, "t", "retrying")
	if err != nil || job.Attempt != 1 {
		t.Fatalf("cancel: %+v, %v", job, err)
	}
	if _, err := l.Row(ctx, "t", "retrying"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("row of the cancelled job: %v, want ErrNotFound", err)
	}
	if info, _ := q.Get(ctx, "t", "retrying"); info.State != queue.StateUnknown {
		t.Fatalf("cancelled job still %s in Redis", info.State)
	}
	if _, err := l.Cancel(ctx, q, "t", "running"); !errors.Is(err, queue.ErrInFlight) {
		t.Fatalf("cancel in flight: %v, want ErrInFlight", err)
	}
	if _, err := l.Row(ctx, "t", "running"); err != nil {
		t.Fatalf("the running job lost its row: %v", err)
	}
}

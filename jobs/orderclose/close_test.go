package orderclose_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/jobs/orderclose"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// claim does what a worker does before it runs a handler: it claims the
// order's close job from Redis (waiting until it is due) and records the
// claim in the ledger.
func (w *world) claim(no string, lease time.Duration) *queue.Job {
	w.t.Helper()
	job := w.claimUnrecorded(no, lease)
	if err := ledgerops.Of(w.led).Record(testenv.Context(w.t), []*queue.Job{job}, "test:1"); err != nil {
		w.t.Fatal(err)
	}
	return job
}

// claimUnrecorded claims the close job of order no in Redis, without
// recording it.
func (w *world) claimUnrecorded(no string, lease time.Duration) *queue.Job {
	w.t.Helper()
	var job *queue.Job
	testenv.WaitFor(testenv.Context(w.t), w.t, "the close job of "+no+" to be claimable", func() bool {
		cl, err := w.q.Claim(testenv.Context(w.t), orderclose.Topic, 1, lease)
		if err != nil {
			w.t.Fatal(err)
		}
		if len(cl.Jobs) == 0 {
			return false
		}
		if cl.Jobs[0].ID != orderclose.JobID(no) {
			w.t.Fatalf("claimed %s, want the close job of %s", cl.Jobs[0].ID, no)
		}
		job = cl.Jobs[0]
		return true
	})
	return job
}

// recordedJob records a close job in the ledger without Redis, as a claim
// of the given attempt.
func (w *world) recordedJob(no string, attempt int) *queue.Job {
	w.t.Helper()
	now := time.Now().UnixMilli()
	job := &queue.Job{Topic: orderclose.Topic, ID: orderclose.JobID(no), Payload: []byte(`{}`), Attempt: attempt,
		MaxAttempts: 25, EnqueuedAt: now, RunAt: now, LeaseUntil: now + 30_000}
	if err := ledgerops.Of(w.led).Record(testenv.Context(w.t), []*queue.Job{job}, "test:1"); err != nil {
		w.t.Fatal(err)
	}
	return job
}

func (w *world) assertNoLedgerRow(no string) {
	w.t.Helper()
	if _, err := w.led.Row(testenv.Context(w.t), orderclose.Topic, orderclose.JobID(no)); !errors.Is(err, ledger.ErrNotFound) {
		w.t.Fatalf("ledger row of %s: %v, want ErrNotFound", no, err)
	}
}

// assertHistoryResult checks the result of the newest history row of no's
// close job: the transactional close writes it in its transaction.
func (w *world) assertHistoryResult(no, want string) {
	w.t.Helper()
	rows, _, err := w.led.History(testenv.Context(w.t), ledger.HistoryFilter{Topic: orderclose.Topic, ID: orderclose.JobID(no), Limit: 1})
	if err != nil || len(rows) != 1 {
		w.t.Fatalf("history of %s: %+v, %v", no, rows, err)
	}
	if got := string(rows[0].Result); got != want || rows[0].Outcome != ledger.OutcomeSucceeded {
		w.t.Fatalf("history of %s: %s with result %s, want succeeded with %s", no, rows[0].Outcome, got, want)
	}
}

// The close handler run twice for one order, as after a crash between the
// commit and the Redis ack: the lease expires, the job is claimed again and
// runs again. The second run changes nothing.
func TestCloseHandlerRunTwiceChangesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil, orderclose.Config{})
	w.seed(map[string]int64{"A": 10, "B": 10})
	c := w.mustCreate(orderclose.NewOrder{Items: []orderclose.Item{{SKU: "A", Quantity: 3}, {SKU: "B", Quantity: 1}}, PaymentWindow: 50 * time.Millisecond})
	no := c.Order.OrderNo
	h := w.svc.CloseHandler()

	first := w.claim(no, 300*time.Millisecond)
	ctx, _ := queue.WithResultRecorder(testenv.Context(t)) // as the worker runs a handler
	if err := h.Handle(ctx, first); err != nil {
		t.Fatalf("first run: %v", err)
	}
	w.assertHistoryResult(no, `{"order_no":"`+no+`","did":"closed","items_restocked":2}`)
	closed := w.order(no)
	if closed.Status != orderclose.StatusClosed || closed.ClosedAt == nil || closed.CloseReason != orderclose.CloseReasonTimeout || closed.Version != 2 {
		t.Fatalf("after the first run: %+v", closed)
	}
	if got := w.stock(); got["A"] != 10 || got["B"] != 10 {
		t.Fatalf("stock after the close %v, want all of it back", got)
	}
	if n := w.closeLogs(no); n != 1 {
		t.Fatalf("close-log rows %d, want 1", n)
	}
	w.assertNoLedgerRow(no) // deleted in the handler's transaction
	before := w.snapshot()

	// No ack: the process "crashed" after the commit. The lease runs out
	// and the job is handed out again; its record finds the row gone (the
	// job finished) and the worker forgets it unrun.
	redelivered := w.claimUnrecorded(no, time.Minute)
	if redelivered.Attempt != 2 {
		t.Fatalf("redelivered attempt %d, want 2", redelivered.Attempt)
	}
	var gone *queue.GoneError
	if err := ledgerops.Of(w.led).Record(testenv.Context(t), []*queue.Job{redelivered}, "test:1"); !errors.As(err, &gone) {
		t.Fatalf("record of the redelivered close job: %v, want a GoneError", err)
	}
	w.assertNoLedgerRow(no)
	w.assertUnchanged(before, "the refused record")

	// Were it run anyway (an older process's claim that wrote a row back),
	// the handler changes nothing.
	second := w.recordedJob(no, 2)
	ctx, _ = queue.WithResultRecorder(testenv.Context(t))
	if err := h.Handle(ctx, second); err != nil {
		t.Fatalf("second run: %v", err)
	}
	w.assertHistoryResult(no, `{"order_no":"`+no+`","did":"nothing: order closed"}`)
	if again := w.order(no); !reflect.DeepEqual(again, closed) {
		t.Fatalf("second run changed the order:\n%+v\n%+v", closed, again)
	}
	w.assertUnchanged(before, "the second run")
	var cl orderclose.CloseLog
	if err := w.db.Where("order_no = ?", no).Take(&cl).Error; err != nil || cl.JobAttempt != 1 {
		t.Fatalf("close log %+v (%v): want the first attempt's", cl, err)
	}
	w.assertNoLedgerRow(no)

	d, err := w.svc.Get(testenv.Context(t), no)
	if err != nil || d.Close == nil || d.Close.ClosedAt != *closed.ClosedAt {
		t.Fatalf("Get: %+v, %v", d, err)
	}
	if _, err := w.svc.Pay(testenv.Context(t), no); !errors.Is(err, orderclose.ErrOrderClosed) {
		t.Fatalf("Pay of a closed order: %v, want ErrOrderClosed", err)
	}
	if o := w.order(no); !reflect.DeepEqual(o, closed) {
		t.Fatalf("refused payment changed the order: %+v", o)
	}
}

// A paid order's close job (in flight when the payment came, so not
// cancelled) succeeds without touching anything but its ledger row.
func TestCloseHandlerLeavesPaidOrder(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil, orderclose.Config{})
	w.seed(map[string]int64{"A": 10})
	no := w.mustCreate(orderclose.NewOrder{Items: []orderclose.Item{{SKU: "A", Quantity: 4}}, PaymentWindow: 20 * time.Millisecond}).Order.OrderNo
	job := w.claim(no, time.Minute)
	paid, err := w.svc.Pay(testenv.Context(t), no) // the cancel finds the job in flight
	if err != nil {
		t.Fatal(err)
	}
	if err := w.svc.CloseHandler().Handle(testenv.Context(t), job); err != nil {
		t.Fatalf("close of a paid order: %v", err)
	}
	if o := w.order(no); !reflect.DeepEqual(o, *paid) {
		t.Fatalf("order %+v, want it paid as it was: %+v", o, *paid)
	}
	if w.stock()["A"] != 6 || w.closeLogs(no) != 0 {
		t.Fatalf("stock %v, close logs %d: the paid order keeps its stock", w.stock(), w.closeLogs(no))
	}
	w.assertNoLedgerRow(no)
}

// A close-log row that exists already means the close was done: the order
// is closed without a second stock release.
func TestCloseHandlerDuplicateCloseLog(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil, orderclose.Config{})
	w.seed(map[string]int64{"A": 10})
	no := w.mustCreate(orderclose.NewOrder{Items: []orderclose.Item{{SKU: "A", Quantity: 4}}, PaymentWindow: time.Millisecond}).Order.OrderNo
	if err := w.db.Create(&orderclose.CloseLog{OrderNo: no, ClosedAt: 1, JobAttempt: 1}).Error; err != nil {
		t.Fatal(err)
	}
	job := w.recordedJob(no, 1)
	testenv.WaitFor(testenv.Context(t), t, "the deadline", func() bool { return time.Now().UnixMilli() > w.order(no).PayDeadline })
	if err := w.svc.CloseHandler().Handle(testenv.Context(t), job); err != nil {
		t.Fatalf("close with a close-log row present: %v", err)
	}
	if o := w.order(no); o.Status != orderclose.StatusClosed {
		t.Fatalf("order %+v, want closed", o)
	}
	if w.stock()["A"] != 6 || w.closeLogs(no) != 1 {
		t.Fatalf("stock %v, close logs %d: want no second release and one row", w.stock(), w.closeLogs(no))
	}
	w.assertNoLedgerRow(no)
}

// A close job that runs before the deadline closes nothing and asks to run
// again after it; a job id that names no order is buried at once.
func TestCloseHandlerRefusals(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil, orderclose.Config{})
	w.seed(map[string]int64{"A": 10})
	no := w.mustCreate(orderclose.NewOrder{Items: []orderclose.Item{{SKU: "A", Quantity: 4}}, PaymentWindow: time.Hour}).Order.OrderNo
	h := w.svc.CloseHandler()
	before := w.snapshot()

	early := w.recordedJob(no, 1)
	if err := h.Handle(testenv.Context(t), early); err == nil || errors.Is(err, queue.ErrSkipRetry) {
		t.Fatalf("close before the deadline: %v, want a retry", err)
	}
	if _, err := w.led.Row(testenv.Context(t), orderclose.Topic, early.ID); err != nil {
		t.Fatalf("ledger row after the early run: %v, want it kept", err)
	}

	bad := &queue.Job{Topic: orderclose.Topic, ID: "something_else:1", Attempt: 1}
	if err := h.Handle(testenv.Context(t), bad); !errors.Is(err, queue.ErrSkipRetry) {
		t.Fatalf("job with a foreign id: %v, want SkipRetry", err)
	}
	w.assertUnchanged(before, "refused close runs")
}

// A run whose claim was taken over by another worker (its ledger row now
// belongs to a later attempt) rolls its close back: the current owner
// closes the order.
func TestCloseHandlerLostClaimCommitsNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil, orderclose.Config{})
	w.seed(map[string]int64{"A": 10})
	no := w.mustCreate(orderclose.NewOrder{Items: []orderclose.Item{{SKU: "A", Quantity: 4}}, PaymentWindow: time.Millisecond}).Order.OrderNo
	testenv.WaitFor(testenv.Context(t), t, "the deadline", func() bool { return time.Now().UnixMilli() > w.order(no).PayDeadline })
	stale := w.recordedJob(no, 1)
	w.recordedJob(no, 2) // the takeover
	before := w.snapshot()
	if err := w.svc.CloseHandler().Handle(testenv.Context(t), stale); !errors.Is(err, ledger.ErrClaimLost) {
		t.Fatalf("run of a lost claim: %v, want ErrClaimLost", err)
	}
	w.assertUnchanged(before, "a run of a lost claim")
	if o := w.order(no); o.Status != orderclose.StatusPending {
		t.Fatalf("order %+v, want it still pending", o)
	}
}

package orderclose_test

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/jobs/orderclose"
	"github.com/delayq/delayq/queue"
)

// Extending a pending order moves its deadline and its close job (both
// stores) to the new deadline; bad input and orders that cannot be
// extended are refused with clear codes, writing nothing.
func TestHTTPExtend(t *testing.T) {
	t.Parallel()
	var skew atomic.Int64 // ms added to the service's clock
	w := newWorld(t, nil, orderclose.Config{Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load()) * time.Millisecond) }})
	w.seed(map[string]int64{"A": 10})
	a := newAPI(t, w)
	ctx := testenv.Context(t)

	o := a.post("/v1/orders", `{"items":[{"sku":"A","quantity":1}],"payment_window_ms":60000}`).order
	deadline := w.order(o.OrderNo).PayDeadline
	r := a.post("/v1/orders/"+o.OrderNo+"/extend", `{"by_ms":600000}`)
	if r.status != http.StatusOK || r.order.Status != orderclose.StatusPending || r.order.Version != 2 {
		t.Fatalf("extend: %d %s", r.status, r.raw)
	}
	if got := w.order(o.OrderNo).PayDeadline; got != deadline+600_000 {
		t.Fatalf("pay_deadline %d, want %d", got, deadline+600_000)
	}
	info, err := w.q.Get(ctx, orderclose.Topic, orderclose.JobID(o.OrderNo))
	if err != nil || info.State != queue.StateWaiting || info.Score != deadline+600_000 {
		t.Fatalf("close job %+v, %v; want due at the new deadline %d", info, err, deadline+600_000)
	}
	// Its payload names the order and nothing an extend could make stale:
	// the deadline is the job's due time and the order's row.
	if p := string(info.Job.Payload); p != `{"order_no":"`+o.OrderNo+`"}` {
		t.Fatalf("close job's payload %s", p)
	}
	if row, err := w.led.Row(ctx, orderclose.Topic, orderclose.JobID(o.OrderNo)); err != nil || row.RunAt != deadline+600_000 {
		t.Fatalf("close job's row %+v, %v", row, err)
	}

	// Bad input: nothing moves.
	path := "/v1/orders/" + o.OrderNo + "/extend"
	a.post(path, `{}`).wantError(t, "no by_ms", http.StatusBadRequest, "missing_field", "by_ms")
	a.post(path, `{"by_ms":0}`).wantError(t, "by_ms 0", http.StatusBadRequest, "invalid_value", "by_ms")
	a.post(path, `{"by_ms":-5}`).wantError(t, "negative", http.StatusBadRequest, "invalid_value", "by_ms")
	a.post(path, `{"by_ms":"5"}`).wantError(t, "a string", http.StatusBadRequest, "invalid_value", "by_ms")
	a.post(path, `{"by":5}`).wantError(t, "unknown field", http.StatusBadRequest, "unknown_field", "by")
	a.post(path, `{"by_ms":604800000}`).wantError(t, "past the longest window", http.StatusBadRequest, "invalid_value", "by_ms")
	a.post(path, `{"by_ms":-9223372036854775808}`).wantError(t, "-2^63", http.StatusBadRequest, "invalid_value", "by_ms")
	if got := w.order(o.OrderNo); got.PayDeadline != deadline+600_000 || got.Version != 2 {
		t.Fatalf("bad input changed the order: %+v", got)
	}
	a.post("/v1/orders/NOPE1/extend", `{"by_ms":1000}`).wantError(t, "unknown order", http.StatusNotFound, "not_found", "order_no")
	if r := a.get(path); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("GET extend: %d", r.status)
	}

	// Paid: refused.
	a.post("/v1/orders/"+o.OrderNo+"/pay", "")
	a.post(path, `{"by_ms":1000}`).wantError(t, "paid", http.StatusConflict, "order_paid", "order_no")

	// Window over (the clock moved past the deadline) but not closed yet,
	// as with order_close paused: extended as it could be paid, the new
	// window counted from now, and its close job moved there.
	late := a.post("/v1/orders", `{"items":[{"sku":"A","quantity":1}],"payment_window_ms":1000}`).order
	skew.Store(5000)
	before := time.Now().Add(5 * time.Second).UnixMilli()
	r = a.post("/v1/orders/"+late.OrderNo+"/extend", `{"by_ms":60000}`)
	after := time.Now().Add(5 * time.Second).UnixMilli()
	if got := w.order(late.OrderNo).PayDeadline; r.status != http.StatusOK || got < before+60_000 || got > after+60_000 {
		t.Fatalf("extend past the deadline: %d %s; pay_deadline %d, want now+60000 in [%d, %d]", r.status, r.raw, got, before+60_000, after+60_000)
	}
	if info, err := w.q.Get(ctx, orderclose.Topic, orderclose.JobID(late.OrderNo)); err != nil || info.Score != w.order(late.OrderNo).PayDeadline {
		t.Fatalf("close job %+v, %v; want due at the new deadline", info, err)
	}
	if err := w.db.Model(&orderclose.Order{}).Where("order_no = ?", late.OrderNo).Update("status", orderclose.StatusClosed).Error; err != nil {
		t.Fatal(err)
	}
	closed := a.post("/v1/orders/"+late.OrderNo+"/extend", `{"by_ms":1000}`)
	closed.wantError(t, "closed", http.StatusConflict, "order_closed", "order_no")
	if m := closed.err.Error.Message; !strings.Contains(m, "cannot be extended") || strings.Contains(m, "paid") {
		t.Errorf("extending a closed order says %q", m)
	}
	if _, err := w.svc.Extend(ctx, late.OrderNo, time.Second); !errors.Is(err, orderclose.ErrOrderClosed) {
		t.Fatalf("service extend of a closed order: %v", err)
	}
}

// An order extended while a worker waits for its close: it closes at the
// new deadline, not before; and one whose deadline moved while its close
// job did not (Extend's reschedule failing after its update) still closes
// no earlier: the handler checks the deadline in SQL and retries after it.
func TestExtendedOrderClosesAtItsNewDeadline(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil, orderclose.Config{})
	w.seed(map[string]int64{"A": 10})
	ctx := testenv.Context(t)
	startWorker(t, w.newWorker(queue.TopicConfig{}))

	// Windows of seconds: the create and the extend must both happen
	// before the first deadline, on a loaded machine too.
	c := w.mustCreate(orderclose.NewOrder{Items: []orderclose.Item{{SKU: "A", Quantity: 1}}, PaymentWindow: 1500 * time.Millisecond})
	o, err := w.svc.Extend(ctx, c.Order.OrderNo, 700*time.Millisecond)
	if err != nil || o.PayDeadline != c.Order.PayDeadline+700 {
		t.Fatalf("extend: %+v, %v", o, err)
	}
	w.waitSettled(ctx, "the extended order to close", func() bool { return w.order(o.OrderNo).Status == orderclose.StatusClosed })
	if got := w.order(o.OrderNo); got.ClosedAt == nil || *got.ClosedAt < o.PayDeadline {
		t.Fatalf("closed at %v, before the new deadline %d", got.ClosedAt, o.PayDeadline)
	}

	// The update without the reschedule: the job runs at the old deadline.
	c = w.mustCreate(orderclose.NewOrder{Items: []orderclose.Item{{SKU: "A", Quantity: 1}}, PaymentWindow: 1500 * time.Millisecond})
	moved := c.Order.PayDeadline + 700
	if err := w.db.Model(&orderclose.Order{}).Where("order_no = ?", c.Order.OrderNo).Update("pay_deadline", moved).Error; err != nil {
		t.Fatal(err)
	}
	w.waitSettled(ctx, "the order to close", func() bool { return w.order(c.Order.OrderNo).Status == orderclose.StatusClosed })
	if got := w.order(c.Order.OrderNo); got.ClosedAt == nil || *got.ClosedAt < moved {
		t.Fatalf("closed at %v, before the moved deadline %d", got.ClosedAt, moved)
	}
}

package orderclose_test

import (
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/jobs/orderclose"
	"github.com/delayq/delayq/queue"
)

// The embedded mode (miniredis and SQLite, as a demo runs): an order closes
// through a real worker, another is paid, and a close-log row present
// already is recognised as a duplicate on SQLite too.
func TestEmbeddedSQLiteMiniredis(t *testing.T) {
	t.Parallel()
	rdb, ns := testenv.MiniRedis(t)
	w := newWorldOn(t, rdb, ns, testenv.SQLite(t), orderclose.Config{})
	w.seed(map[string]int64{"A": 10})

	// The duplicate's close-log row goes in before any worker runs: with
	// a worker running, its close could come first and the test's own
	// insert would be the duplicate.
	dup := w.mustCreate(orderclose.NewOrder{Items: []orderclose.Item{{SKU: "A", Quantity: 1}}, PaymentWindow: time.Millisecond}).Order.OrderNo
	if err := w.db.Create(&orderclose.CloseLog{OrderNo: dup, ClosedAt: 1, JobAttempt: 1}).Error; err != nil {
		t.Fatal(err)
	}
	startWorker(t, w.newWorker(queue.TopicConfig{}))

	closing := w.mustCreate(orderclose.NewOrder{Items: []orderclose.Item{{SKU: "A", Quantity: 3}}, PaymentWindow: 50 * time.Millisecond}).Order.OrderNo
	paying := w.mustCreate(orderclose.NewOrder{Items: []orderclose.Item{{SKU: "A", Quantity: 2}}, PaymentWindow: time.Hour}).Order.OrderNo
	if _, err := w.svc.Pay(testenv.Context(t), paying); err != nil {
		t.Fatal(err)
	}
	w.waitSettled(testenv.Context(t), "both orders to close", func() bool {
		return w.order(closing).Status == orderclose.StatusClosed && w.order(dup).Status == orderclose.StatusClosed
	})
	// 10, less 1 (dup, closed without a second release) and 2 (paid); the
	// closed order's 3 came back.
	if w.stock()["A"] != 7 || w.closeLogs(closing) != 1 || w.closeLogs(dup) != 1 || w.order(paying).Status != orderclose.StatusPaid {
		t.Fatalf("stock %v, close logs %d and %d (dup), paid order %+v", w.stock(), w.closeLogs(closing), w.closeLogs(dup), w.order(paying))
	}
}

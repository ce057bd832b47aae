package orderclose_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/jobs/orderclose"
	"github.com/delayq/delayq/queue"
)

// GET /v1/orders/summary counts orders by status, says how late the recent
// closes ran, and lists the stock; an order number is still looked up.
func TestHTTPSummary(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil, orderclose.Config{})
	w.seed(map[string]int64{"A": 10, "B": 5})
	a := newAPI(t, w)

	paid := w.mustCreate(orderclose.NewOrder{Items: []orderclose.Item{{SKU: "A", Quantity: 1}}})
	if _, err := w.svc.Pay(testenv.Context(t), paid.Order.OrderNo); err != nil {
		t.Fatal(err)
	}
	w.mustCreate(orderclose.NewOrder{Items: []orderclose.Item{{SKU: "A", Quantity: 2}}}) // pending for 30 min
	closing := w.mustCreate(orderclose.NewOrder{Items: []orderclose.Item{{SKU: "B", Quantity: 3}}, PaymentWindow: 50 * time.Millisecond})
	startWorker(t, w.newWorker(queue.TopicConfig{}))
	w.waitSettled(testenv.Context(t), "the short order closed", func() bool {
		return w.order(closing.Order.OrderNo).Status == orderclose.StatusClosed
	})

	r := a.get("/v1/orders/summary")
	if r.status != http.StatusOK {
		t.Fatalf("summary: %d %s", r.status, r.raw)
	}
	var got struct {
		Orders struct {
			Created int64 `json:"created"`
			Pending int64 `json:"pending_payment"`
			Paid    int64 `json:"paid"`
			Closed  int64 `json:"closed"`
		} `json:"orders"`
		RecentCloses struct {
			WindowMs  int64   `json:"window_ms"`
			Closed    int64   `json:"closed"`
			AvgLateMs float64 `json:"avg_late_ms"`
			MaxLateMs int64   `json:"max_late_ms"`
		} `json:"recent_closes"`
		Stock []struct {
			SKU   string `json:"sku"`
			Stock int64  `json:"stock"`
		} `json:"stock"`
	}
	if err := json.Unmarshal([]byte(r.raw), &got); err != nil {
		t.Fatal(err)
	}
	o := got.Orders
	if o.Created != 3 || o.Pending != 1 || o.Paid != 1 || o.Closed != 1 {
		t.Errorf("orders: %s; want 3 created, 1 pending, 1 paid, 1 closed", r.raw)
	}
	rc := got.RecentCloses
	if rc.WindowMs != orderclose.SummaryWindow.Milliseconds() || rc.Closed != 1 || rc.MaxLateMs < 0 || rc.AvgLateMs != float64(rc.MaxLateMs) {
		t.Errorf("recent closes: %+v", rc)
	}
	// A gave 3 to open orders (1 paid, 2 pending); B got its 3 back.
	if len(got.Stock) != 2 || got.Stock[0].SKU != "A" || got.Stock[0].Stock != 7 || got.Stock[1].SKU != "B" || got.Stock[1].Stock != 5 {
		t.Errorf("stock: %+v", got.Stock)
	}
	if r := a.get("/v1/orders/" + paid.Order.OrderNo); r.status != http.StatusOK || r.order.Status != orderclose.StatusPaid {
		t.Errorf("get an order next to the summary: %d %s", r.status, r.raw)
	}
}

package orderclose_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/jobs/orderclose"
	"github.com/delayq/delayq/queue"
)

// snapshot is everything a refused request must leave as it was.
type snapshot struct {
	Orders, Items, CloseLogs int64
	Stock                    map[string]int64
	Due, InFlight            int64
}

func (w *world) snapshot() snapshot {
	w.t.Helper()
	st, err := w.q.Stats(testenv.Context(w.t), orderclose.Topic)
	if err != nil {
		w.t.Fatal(err)
	}
	return snapshot{
		Orders:    w.count(&orderclose.Order{}),
		Items:     w.count(&orderclose.OrderItem{}),
		CloseLogs: w.count(&orderclose.CloseLog{}),
		Stock:     w.stock(),
		Due:       st.Due,
		InFlight:  st.InFlight,
	}
}

func (w *world) assertUnchanged(before snapshot, what string) {
	w.t.Helper()
	if after := w.snapshot(); !reflect.DeepEqual(before, after) {
		w.t.Errorf("%s wrote something:\nbefore %+v\nafter  %+v", what, before, after)
	}
}

func TestCreateOrderTakesStockAndSchedulesClose(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil, orderclose.Config{})
	w.seed(map[string]int64{"A": 10, "B": 5})
	before := time.Now().UnixMilli()
	c := w.mustCreate(orderclose.NewOrder{User: "u1", Items: []orderclose.Item{{SKU: "B", Quantity: 1}, {SKU: "A", Quantity: 2}}})
	o := c.Order

	// The close job committed with the order (a scheduled row) and was
	// pushed to Redis, due at the deadline.
	if row, err := w.led.Row(testenv.Context(t), orderclose.Topic, orderclose.JobID(o.OrderNo)); err != nil ||
		row.State != queue.StateWaiting || row.RunAt != o.PayDeadline {
		t.Fatalf("close job row %+v, %v", row, err)
	}
	if o.Status != orderclose.StatusPending || o.AmountCents != 300 || o.Version != 1 || o.UserID != "u1" {
		t.Fatalf("order %+v", o)
	}
	if o.CreatedAt < before || o.PayDeadline != o.CreatedAt+(30*time.Minute).Milliseconds() {
		t.Fatalf("created %d deadline %d: want the default 30 min window", o.CreatedAt, o.PayDeadline)
	}
	if got := w.stock(); got["A"] != 8 || got["B"] != 4 {
		t.Fatalf("stock %v, want A 8 B 4", got)
	}
	stored := w.order(o.OrderNo)
	stored.ID = o.ID
	if !reflect.DeepEqual(stored, o) {
		t.Fatalf("stored %+v, returned %+v", stored, o)
	}

	// The close job waits in Redis, due at the deadline.
	info, err := w.q.Get(testenv.Context(t), orderclose.Topic, orderclose.JobID(o.OrderNo))
	if err != nil {
		t.Fatal(err)
	}
	if info.State != queue.StateWaiting || info.Score != o.PayDeadline || info.Job.MaxAttempts != 25 {
		t.Fatalf("close job %+v (job %+v), want scheduled at %d with 25 attempts", info, info.Job, o.PayDeadline)
	}
	var payload map[string]any
	if err := json.Unmarshal(info.Job.Payload, &payload); err != nil || payload["order_no"] != o.OrderNo {
		t.Fatalf("payload %s (%v)", info.Job.Payload, err)
	}

	d, err := w.svc.Get(testenv.Context(t), o.OrderNo)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Items) != 2 || d.Items[0].SKU != "A" || d.Items[0].Quantity != 2 || d.Items[1].SKU != "B" || d.Close != nil {
		t.Fatalf("details %+v", d)
	}

	// A window of the order's own.
	c2 := w.mustCreate(orderclose.NewOrder{Items: []orderclose.Item{{SKU: "A", Quantity: 1}}, PaymentWindow: 90 * time.Second})
	if c2.Order.PayDeadline-c2.Order.CreatedAt != 90_000 {
		t.Fatalf("window %d ms, want 90000", c2.Order.PayDeadline-c2.Order.CreatedAt)
	}
}

func TestCreateOrderRefusesShortStock(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil, orderclose.Config{})
	w.seed(map[string]int64{"A": 10, "B": 5})
	before := w.snapshot()
	// A's stock is taken first (SKU order), then B's is short: A's must
	// come back with the rollback.
	_, err := w.svc.CreateOrder(testenv.Context(t), orderclose.NewOrder{Items: []orderclose.Item{{SKU: "B", Quantity: 6}, {SKU: "A", Quantity: 2}}})
	var se *orderclose.StockError
	if !errors.As(err, &se) || !errors.Is(err, orderclose.ErrInsufficientStock) {
		t.Fatalf("err %v, want a StockError", err)
	}
	if se.SKU != "B" || se.Requested != 6 || se.Available != 5 || se.Field != "items[0].quantity" {
		t.Fatalf("StockError %+v", se)
	}
	w.assertUnchanged(before, "an order refused for short stock")

	// Exactly the stock there is: fine, and then there is none.
	w.mustCreate(orderclose.NewOrder{Items: []orderclose.Item{{SKU: "B", Quantity: 5}}})
	if _, err := w.svc.CreateOrder(testenv.Context(t), orderclose.NewOrder{Items: []orderclose.Item{{SKU: "B", Quantity: 1}}}); !errors.Is(err, orderclose.ErrInsufficientStock) {
		t.Fatalf("order on empty stock: %v", err)
	}
}

func TestCreateOrderRefusesBadInput(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil, orderclose.Config{})
	w.seed(map[string]int64{"A": 10, "B": 5})
	one := []orderclose.Item{{SKU: "A", Quantity: 1}}
	cases := []struct {
		name  string
		in    orderclose.NewOrder
		field string
		kind  error
	}{
		{"unknown sku", orderclose.NewOrder{Items: []orderclose.Item{{SKU: "A", Quantity: 1}, {SKU: "nope", Quantity: 1}}}, "items[1].sku", orderclose.ErrUnknownSKU},
		{"zero quantity", orderclose.NewOrder{Items: []orderclose.Item{{SKU: "A", Quantity: 0}}}, "items[0].quantity", nil},
		{"negative quantity", orderclose.NewOrder{Items: []orderclose.Item{{SKU: "A", Quantity: 1}, {SKU: "B", Quantity: -3}}}, "items[1].quantity", nil},
		{"huge quantity", orderclose.NewOrder{Items: []orderclose.Item{{SKU: "A", Quantity: 10_001}}}, "items[0].quantity", nil},
		{"no items", orderclose.NewOrder{}, "items", nil},
		{"empty sku", orderclose.NewOrder{Items: []orderclose.Item{{Quantity: 1}}}, "items[0].sku", nil},
		{"long sku", orderclose.NewOrder{Items: []orderclose.Item{{SKU: strings.Repeat("s", 65), Quantity: 1}}}, "items[0].sku", nil},
		{"duplicate sku", orderclose.NewOrder{Items: []orderclose.Item{{SKU: "A", Quantity: 1}, {SKU: "A", Quantity: 1}}}, "items[1].sku", nil},
		{"negative window", orderclose.NewOrder{Items: one, PaymentWindow: -time.Second}, "payment_window_ms", nil},
		{"window too long", orderclose.NewOrder{Items: one, PaymentWindow: 8 * 24 * time.Hour}, "payment_window_ms", nil},
		{"long user", orderclose.NewOrder{Items: one, User: strings.Repeat("u", 65)}, "user", nil},
	}
	before := w.snapshot()
	for _, tc := range cases {
		_, err := w.svc.CreateOrder(testenv.Context(t), tc.in)
		var ie *orderclose.InputError
		if !errors.As(err, &ie) || !errors.Is(err, orderclose.ErrInvalid) || ie.Field != tc.field {
			t.Errorf("%s: err %v, want an InputError on %s", tc.name, err, tc.field)
			continue
		}
		if tc.kind != nil && !errors.Is(err, tc.kind) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.kind)
		}
	}
	w.assertUnchanged(before, "refused orders")
}

func TestPay(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil, orderclose.Config{})
	w.seed(map[string]int64{"A": 10})
	c := w.mustCreate(orderclose.NewOrder{Items: []orderclose.Item{{SKU: "A", Quantity: 3}}})
	no := c.Order.OrderNo

	o, err := w.svc.Pay(testenv.Context(t), no)
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != orderclose.StatusPaid || o.PaidAt == nil || o.Version != 2 || o.ClosedAt != nil {
		t.Fatalf("paid order %+v", o)
	}
	// The close job was cancelled; the stock stays with the order.
	if info, err := w.q.Get(testenv.Context(t), orderclose.Topic, orderclose.JobID(no)); err != nil || info.State != queue.StateUnknown {
		t.Fatalf("close job after payment: %+v, %v; want it gone", info, err)
	}
	if got := w.stock()["A"]; got != 7 {
		t.Fatalf("stock %d, want 7", got)
	}

	// A repeated payment notification: success, nothing changes.
	again, err := w.svc.Pay(testenv.Context(t), no)
	if err != nil || !reflect.DeepEqual(again, o) {
		t.Fatalf("second Pay: %+v, %v; want %+v", again, err, o)
	}

	if _, err := w.svc.Pay(testenv.Context(t), "20990101000000ffffffffff"); !errors.Is(err, orderclose.ErrOrderNotFound) {
		t.Fatalf("Pay of an unknown order: %v", err)
	}
	if _, err := w.svc.Pay(testenv.Context(t), "bad/no"); !errors.Is(err, orderclose.ErrInvalid) {
		t.Fatalf("Pay of a malformed order number: %v", err)
	}
	if _, err := w.svc.Get(testenv.Context(t), "20990101000000ffffffffff"); !errors.Is(err, orderclose.ErrOrderNotFound) {
		t.Fatalf("Get of an unknown order: %v", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil, orderclose.Config{})
	for name, cfg := range map[string]orderclose.Config{
		"window over max":   {PaymentWindow: 2 * time.Hour, MaxPaymentWindow: time.Hour},
		"negative window":   {PaymentWindow: -time.Minute},
		"attempts":          {MaxAttempts: 101},
		"page over batch":   {SweepPageSize: 1001},
		"cron spec":         {SweepSpec: "every now and then"},
		"negative grace":    {SweepGrace: -time.Second},
		"short lock ttl":    {SweepLockTTL: time.Millisecond},
		"negative quantity": {MaxQuantity: -1},
	} {
		if _, err := orderclose.New(w.led, w.q, cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := orderclose.New(nil, w.q, orderclose.Config{}); err == nil {
		t.Error("nil ledger accepted")
	}
	cfg := w.svc.Config()
	if cfg.PaymentWindow != 30*time.Minute || cfg.SweepSpec != "@every 30s" || cfg.SweepGrace != time.Minute ||
		cfg.SweepPageSize != 500 || cfg.MaxAttempts != 25 || cfg.SweepLockKey != w.ns+":lock:orderclose-sweeper" {
		t.Fatalf("defaults %+v", cfg)
	}
}

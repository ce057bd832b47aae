package orderclose_test

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/jobs/orderclose"
)

// eachSQL runs f on a world over MariaDB and one over SQLite (the embedded
// mode), both on the shared Redis.
func eachSQL(t *testing.T, f func(t *testing.T, w *world)) {
	for name, open := range map[string]func(testing.TB) *gorm.DB{"mariadb": testenv.MySQL, "sqlite": testenv.SQLite} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rdb, ns := testenv.Redis(t)
			f(t, newWorldOn(t, rdb, ns, open(t), orderclose.Config{}))
		})
	}
}

// A create retried with its idempotency key answers with the first order
// and writes nothing: one order, stock taken once, one close job. The key
// with another request is refused, and writes nothing either.
func TestCreateOrderIdempotencyKey(t *testing.T) {
	t.Parallel()
	eachSQL(t, func(t *testing.T, w *world) {
		w.seed(map[string]int64{"A": 10, "B": 10})
		in := orderclose.NewOrder{User: "u1", IdempotencyKey: "3f2c9a51-7d4e-4b1a-9c0e-5a6b7c8d9e0f",
			Items: []orderclose.Item{{SKU: "B", Quantity: 2}, {SKU: "A", Quantity: 1}}, PaymentWindow: time.Hour}
		first := w.mustCreate(in)
		if first.Replayed {
			t.Fatalf("first create: replayed")
		}
		if k := w.order(first.Order.OrderNo).IdempotencyKey; k == nil || *k != in.IdempotencyKey {
			t.Fatalf("stored key %v, want %q", k, in.IdempotencyKey)
		}
		before := w.snapshot()

		// The same request, its lines in another order.
		again := in
		again.Items = []orderclose.Item{{SKU: "A", Quantity: 1}, {SKU: "B", Quantity: 2}}
		for i := 0; i < 3; i++ {
			c := w.mustCreate(again)
			if !c.Replayed || c.Order.OrderNo != first.Order.OrderNo || c.Order.AmountCents != 300 ||
				c.Order.PayDeadline != first.Order.PayDeadline || len(c.Items) != 2 {
				t.Fatalf("replay %d: %+v; want the first order %s, replayed", i, c, first.Order.OrderNo)
			}
		}
		w.assertUnchanged(before, "replayed creates")
		if st := w.stock(); st["A"] != 9 || st["B"] != 8 {
			t.Fatalf("stock %v: want it taken once", st)
		}

		// A replay answers with the order as it is now: extended (the
		// window it was created with is what the retry is compared with,
		// not the extended one), then paid.
		ext, err := w.svc.Extend(testenv.Context(t), first.Order.OrderNo, 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if c, err := w.svc.CreateOrder(testenv.Context(t), in); err != nil || !c.Replayed || c.Order.PayDeadline != ext.PayDeadline {
			t.Fatalf("replay of an extended order: %+v, %v; want it replayed with deadline %d", c, err, ext.PayDeadline)
		}
		if _, err := w.svc.Pay(testenv.Context(t), first.Order.OrderNo); err != nil {
			t.Fatal(err)
		}
		if c := w.mustCreate(in); !c.Replayed || c.Order.Status != orderclose.StatusPaid {
			t.Fatalf("replay of a paid order: %+v", c)
		}

		before = w.snapshot()
		for name, other := range map[string]orderclose.NewOrder{
			"another quantity":   {User: "u1", Items: []orderclose.Item{{SKU: "B", Quantity: 3}, {SKU: "A", Quantity: 1}}, PaymentWindow: time.Hour},
			"another item":       {User: "u1", Items: []orderclose.Item{{SKU: "B", Quantity: 2}}, PaymentWindow: time.Hour},
			"another user":       {User: "u2", Items: in.Items, PaymentWindow: time.Hour},
			"another window":     {User: "u1", Items: in.Items, PaymentWindow: time.Minute},
			"the default window": {User: "u1", Items: in.Items},
		} {
			other.IdempotencyKey = in.IdempotencyKey
			_, err := w.svc.CreateOrder(testenv.Context(t), other)
			var ie *orderclose.InputError
			if !errors.Is(err, orderclose.ErrIdempotencyKeyReused) || !errors.As(err, &ie) || ie.Field != "Idempotency-Key" {
				t.Errorf("%s with the key: %v; want ErrIdempotencyKeyReused naming Idempotency-Key", name, err)
			}
		}
		w.assertUnchanged(before, "creates reusing a key")

		// Another key is another order; no key, as before, always a new one.
		in.IdempotencyKey = "another-key"
		if c := w.mustCreate(in); c.Replayed || c.Order.OrderNo == first.Order.OrderNo {
			t.Fatalf("create with another key: %+v", c)
		}
		in.IdempotencyKey = ""
		a, b := w.mustCreate(in), w.mustCreate(in)
		if a.Replayed || b.Replayed || a.Order.OrderNo == b.Order.OrderNo || a.Order.IdempotencyKey != nil {
			t.Fatalf("creates without a key: %+v, %+v", a, b)
		}
		if n := w.count(&orderclose.Order{}); n != 4 {
			t.Fatalf("%d orders, want 4", n)
		}
	})
}

// Bad keys are refused, naming the key, before anything is written.
func TestCreateOrderRefusesBadIdempotencyKey(t *testing.T) {
	t.Parallel()
	eachSQL(t, func(t *testing.T, w *world) {
		w.seed(map[string]int64{"A": 10})
		before := w.snapshot()
		for name, key := range map[string]string{
			"too long":  strings.Repeat("k", orderclose.MaxIdempotencyKeyLen+1),
			"a space":   "a b",
			"a tab":     "a\tb",
			"a NUL":     "a\x00",
			"non-ASCII": "clé",
			"DEL":       "a\x7f",
		} {
			_, err := w.svc.CreateOrder(testenv.Context(t), orderclose.NewOrder{IdempotencyKey: key, Items: []orderclose.Item{{SKU: "A", Quantity: 1}}})
			var ie *orderclose.InputError
			if !errors.As(err, &ie) || ie.Field != "Idempotency-Key" || errors.Is(err, orderclose.ErrIdempotencyKeyReused) {
				t.Errorf("key with %s: %v; want an InputError naming Idempotency-Key", name, err)
			}
		}
		w.assertUnchanged(before, "creates with bad keys")
		if c := w.mustCreate(orderclose.NewOrder{IdempotencyKey: strings.Repeat("k", orderclose.MaxIdempotencyKeyLen), Items: []orderclose.Item{{SKU: "A", Quantity: 1}}}); c.Replayed {
			t.Fatalf("create with the longest key: %+v", c)
		}
	})
}

// Concurrent creates with one key make one order, and every one of them
// answers with it, even when the stock is enough for one order only (the
// losers fail on the stock the winner took, not on the key).
func TestCreateOrderIdempotencyKeyConcurrent(t *testing.T) {
	t.Parallel()
	eachSQL(t, func(t *testing.T, w *world) {
		w.seed(map[string]int64{"A": 100, "B": 3})
		for _, tc := range []struct {
			name  string
			items []orderclose.Item
		}{
			{"enough stock for all", []orderclose.Item{{SKU: "A", Quantity: 2}}},
			{"stock for one", []orderclose.Item{{SKU: "B", Quantity: 3}}},
		} {
			const n = 8
			key := "concurrent-" + strings.ReplaceAll(tc.name, " ", "-")
			var wg sync.WaitGroup
			start := make(chan struct{})
			got := make([]*orderclose.Created, n)
			errs := make([]error, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					got[i], errs[i] = w.svc.CreateOrder(testenv.Context(t), orderclose.NewOrder{IdempotencyKey: key, Items: tc.items})
				}()
			}
			close(start)
			wg.Wait()
			made := 0
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("%s: create %d: %v", tc.name, i, errs[i])
				}
				if !got[i].Replayed {
					made++
				}
				if got[i].Order.OrderNo != got[0].Order.OrderNo {
					t.Fatalf("%s: creates answered with orders %s and %s", tc.name, got[0].Order.OrderNo, got[i].Order.OrderNo)
				}
			}
			var orders int64
			if err := w.db.Model(&orderclose.Order{}).Where("idempotency_key = ?", key).Count(&orders).Error; err != nil {
				t.Fatal(err)
			}
			if made != 1 || orders != 1 {
				t.Fatalf("%s: %d creates made an order, %d orders have the key; want 1 and 1", tc.name, made, orders)
			}
		}
		if st := w.stock(); st["A"] != 98 || st["B"] != 0 {
			t.Fatalf("stock %v: want each order's taken once", st)
		}
	})
}

// Over HTTP: a replay answers 201 with the first order, its Location and
// Idempotent-Replayed; another body with the key is 422
// idempotency_key_reused; bad headers are 400 naming the header. None of
// them writes anything.
func TestHTTPIdempotencyKey(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil, orderclose.Config{})
	w.seed(map[string]int64{"A": 10, "B": 10})
	a := newAPI(t, w)
	create := func(body string, keys ...string) response {
		t.Helper()
		req, err := http.NewRequestWithContext(testenv.Context(t), http.MethodPost, a.url+"/v1/orders", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		for _, k := range keys {
			req.Header.Add("Idempotency-Key", k)
		}
		return a.send(req)
	}
	const key = "order-7f3e"
	first := create(`{"user":"u1","items":[{"sku":"A","quantity":1},{"sku":"B","quantity":2}],"payment_window_ms":60000}`, key)
	if first.status != http.StatusCreated || first.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first create: %d %v %s", first.status, first.header, first.raw)
	}
	before := w.snapshot()
	for _, body := range []string{
		`{"user":"u1","items":[{"sku":"A","quantity":1},{"sku":"B","quantity":2}],"payment_window_ms":60000}`,
		`{ "payment_window_ms": 60000, "items": [{"quantity": 2, "sku": "B"}, {"sku": "A", "quantity": 1}], "user": "u1" }`,
	} {
		r := create(body, key)
		if r.status != http.StatusCreated || r.header.Get("Idempotent-Replayed") != "true" ||
			r.header.Get("Location") != first.header.Get("Location") || r.order.OrderNo != first.order.OrderNo ||
			r.order.PayDeadline != first.order.PayDeadline || len(r.order.Items) != 2 {
			t.Fatalf("replay: %d %v %s; want 201 with order %s", r.status, r.header, r.raw, first.order.OrderNo)
		}
	}
	create(`{"user":"u1","items":[{"sku":"A","quantity":2},{"sku":"B","quantity":2}],"payment_window_ms":60000}`, key).
		wantError(t, "the key with another body", 422, "idempotency_key_reused", "Idempotency-Key")
	create(`{"user":"u1","items":[{"sku":"A","quantity":1},{"sku":"B","quantity":2}]}`, key).
		wantError(t, "the key with the default window", 422, "idempotency_key_reused", "Idempotency-Key")
	ok := `{"items":[{"sku":"A","quantity":1}]}`
	create(ok, "").wantError(t, "an empty key", 400, "invalid_value", "Idempotency-Key")
	create(ok, "k1", "k2").wantError(t, "two keys", 400, "invalid_value", "Idempotency-Key")
	create(ok, strings.Repeat("k", 65)).wantError(t, "a key too long", 400, "invalid_value", "Idempotency-Key")
	create(ok, "a b").wantError(t, "a key with a space", 400, "invalid_value", "Idempotency-Key")
	create(ok, "cl\u00e9").wantError(t, "a non-ASCII key", 400, "invalid_value", "Idempotency-Key")
	// The header is checked before the body: a bad key with a bad body
	// names the key.
	create(`{"items":[]}`, "a b").wantError(t, "a bad key and a bad body", 400, "invalid_value", "Idempotency-Key")
	// A bad body with a good key writes nothing, and leaves the key free.
	create(`{"items":[{"sku":"A","quantity":100}]}`, "fresh").wantError(t, "short stock", 409, "insufficient_stock", "items[0].quantity")
	w.assertUnchanged(before, "replays and refused creates")
	if r := create(ok, "fresh"); r.status != http.StatusCreated || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("create with a key a refused create used: %d %s", r.status, r.raw)
	}
}

package orderclose_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/jobs/orderclose"
	"github.com/delayq/delayq/queue"
)

// TestPayCloseRace races, for each of 1,000 orders, its payment against its
// close job: the close job runs in a real worker at the pay deadline, the
// payment comes from another goroutine at the deadline give or take a few
// milliseconds. Every order must end either paid (its stock kept, no
// close-log row) or closed (its stock given back exactly once, one
// close-log row), the payment's answer must agree, and for every SKU the
// stock left plus the stock paid orders hold must equal the initial stock.
func TestPayCloseRace(t *testing.T) {
	t.Parallel()
	const (
		orders   = 1000
		creators = 8
		window   = 300 * time.Millisecond
	)
	// The log tells how often the two really met: a payment that found the
	// close job running, a close job that found the order paid.
	hook := &countHook{n: map[string]int{}}
	log := testenv.QuietLogger()
	log.SetLevel(logrus.DebugLevel)
	log.AddHook(hook)
	w := newWorld(t, nil, orderclose.Config{Logger: log})
	initial := map[string]int64{"A": 5000, "B": 5000, "C": 5000, "D": 5000, "E": 5000}
	skus := []string{"A", "B", "C", "D", "E"}
	w.seed(initial)
	startWorker(t, w.newWorker(queue.TopicConfig{Concurrency: 16, Lease: 10 * time.Second}))

	type result struct {
		no  string
		err error
	}
	var (
		pays    sync.WaitGroup
		mu      sync.Mutex
		results = make([]result, 0, orders)
		created atomic.Int64
	)
	pay := func(no string) {
		defer pays.Done()
		_, err := w.svc.Pay(testenv.Context(t), no)
		mu.Lock()
		results = append(results, result{no, err})
		mu.Unlock()
	}

	work := make(chan int)
	var creating sync.WaitGroup
	for c := 0; c < creators; c++ {
		creating.Add(1)
		go func() {
			defer creating.Done()
			for i := range work {
				rng := rand.New(rand.NewPCG(uint64(i), 42))
				var items []orderclose.Item
				for _, k := range rng.Perm(len(skus))[:1+rng.IntN(3)] {
					items = append(items, orderclose.Item{SKU: skus[k], Quantity: 1 + rng.Int64N(3)})
				}
				c, err := w.svc.CreateOrder(testenv.Context(t), orderclose.NewOrder{User: fmt.Sprint("u", i), Items: items, PaymentWindow: window})
				if err != nil {
					t.Errorf("create order %d: %v", i, err)
					continue
				}
				created.Add(1)
				// Pay at the deadline, up to 15 ms before it to 30 ms after.
				jitter := time.Duration(rng.IntN(45)-15) * time.Millisecond
				at := time.UnixMilli(c.Order.PayDeadline).Add(jitter)
				pays.Add(1)
				time.AfterFunc(time.Until(at), func() { pay(c.Order.OrderNo) })
			}
		}()
	}
	start := time.Now()
	for i := 0; i < orders; i++ {
		work <- i
	}
	close(work)
	creating.Wait()
	t.Logf("%d orders created in %v", created.Load(), time.Since(start).Round(time.Millisecond))
	if created.Load() != orders {
		t.Fatalf("created %d orders of %d", created.Load(), orders)
	}
	pays.Wait()
	w.waitSettled(testenv.Context(t), "every order to be paid or closed", func() bool {
		var n int64
		if err := w.db.Model(&orderclose.Order{}).Where("status = ?", orderclose.StatusPending).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	// Every close job finished: no ledger row, nothing left in Redis.
	w.waitSettled(testenv.Context(t), "the close jobs to finish", func() bool {
		n, err := w.led.Count(testenv.Context(t))
		if err != nil {
			t.Fatal(err)
		}
		st, err := w.q.Stats(testenv.Context(t), orderclose.Topic)
		if err != nil {
			t.Fatal(err)
		}
		return n == 0 && st.Due == 0 && st.InFlight == 0 && st.Dead == 0
	})

	// Each order's status against its close-log rows and its payment.
	type row struct {
		OrderNo string
		Status  string
		Logs    int64
	}
	var rows []row
	if err := w.db.Raw(`SELECT o.order_no, o.status, COUNT(l.id) AS logs FROM orders o
		LEFT JOIN order_close_log l ON l.order_no = o.order_no GROUP BY o.order_no, o.status`).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	status := make(map[string]string, len(rows))
	var paid, closed int
	for _, r := range rows {
		status[r.OrderNo] = r.Status
		switch {
		case r.Status == orderclose.StatusPaid && r.Logs == 0:
			paid++
		case r.Status == orderclose.StatusClosed && r.Logs == 1:
			closed++
		default:
			t.Errorf("order %s: status %s with %d close-log rows", r.OrderNo, r.Status, r.Logs)
		}
	}
	if paid+closed != orders {
		t.Fatalf("%d paid + %d closed, want %d orders", paid, closed, orders)
	}
	lostRace := 0
	for _, r := range results {
		switch {
		case r.err == nil && status[r.no] == orderclose.StatusPaid:
		case errors.Is(r.err, orderclose.ErrOrderClosed) && status[r.no] == orderclose.StatusClosed:
			lostRace++
		default:
			t.Errorf("order %s is %s but its payment said %v", r.no, status[r.no], r.err)
		}
	}
	t.Logf("%d paid, %d closed (%d payments refused as too late); %d payments found the close job running, %d close jobs found the order paid",
		paid, closed, lostRace, hook.count("close job in flight: it will find the order paid"), hook.count("order not pending: nothing to close"))
	if paid == 0 || closed == 0 {
		t.Errorf("no race: %d paid, %d closed", paid, closed)
	}

	// Stock: what is left plus what paid orders hold is what there was.
	var held []struct {
		SKU string
		Qty int64
	}
	if err := w.db.Raw(`SELECT i.sku AS sku, SUM(i.quantity) AS qty FROM order_items i
		JOIN orders o ON o.order_no = i.order_no WHERE o.status = ? GROUP BY i.sku`, orderclose.StatusPaid).Scan(&held).Error; err != nil {
		t.Fatal(err)
	}
	left := w.stock()
	var total, want int64
	for _, h := range held {
		left[h.SKU] += h.Qty
	}
	for sku, n := range initial {
		if left[sku] != n {
			t.Errorf("sku %s: stock + held by paid orders = %d, want %d", sku, left[sku], n)
		}
		total += left[sku]
		want += n
	}
	if total != want {
		t.Errorf("total stock + held = %d, want %d", total, want)
	}
}

// countHook counts log messages.
type countHook struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *countHook) Levels() []logrus.Level { return logrus.AllLevels }
func (h *countHook) Fire(e *logrus.Entry) error {
	h.mu.Lock()
	h.n[e.Message]++
	h.mu.Unlock()
	return nil
}

func (h *countHook) count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[msg]
}

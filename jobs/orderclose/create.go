package orderclose

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sirupsen/logrus"
	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// Item is one line of a new order.
type Item struct {
	SKU      string
	Quantity int64
}

// NewOrder is an order to create.
type NewOrder struct {
	// User is who placed the order; optional, at most 64 bytes of UTF-8.
	User  string
	Items []Item
	// PaymentWindow is how long the order waits for its payment; 0 means
	// Config.PaymentWindow.
	PaymentWindow time.Duration
	// IdempotencyKey, if set, makes the create safe to retry: it is stored
	// with the order (1 to MaxIdempotencyKeyLen bytes of visible ASCII,
	// unique across all orders, kept as long as the order), and a create
	// with a key that already made an order writes nothing and answers
	// with that order (Created.Replayed) if it asks for the same user,
	// items and payment window, or an *InputError of kind
	// ErrIdempotencyKeyReused if not.
	IdempotencyKey string
}

// Created is a new order. Its close job was committed with it (the topic is
// durable): there is no order without its close job.
type Created struct {
	OrderDetails
	// Replayed is true when NewOrder.IdempotencyKey had made this order
	// already: nothing was written, and Order is the order as it is now.
	Replayed bool
}

// line is a validated item with its position in the request.
type line struct {
	Item
	idx int
}

func (l line) field(name string) string { return fmt.Sprintf("items[%d].%s", l.idx, name) }

// CreateOrder creates an order pending payment: in one transaction it takes
// the stock of every line (a conditional update that never lets stock go
// below zero), inserts the order and its lines, and enqueues the order's
// close job, due at the pay deadline, as a waiting row of the durable
// topic (dataplane.Client.EnqueueTx): the order and its close job commit
// together or not at all. After the commit the job is pushed to Redis; if
// that fails (Redis down) or the process dies first, the relay pushes it
// (docs/design.md §4.11), so the create does not fail for it.
//
// Bad input returns an *InputError (errors.Is ErrInvalid; an unknown SKU
// also ErrUnknownSKU), short stock a *StockError (ErrInsufficientStock);
// either way nothing was written.
//
// With an idempotency key, a key that made an order already is a replay
// (see NewOrder.IdempotencyKey), looked for before the transaction and
// again after a failed one: of two concurrent creates with one key, the
// unique key lets one commit, and the other answers with its order.
func (s *Service) CreateOrder(ctx context.Context, in NewOrder) (*Created, error) {
	lines, window, err := s.validate(in)
	if err != nil {
		return nil, err
	}
	if in.IdempotencyKey != "" {
		if c, err := s.replay(ctx, in, lines, window); c != nil || err != nil {
			return c, err
		}
	}
	now := s.cfg.Now()
	var order Order
	var items []OrderItem
	var staged *dataplane.Staged
	// An order number is 40 random bits per second: a collision is
	// improbable, but would only cost another try.
	for try := 1; ; try++ {
		no, err := newOrderNo(now)
		if err != nil {
			return nil, err
		}
		order = Order{
			OrderNo:     no,
			UserID:      in.User,
			Status:      StatusPending,
			CreatedAt:   now.UnixMilli(),
			PayDeadline: now.Add(window).UnixMilli(),
			// The window as the deadline minus the creation time, both
			// rounded down to the ms, so that the two agree exactly.
			PaymentWindowMs: now.Add(window).UnixMilli() - now.UnixMilli(),
			Version:         1,
		}
		if in.IdempotencyKey != "" {
			order.IdempotencyKey = &in.IdempotencyKey
		}
		items = make([]OrderItem, len(lines))
		for i, l := range lines {
			items[i] = OrderItem{OrderNo: no, SKU: l.SKU, Quantity: l.Quantity}
		}
		err = ledger.RetryDeadlocks(ctx, func() error {
			return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
				if err := s.insertOrder(tx, &order, lines, items); err != nil {
					return err
				}
				staged, err = s.enqueueClose(ctx, tx, &order)
				return err
			})
		})
		if err == nil {
			break
		}
		if in.IdempotencyKey != "" {
			// Another create with the key may have committed meanwhile
			// (this one then failed on the key, or on the stock it took).
			// A failed look-up leaves err to speak for the create.
			if c, rerr := s.replay(ctx, in, lines, window); c != nil || errors.Is(rerr, ErrIdempotencyKeyReused) {
				return c, rerr
			}
		}
		if try < 3 && isDuplicate(s.db, err) {
			continue
		}
		return nil, err
	}
	s.orderLog(order.OrderNo).WithFields(logrus.Fields{
		"amount_cents": order.AmountCents, "pay_deadline": order.PayDeadline,
	}).Debug("order created")
	s.pushClose(ctx, &order, staged)
	return &Created{OrderDetails: OrderDetails{Order: order, Items: items}}, nil
}

// validate checks a new order before anything is read or written. It
// returns its lines sorted by SKU (the order every transaction of the
// package takes SKU rows in, so two of them never deadlock on each other)
// and its payment window.
func (s *Service) validate(in NewOrder) ([]line, time.Duration, error) {
	if err := validIdempotencyKey(in.IdempotencyKey); err != nil {
		return nil, 0, err
	}
	if len(in.User) > maxUserLen || !utf8.ValidString(in.User) {
		return nil, 0, &InputError{Field: "user", Reason: fmt.Sprintf("want at most %d bytes of UTF-8", maxUserLen)}
	}
	window := in.PaymentWindow
	if window == 0 {
		window = s.cfg.PaymentWindow
	}
	if window < time.Millisecond || window > s.cfg.MaxPaymentWindow {
		return nil, 0, &InputError{Field: "payment_window_ms",
			Reason: fmt.Sprintf("%d: want 1 to %d milliseconds", in.PaymentWindow.Milliseconds(), s.cfg.MaxPaymentWindow.Milliseconds())}
	}
	if len(in.Items) == 0 {
		return nil, 0, &InputError{Field: "items", Reason: "an order needs at least one item"}
	}
	if len(in.Items) > s.cfg.MaxItems {
		return nil, 0, &InputError{Field: "items", Reason: fmt.Sprintf("%d items: limit is %d", len(in.Items), s.cfg.MaxItems)}
	}
	lines := make([]line, len(in.Items))
	seen := make(map[string]int, len(in.Items))
	for i, it := range in.Items {
		l := line{Item: it, idx: i}
		if it.SKU == "" || len(it.SKU) > maxSKULen || !utf8.ValidString(it.SKU) {
			return nil, 0, &InputError{Field: l.field("sku"), Reason: fmt.Sprintf("want 1-%d bytes of UTF-8", maxSKULen)}
		}
		if j, dup := seen[it.SKU]; dup {
			return nil, 0, &InputError{Field: l.field("sku"), Reason: fmt.Sprintf("%q is already items[%d]: give each SKU once", it.SKU, j)}
		}
		seen[it.SKU] = i
		if it.Quantity < 1 || it.Quantity > s.cfg.MaxQuantity {
			return nil, 0, &InputError{Field: l.field("quantity"), Reason: fmt.Sprintf("%d: want 1 to %d", it.Quantity, s.cfg.MaxQuantity)}
		}
		lines[i] = l
	}
	slices.SortFunc(lines, func(a, b line) int { return strings.Compare(a.SKU, b.SKU) })
	return lines, window, nil
}

// insertOrder is CreateOrder's transaction: it prices the lines, takes
// their stock in SKU order, and inserts the order and its items.
func (s *Service) insertOrder(tx *gorm.DB, order *Order, lines []line, items []OrderItem) error {
	skus := make([]string, len(lines))
	for i, l := range lines {
		skus[i] = l.SKU
	}
	var rows []SKU
	if err := tx.Where("sku IN ?", skus).Find(&rows).Error; err != nil {
		return fmt.Errorf("orderclose: create order: read skus: %w", err)
	}
	price := make(map[string]int64, len(rows))
	for _, r := range rows {
		price[r.SKU] = r.PriceCents
	}
	var amount int64
	for _, l := range byRequest(lines) {
		p, ok := price[l.SKU]
		if !ok {
			return &InputError{Field: l.field("sku"), Kind: ErrUnknownSKU, Reason: fmt.Sprintf("%q: no such SKU", l.SKU)}
		}
		if p > 0 && l.Quantity > (math.MaxInt64-amount)/p {
			return &InputError{Field: l.field("quantity"), Reason: "the order's amount overflows"}
		}
		amount += l.Quantity * p
	}
	order.AmountCents = amount

	for _, l := range lines {
		res := tx.Model(&SKU{}).Where("sku = ? AND stock >= ?", l.SKU, l.Quantity).
			Update("stock", gorm.Expr("stock - ?", l.Quantity))
		if res.Error != nil {
			return fmt.Errorf("orderclose: create order: take stock of %s: %w", l.SKU, res.Error)
		}
		if res.RowsAffected == 0 {
			var left SKU
			if err := tx.Select("stock").Where("sku = ?", l.SKU).Take(&left).Error; err != nil {
				return fmt.Errorf("orderclose: create order: read stock of %s: %w", l.SKU, err)
			}
			return &StockError{Field: l.field("quantity"), SKU: l.SKU, Requested: l.Quantity, Available: left.Stock}
		}
	}
	if err := tx.Create(order).Error; err != nil {
		return fmt.Errorf("orderclose: create order %s: %w", order.OrderNo, err)
	}
	if err := tx.Create(&items).Error; err != nil {
		return fmt.Errorf("orderclose: create order %s: items: %w", order.OrderNo, err)
	}
	return nil
}

// byRequest returns lines in the order the request gave them, so that the
// first bad line is the one reported.
func byRequest(lines []line) []line {
	out := slices.Clone(lines)
	slices.SortFunc(out, func(a, b line) int { return a.idx - b.idx })
	return out
}

// closePayload is the close job's payload: the job id already names the
// order; the payload makes the job readable in redis-cli and the ledger.
// The deadline is not in it: an extend moves the order's row and the job's
// due time, and a copy here would go stale (the handler reads the row).
type closePayload struct {
	OrderNo string `json:"order_no"`
}

// enqueueClose writes the order's close job, due at its pay deadline, in
// the order's transaction tx.
func (s *Service) enqueueClose(ctx context.Context, tx *gorm.DB, o *Order) (*dataplane.Staged, error) {
	payload, err := json.Marshal(closePayload{OrderNo: o.OrderNo})
	if err != nil {
		return nil, fmt.Errorf("orderclose: create order %s: close job: %w", o.OrderNo, err)
	}
	staged, err := s.q.EnqueueTx(ctx, s.led.Tx(tx), Topic, queue.NewJob{
		ID:          JobID(o.OrderNo),
		Payload:     payload,
		RunAt:       o.PayDeadline,
		MaxAttempts: s.cfg.MaxAttempts,
	})
	if err != nil {
		return nil, fmt.Errorf("orderclose: create order %s: close job: %w", o.OrderNo, err)
	}
	switch r := staged.Results()[0]; r.Status {
	case queue.BatchInvalid:
		return nil, fmt.Errorf("orderclose: create order %s: close job: %w", o.OrderNo, r.Err)
	case queue.BatchDuplicate:
		// A close job of this order number waits already: the order
		// number was taken, and the insert of the order failed first.
		return nil, fmt.Errorf("orderclose: create order %s: its close job exists already", o.OrderNo)
	}
	return staged, nil
}

// pushClose pushes a committed close job to Redis. It outlives a cancelled
// ctx (a client that hung up after the commit) but not
// Config.EnqueueTimeout; a failure is only logged: the job is safe in SQL
// and the relay pushes it.
func (s *Service) pushClose(ctx context.Context, o *Order, staged *dataplane.Staged) {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.EnqueueTimeout)
	defer cancel()
	if err := s.q.Push(pctx, staged); err != nil {
		s.orderLog(o.OrderNo).WithError(err).Warn("order and close job committed; the push to Redis failed: the relay pushes it")
	}
}

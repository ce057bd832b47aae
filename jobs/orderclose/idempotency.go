package orderclose

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// IdempotencyKeyField is how an idempotency key is named in errors: the
// HTTP header that carries it.
const IdempotencyKeyField = "Idempotency-Key"

// validIdempotencyKey checks a key: empty (none), or 1 to
// MaxIdempotencyKeyLen bytes of visible ASCII (0x21-0x7E), so that it
// survives an HTTP header unchanged (no spaces to be trimmed, no bytes a
// proxy could re-encode) and compares byte for byte.
func validIdempotencyKey(key string) error {
	bad := len(key) > MaxIdempotencyKeyLen
	for i := 0; i < len(key) && !bad; i++ {
		bad = key[i] < 0x21 || key[i] > 0x7e
	}
	if bad {
		return &InputError{Field: IdempotencyKeyField,
			Reason: fmt.Sprintf("want 1 to %d characters of visible ASCII (no spaces), such as a UUID", MaxIdempotencyKeyLen)}
	}
	return nil
}

// replay looks for the order created with in's idempotency key. It returns
// nil, nil when there is none; the order, marked Replayed, when there is
// one and in asks for the same order; and an *InputError of kind
// ErrIdempotencyKeyReused when in asks for another. It reads only.
func (s *Service) replay(ctx context.Context, in NewOrder, lines []line, window time.Duration) (*Created, error) {
	db := s.db.WithContext(ctx)
	var o Order
	err := db.Where("idempotency_key = ?", in.IdempotencyKey).Take(&o).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("orderclose: create order: look up its idempotency key: %w", err)
	}
	var items []OrderItem
	if err := db.Where("order_no = ?", o.OrderNo).Order("sku").Find(&items).Error; err != nil {
		return nil, fmt.Errorf("orderclose: create order: replay %s: items: %w", o.OrderNo, err)
	}
	if !sameOrder(&o, items, in.User, lines, window) {
		return nil, &InputError{Field: IdempotencyKeyField, Kind: ErrIdempotencyKeyReused,
			Reason: "this key created an order with another request (user, items or payment window): send a new key for a new order"}
	}
	s.orderLog(o.OrderNo).WithField("idempotency_key", in.IdempotencyKey).Debug("order create replayed")
	return &Created{OrderDetails: OrderDetails{Order: o, Items: items}, Replayed: true}, nil
}

// sameOrder reports whether an order and its items (by SKU) are what a
// request asks for: the same user, the same lines (sorted by SKU, as
// validate returns them) and the same payment window. Comparing what the
// request means rather than its bytes lets a retry reorder its JSON.
func sameOrder(o *Order, items []OrderItem, user string, lines []line, window time.Duration) bool {
	// The stored window is the deadline minus the creation time, both
	// rounded down to the millisecond: a window with a fraction of a
	// millisecond may come out one more. It is the window the order was
	// created with, which an extend leaves alone; a row made before the
	// column existed has 0 there, and its deadline minus its creation time
	// stands in, as before.
	stored := o.PaymentWindowMs
	if stored == 0 {
		stored = o.PayDeadline - o.CreatedAt
	}
	if d := stored - window.Milliseconds(); o.UserID != user || d < 0 || d > 1 || len(items) != len(lines) {
		return false
	}
	for i, it := range items {
		if it.SKU != lines[i].SKU || it.Quantity != lines[i].Quantity {
			return false
		}
	}
	return true
}

package orderclose

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalid is wrapped by every InputError.
	ErrInvalid = errors.New("invalid order input")
	// ErrUnknownSKU is the kind of an InputError naming a SKU that does
	// not exist.
	ErrUnknownSKU = errors.New("unknown sku")
	// ErrInsufficientStock is wrapped by every StockError.
	ErrInsufficientStock = errors.New("insufficient stock")
	// ErrOrderNotFound is returned for an order number that does not exist.
	ErrOrderNotFound = errors.New("order not found")
	// ErrOrderClosed is returned by Pay for an order that was closed.
	ErrOrderClosed = errors.New("order is closed")
	// ErrIdempotencyKeyReused is the kind of an InputError refusing a
	// create whose idempotency key made an order with another request.
	ErrIdempotencyKeyReused = errors.New("idempotency key reused")
)

// InputError is bad input, refused before anything was written. It names
// the field (as the HTTP request spells it, e.g. "items[2].quantity") and
// what is wrong with it; errors.Is matches both ErrInvalid and its Kind
// (ErrUnknownSKU, ErrIdempotencyKeyReused, or nil for malformed values).
type InputError struct {
	Field  string
	Reason string
	Kind   error // ErrUnknownSKU, ErrIdempotencyKeyReused, or nil
}

func (e *InputError) Error() string {
	return fmt.Sprintf("orderclose: %s: %s", e.Field, e.Reason)
}

// Unwrap lets errors.Is match ErrInvalid and the kind.
func (e *InputError) Unwrap() []error {
	if e.Kind == nil {
		return []error{ErrInvalid}
	}
	return []error{e.Kind, ErrInvalid}
}

// StockError refuses an order because one of its SKUs has too little stock;
// nothing was written. errors.Is matches ErrInsufficientStock.
type StockError struct {
	Field     string // the line's quantity, e.g. "items[0].quantity"
	SKU       string
	Requested int64
	Available int64 // as last read; it may have changed since
}

func (e *StockError) Error() string {
	return fmt.Sprintf("orderclose: %s: sku %q: %d requested, %d available", ErrInsufficientStock, e.SKU, e.Requested, e.Available)
}

// Unwrap lets errors.Is match ErrInsufficientStock.
func (e *StockError) Unwrap() error { return ErrInsufficientStock }

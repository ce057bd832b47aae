package orderclose

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"
)

// newOrderNo returns a fresh order number: the UTC creation time to the
// second and 10 random hex digits, e.g. "20240102150405a1b2c3d4e5". It sorts
// by creation time, and it is a valid job id suffix.
func newOrderNo(now time.Time) (string, error) {
	b := make([]byte, 5)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("orderclose: order number: %w", err)
	}
	return now.UTC().Format("20060102150405") + hex.EncodeToString(b), nil
}

// validOrderNo checks an order number as a request may spell it: 1-64 of
// [A-Za-z0-9_-]. Anything else cannot name an order.
func validOrderNo(no string) error {
	if no == "" || len(no) > maxOrderNoLen {
		return &InputError{Field: "order_no", Reason: fmt.Sprintf("want 1-%d characters of [A-Za-z0-9_-]", maxOrderNoLen)}
	}
	for i := 0; i < len(no); i++ {
		c := no[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return &InputError{Field: "order_no", Reason: fmt.Sprintf("%q: want 1-%d characters of [A-Za-z0-9_-]", no, maxOrderNoLen)}
		}
	}
	return nil
}

package queue

import (
	"math/rand/v2"
	"time"
)

// Backoff is the delay before a failed job's next attempt:
// Base * 2^(attempt-1), capped at Cap, then spread by ±Jitter so that jobs
// that failed together do not retry together.
type Backoff struct {
	Base   time.Duration // default 1s
	Cap    time.Duration // default 1h
	Jitter float64       // fraction, 0 to 1; default 0.2, negative for none
}

func (b Backoff) withDefaults() Backoff {
	if b.Base <= 0 {
		b.Base = time.Second
	}
	if b.Cap <= 0 {
		b.Cap = time.Hour
	}
	if b.Jitter == 0 {
		b.Jitter = 0.2
	}
	b.Jitter = min(max(b.Jitter, 0), 1)
	return b
}

// Delay returns the backoff after the given failed attempt (1-based).
func (b Backoff) Delay(attempt int) time.Duration {
	d := b.Base
	for i := 1; i < attempt && d < b.Cap; i++ {
		d *= 2
	}
	d = min(d, b.Cap)
	if b.Jitter > 0 {
		spread := float64(d) * b.Jitter
		d += time.Duration(spread * (2*rand.Float64() - 1))
	}
	return max(d, 0)
}

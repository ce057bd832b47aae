package queue

import (
	"fmt"
	"math"
)

// RateLimit caps a topic's handler starts across every worker of the
// cluster: a token bucket in Redis, on Redis's clock (docs/design.md
// §4.16). The zero value means no limit.
type RateLimit struct {
	// PerSecond is the steady rate, handler starts per second; 0 = none.
	PerSecond float64
	// Burst is the bucket's size: the most starts at once after an idle
	// spell. At least 1 when PerSecond is set.
	Burst int
}

// Bounds of a rate limit: beyond them the script's arithmetic (the bucket's
// expiry in ms) leaves exact integers, and no real topic needs more.
const (
	MinRatePerSecond = 0.001 // one start in about 17 minutes
	MaxRatePerSecond = 1e6
	MaxRateBurst     = 1_000_000
)

// Validate checks l: PerSecond 0 (none) or within [MinRatePerSecond,
// MaxRatePerSecond], Burst within [1, MaxRateBurst] when PerSecond is set.
func (l RateLimit) Validate() error {
	switch r := l.PerSecond; {
	case math.IsNaN(r) || math.IsInf(r, 0) || r < 0 || (r > 0 && r < MinRatePerSecond) || r > MaxRatePerSecond:
		return fmt.Errorf("rate limit %v: want %v-%v starts per second, 0 for none", r, MinRatePerSecond, MaxRatePerSecond)
	case l.Burst < 0 || l.Burst > MaxRateBurst:
		return fmt.Errorf("rate burst %d: want 0-%d", l.Burst, MaxRateBurst)
	case r > 0 && l.Burst < 1:
		return fmt.Errorf("rate burst %d: must be at least 1 with a rate limit", l.Burst)
	}
	return nil
}

// DefaultRateBurst is the burst of a rate limit that sets none: a tenth of a
// second's starts (at least 1), so a 1 s window never holds more than 1.1 ×
// the rate, while a claim still takes a useful batch.
func DefaultRateBurst(perSecond float64) int {
	return max(1, int(math.Ceil(perSecond/10)))
}

package httpjson

import (
	"math"
	"time"
)

// maxMillis is the largest millisecond count a time.Duration holds.
const maxMillis = math.MaxInt64 / int64(time.Millisecond)

// Millis converts a millisecond count from a request into a duration; ok is
// false when it does not fit one (|ms| over about 292 years). Converting
// such a count would wrap: -2^63 ms becomes 0 ("now"), and other values land
// anywhere. Callers refuse !ok as out of range, on both sides.
func Millis(ms int64) (d time.Duration, ok bool) {
	if ms > maxMillis || ms < -maxMillis {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

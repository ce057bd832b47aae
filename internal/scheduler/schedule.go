package scheduler

import (
	"time"

	"github.com/robfig/cron/v3"
)

// latestTick returns the latest tick t of sched with after < t <= now, or
// the zero time if there is none. It searches back from now in a window
// that doubles, so a long outage of a frequent schedule costs a few dozen
// Next calls, not one per missed tick.
func latestTick(sched cron.Schedule, after, now time.Time) time.Time {
	first := sched.Next(after)
	if first.IsZero() || first.After(now) {
		return time.Time{}
	}
	for w := time.Second; ; w *= 2 {
		start := now.Add(-w)
		if !start.After(after) {
			start = after
		}
		t := sched.Next(start)
		if !t.IsZero() && !t.After(now) {
			for {
				n := sched.Next(t)
				if n.IsZero() || n.After(now) {
					return t
				}
				t = n
			}
		}
		if start.Equal(after) {
			return first // not reached: first <= now
		}
	}
}

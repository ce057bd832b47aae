package dataplane

import "context"

// reconnectRounds tells a re-subscription (Redis came back after a
// disconnect) from the first subscription. go-redis re-subscribes every
// channel at once after a reconnect and Redis confirms each one, so the
// n-th confirmation of a channel belongs to the n-th connection; the first
// confirmation of round n >= 2 stands for the whole reconnect.
type reconnectRounds struct {
	seen     map[string]int // channel -> confirmations so far
	reported int            // the last round reported as a reconnect
}

// confirmed records one subscription confirmation of channel and reports
// whether it is the first sign of a new reconnect.
func (r *reconnectRounds) confirmed(channel string) bool {
	if r.seen == nil {
		r.seen = make(map[string]int)
	}
	r.seen[channel]++
	round := r.seen[channel]
	if round < 2 || round <= r.reported {
		return false
	}
	r.reported = round
	return true
}

// reconnectHook calls OnRedisReconnect once per signal on kicks, one call at
// a time, until ctx ends. Reconnects that happen while a call runs are
// folded into one more call (kicks holds at most one).
func (w *Worker) reconnectHook(ctx context.Context, kicks <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-kicks:
		}
		w.log.Info("redis connection back (wake channels re-subscribed): running the reconnect hook")
		w.cfg.OnRedisReconnect(ctx)
	}
}

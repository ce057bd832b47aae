package dataplane

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// cancelMessage starts a message on a wake channel that asks the worker
// holding a job to cancel its run ("cancel <id>", cancelrun.lua); every
// other message is a wake.
const cancelMessage = "cancel "

// listenWake subscribes to every partition's wake channel (a topic of one
// partition has its own) and nudges the partition's fetcher on each
// message. go-redis re-subscribes after a
// disconnect; each (re)subscription confirmation wakes every fetcher, so
// claims resume at once when Redis is back, and each re-subscription after
// the first one counts as a Redis reconnect (see WorkerConfig.OnRedisReconnect).
func (w *Worker) listenWake(ctx context.Context) {
	var channels []string
	w.wakeParts.Range(func(ch, _ any) bool {
		channels = append(channels, ch.(string))
		return true
	})
	wake := func(ch string) bool {
		if p, ok := w.wakeParts.Load(ch); ok {
			signal(p.(*part).wake)
			return true
		}
		return false
	}

	var hooks sync.WaitGroup
	defer hooks.Wait()
	reconnected := make(chan struct{}, 1)
	if w.cfg.OnRedisReconnect != nil {
		hooks.Add(1)
		go func() { defer hooks.Done(); w.reconnectHook(ctx, reconnected) }()
	}
	var rounds reconnectRounds

	ps := w.c.rdb.Subscribe(ctx, channels...)
	defer ps.Close()
	msgs := ps.ChannelWithSubscriptions()
	for {
		select {
		case <-ctx.Done():
			return
		case ch := <-w.newWake:
			// A partition added while we run (Worker.watchLayouts).
			if err := ps.Subscribe(ctx, ch); err != nil {
				w.log.WithError(err).WithField("channel", ch).Warn("subscribing to a new partition's wake channel failed: its fetcher claims on its timer")
			}
		case m, ok := <-msgs:
			if !ok {
				return
			}
			switch m := m.(type) {
			case *redis.Message:
				if id, ok := strings.CutPrefix(m.Payload, cancelMessage); ok {
					// A cancel asked of a held job (cancelrun.lua).
					if p, ok := w.wakeParts.Load(m.Channel); ok {
						p.(*part).tr.cancelAsked(p.(*part).name, id)
					}
					continue
				}
				wake(m.Channel)
			case *redis.Subscription:
				if wake(m.Channel) {
					if m.Kind == "subscribe" && rounds.confirmed(m.Channel) {
						signal(reconnected)
					}
				}
			}
		}
	}
}

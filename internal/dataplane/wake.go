package dataplane

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// listenWake subscribes to every topic's wake channel and nudges the
// topic's fetcher on each message. go-redis re-subscribes after a
// disconnect; each (re)subscription confirmation wakes every fetcher, so
// claims resume at once when Redis is back, and each re-subscription after
// the first one counts as a Redis reconnect (see WorkerConfig.OnRedisReconnect).
func (w *Worker) listenWake(ctx context.Context) {
	byChannel := make(map[string]*topicRunner, len(w.topics))
	channels := make([]string, 0, len(w.topics))
	for topic, tr := range w.topics {
		ch := w.c.WakeChannel(topic)
		byChannel[ch] = tr
		channels = append(channels, ch)
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
		case m, ok := <-msgs:
			if !ok {
				return
			}
			switch m := m.(type) {
			case *redis.Message:
				if tr := byChannel[m.Channel]; tr != nil {
					signal(tr.wake)
				}
			case *redis.Subscription:
				if tr := byChannel[m.Channel]; tr != nil {
					signal(tr.wake)
					if m.Kind == "subscribe" && rounds.confirmed(m.Channel) {
						signal(reconnected)
					}
				}
			}
		}
	}
}

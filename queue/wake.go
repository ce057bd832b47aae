package queue

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// listenWake subscribes to every topic's wake channel and nudges the
// topic's fetcher on each message. go-redis re-subscribes after a
// disconnect; each (re)subscription confirmation wakes every fetcher, so
// claims resume at once when Redis is back.
func (w *Worker) listenWake(ctx context.Context) {
	byChannel := make(map[string]*topicRunner, len(w.topics))
	channels := make([]string, 0, len(w.topics))
	for topic, tr := range w.topics {
		ch := w.c.WakeChannel(topic)
		byChannel[ch] = tr
		channels = append(channels, ch)
	}
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
				}
			}
		}
	}
}

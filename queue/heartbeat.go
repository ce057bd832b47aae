package queue

import (
	"context"
	"time"
)

// heartbeat renews the leases of running jobs, in Redis and in the ledger,
// every Heartbeat (the shortest of the topics'): one Redis script per topic
// and one ledger statement per lease length per beat, not one per job.
func (w *Worker) heartbeat(ctx, detached context.Context) {
	every := time.Duration(0)
	for _, tr := range w.topics {
		if every == 0 || tr.cfg.Heartbeat < every {
			every = tr.cfg.Heartbeat
		}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	w.cfg.Observer.Heartbeat(w.cfg.ID, time.Now())
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		w.beat(detached)
		w.cfg.Observer.Heartbeat(w.cfg.ID, time.Now())
	}
}

func (w *Worker) beat(detached context.Context) {
	ctx, cancel := withOpTimeout(detached)
	defer cancel()
	byLease := make(map[time.Duration][]Ref)
	for _, tr := range w.topics {
		refs := tr.activeRefs()
		if len(refs) == 0 {
			continue
		}
		_, deadline, err := w.c.Extend(ctx, refs, tr.cfg.Lease)
		if err != nil {
			tr.log.WithError(err).Warn("heartbeat: extending leases failed")
			continue
		}
		tr.extended(refs, deadline)
		byLease[tr.cfg.Lease] = append(byLease[tr.cfg.Lease], refs...)
	}
	for lease, refs := range byLease {
		if err := w.cfg.Ledger.Extend(ctx, refs, w.redisNow()+lease.Milliseconds()); err != nil {
			w.log.WithError(err).Warn("heartbeat: extending ledger leases failed")
		}
	}
}

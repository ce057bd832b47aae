package dataplane

import (
	"context"
	"time"
)

// heartbeat renews the leases of the jobs this worker holds, in Redis and
// in the ledger, every Heartbeat (the shortest of the topics'): one Redis
// script per topic and one ledger statement per lease length per beat, not
// one per job. It holds a job from its record until its outcome is settled
// in Redis: queued for a handler, running, and finished but waiting in the
// completer (a store down, a flush under way). A finished job whose lease
// ran out before its settlement landed would run again on another worker.
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
	unsettled := w.completer.unsettled()
	if o, ok := w.cfg.Observer.(UnsettledObserver); ok {
		n := 0
		for _, refs := range unsettled {
			n += len(refs)
		}
		o.Unsettled(w.cfg.ID, n)
	}
	// One ledger statement per lease length; a group's lease_until is the
	// latest of its topics' Redis deadlines: later, never earlier, than
	// Redis's own.
	type group struct {
		refs  []Ref
		until int64
	}
	byLease := make(map[time.Duration]*group)
	for topic, tr := range w.topics {
		refs := tr.leasedRefs(unsettled[topic])
		if len(refs) == 0 {
			continue
		}
		_, deadline, err := w.c.Extend(ctx, refs, tr.cfg.Lease)
		if err = w.redisWatch.result(err); err != nil {
			logFailure(tr.log, err, "heartbeat: extending leases failed")
			continue
		}
		tr.extended(refs, deadline-tr.cfg.Lease.Milliseconds(), deadline)
		g := byLease[tr.cfg.Lease]
		if g == nil {
			g = &group{}
			byLease[tr.cfg.Lease] = g
		}
		g.refs = append(g.refs, refs...)
		g.until = max(g.until, deadline)
	}
	// A row whose ledger step is done already (a completed job's row
	// deleted) is not there to extend: a no-op.
	for _, g := range byLease {
		if err := w.ledgerWatch.result(w.led.Extend(ctx, g.refs, g.until)); err != nil {
			logFailure(w.log, err, "heartbeat: extending ledger leases failed")
		}
	}
}

package dataplane

import (
	"context"
	"sync"
	"time"

	"github.com/delayq/delayq/queue"
	"github.com/sirupsen/logrus"
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
	unsettled := w.completer.unsettled(false)
	lettingGo := w.hold.check(w.cfg.LedgerHold, func() bool { return w.othersReachLedger(ctx) }, w.log)
	var final map[string][]Ref
	if lettingGo {
		final = w.completer.unsettled(true)
	}
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
		refs := final[topic]
		if !lettingGo {
			refs = tr.leasedRefs(unsettled[topic])
		}
		// Letting go: only jobs that ended for good, whose outcomes wait
		// for the ledger; the others' leases run out, retried ones
		// included (WorkerConfig.LedgerHold).
		if len(refs) == 0 {
			continue
		}
		// One call per partition (a topic of one is its own): each has
		// its own master and clock, so its own deadline, and one that
		// fails leaves the others' extended.
		for name, prefs := range byTopic(refs) {
			_, deadline, asked, err := w.c.extend(ctx, prefs, tr.cfg.Lease)
			if err = w.redisWatch.result(err); err != nil {
				logFailure(tr.log.WithField("partition", name), err, "heartbeat: extending leases failed")
				continue
			}
			for _, r := range asked {
				// A cancel whose message this worker missed (§4.8.1).
				tr.cancelAsked(r.Topic, r.ID)
			}
			tr.extended(prefs, deadline-tr.cfg.Lease.Milliseconds(), deadline)
			g := byLease[tr.cfg.Lease]
			if g == nil {
				g = &group{}
				byLease[tr.cfg.Lease] = g
			}
			g.refs = append(g.refs, prefs...)
			g.until = max(g.until, deadline)
		}
	}
	// A row whose ledger step is done already (a completed job's row
	// deleted) is not there to extend: a no-op.
	for _, g := range byLease {
		if err := w.ledgerWatch.result(w.led.Extend(ctx, g.refs, g.until)); err != nil {
			w.hold.failed(time.Now())
			logFailure(w.log, err, "heartbeat: extending ledger leases failed")
		} else {
			w.hold.answered(w.log)
		}
	}
}

// ledgerHold is how long the ledger has refused to extend the leases of
// the jobs a worker holds, and whether the worker has let those jobs go
// (WorkerConfig.LedgerHold): a process cut off from SQL alone (its Galera
// node died, its link to the server is down while others' are not) would
// otherwise keep them from every other worker for as long as it lives. It
// lets go only while another live worker's registry entry says its ledger
// answers: in an outage of SQL for everyone, holding on runs nothing twice
// and letting go would help no one.
type ledgerHold struct {
	mu      sync.Mutex
	since   time.Time // the first failed extension since one succeeded; zero: none
	letting bool
}

// failed notes an extension the ledger refused at now.
func (h *ledgerHold) failed(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.since.IsZero() {
		h.since = now
	}
}

// answered notes a write the ledger took: the jobs are held again.
func (h *ledgerHold) answered(log logrus.FieldLogger) {
	h.mu.Lock()
	was := h.letting
	h.since, h.letting = time.Time{}, false
	h.mu.Unlock()
	if was {
		log.WithField("store", "ledger").Info("the ledger answers again: the jobs this worker holds keep their leases again")
	}
}

// check reports whether the worker lets its unfinished jobs go: the
// ledger has refused every extension for hold or longer, and others
// reports that another live worker reaches it (asked only then). It logs
// each change.
func (h *ledgerHold) check(hold time.Duration, others func() bool, log logrus.FieldLogger) bool {
	h.mu.Lock()
	since, was := h.since, h.letting
	h.mu.Unlock()
	if since.IsZero() || time.Since(since) < hold {
		return was
	}
	now := others()
	h.mu.Lock()
	if h.since.IsZero() { // answered meanwhile
		now = false
	}
	h.letting = now
	h.mu.Unlock()
	log = log.WithField("store", "ledger").WithField("hold", hold.String())
	switch {
	case now && !was:
		log.Warn("the ledger has not answered for the hold while another worker's does: jobs not finished here are let go (their leases run out) for a worker that reaches it")
	case !now && was:
		log.Warn("no other worker reaches the ledger either: holding the jobs again")
	}
	return now
}

// failing reports whether an extension failed and none succeeded since.
func (h *ledgerHold) failing() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.since.IsZero()
}

// lettingGo reports whether the worker has let its unfinished jobs go.
func (h *ledgerHold) lettingGo() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.letting
}

// othersReachLedger reports whether another live worker of the registry
// says its ledger answered its last ping.
func (w *Worker) othersReachLedger(ctx context.Context) bool {
	infos, err := w.c.Workers(ctx)
	if err != nil {
		return false
	}
	for _, in := range infos {
		if in.ID != w.cfg.ID && in.State == queue.WorkerLive && in.LedgerOK {
			return true
		}
	}
	return false
}

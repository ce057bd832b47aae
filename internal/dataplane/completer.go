package dataplane

import (
	"context"
	"sync"
	"time"

	"github.com/delayq/delayq/queue"
)

// completer settles finished jobs in batches: the ledger first, then Redis,
// so a crash in between leaves a Redis lease that expires and redelivers
// (at least once, never lost); a released job goes the other way round (see
// settlement.redisFirst). It flushes CompleteEvery after the first
// pending outcome, or as soon as CompleteBatch are pending; an idle worker
// arms no timer at all.
type completer struct {
	w *Worker

	mu      sync.Mutex
	pending [numKinds][]outcome // by kind: one write per store per kind and flush
	// flushing is what the flush under way took from pending: the
	// heartbeat renews the leases of both (unsettled).
	flushing [numKinds][]outcome
	kick     chan struct{} // cap 1: something is pending
	closed   chan struct{}
	once     sync.Once
}

// outcome is how one claimed job finished. It is the one value the
// completer builds both stores' writes and the observer call from (see
// outcomeKind.settlement); a new way for a job to end is a new kind.
type outcome struct {
	kind outcomeKind
	// ledgerDone and redisDone: that store's step is already done, so a
	// flush tried again does not repeat it (a dead job is archived once).
	ledgerDone, redisDone bool
	job                   *Job
	failure               *failure // retrying and dead only
	result                []byte   // completed only: what the handler recorded (queue.RecordResult)
}

// failure is what a failed job's outcome carries.
type failure struct {
	// err is why the job failed, as the OnDead hook gets it; reason is its
	// text as both stores keep it.
	err    error
	reason string
	// at is when a retried job runs next, or when a dead job died (Unix ms,
	// Redis's clock); leaseUntil is when the recoverer may step in during a
	// retry's backoff.
	at, leaseUntil int64
}

// outcomeKind is a way a job ends.
type outcomeKind uint8

const (
	kindCompleted outcomeKind = iota // the handler succeeded
	kindReleased                     // handed back to due unstarted or cut off by shutdown, attempt unspent
	kindRetrying                     // failed; runs again at failure.at
	kindDead                         // out of attempts or failed for good (or buried by Claim)
	kindCancelled                    // a cancel was asked while it ran, and its run failed or never started
	numKinds
)

func (k outcomeKind) String() string {
	return [...]string{kindCompleted: "completed", kindReleased: "released", kindRetrying: "retrying", kindDead: "dead", kindCancelled: "cancelled"}[k]
}

// settlement is how one kind of outcome is written: one ledger call and one
// Redis call per batch, in that order unless redisFirst, then the Observer
// method that counts them and an optional hook.
type settlement struct {
	ledger, redis func(c *completer, ctx context.Context, b *batch) error
	// redisFirst: once Redis has the job due again its row is only debris,
	// deleted fenced by attempt (a newer claim's row stays); if that delete
	// fails the row waits for the next claim, so it is not tried again.
	redisFirst bool
	count      func(o Observer, topic string, n int)
	settled    func(c *completer, ctx context.Context, outcomes []outcome)
}

func (k outcomeKind) settlement() settlement {
	switch k {
	case kindCompleted:
		// The ledger row goes first: if the ack fails, the lease expires and
		// the job runs again with a fresh row. At least once.
		return settlement{ledger: (*completer).deleteRows, redis: (*completer).ack, count: Observer.Completed}
	case kindReleased:
		return settlement{redisFirst: true, redis: (*completer).release, ledger: (*completer).unclaimRows, count: Observer.Released}
	case kindRetrying:
		return settlement{ledger: (*completer).markRetrying, redis: (*completer).retry, count: Observer.Retried}
	case kindCancelled:
		// As a completion: the row goes first (history: cancelled), then
		// the job, its cancel mark and a tombstone.
		return settlement{ledger: (*completer).cancelRows, redis: (*completer).ackCancelled, count: countCancelled}
	default: // kindDead
		return settlement{ledger: (*completer).archive, redis: (*completer).bury, count: Observer.Dead, settled: (*completer).onDead}
	}
}

// The outcomes a worker reports.

func completedOutcome(j *Job, result []byte) outcome {
	return outcome{kind: kindCompleted, job: j, result: result}
}

func cancelledOutcome(j *Job) outcome { return outcome{kind: kindCancelled, job: j} }

func releasedOutcome(j *Job) outcome { return outcome{kind: kindReleased, job: j} }

func retryOutcome(j *Job, err error, runAt, leaseUntil int64) outcome {
	return outcome{kind: kindRetrying, job: j, failure: &failure{err: err, reason: errorText(err), at: runAt, leaseUntil: leaseUntil}}
}

func deadOutcome(j *Job, err error, diedAt int64) outcome {
	return outcome{kind: kindDead, job: j, failure: &failure{err: err, reason: errorText(err), at: diedAt}}
}

// buriedOutcome is a job Claim found out of attempts and buried in Redis
// already: only the ledger and the OnDead hook are left to do.
func buriedOutcome(j *Job, diedAt int64) outcome {
	return outcome{kind: kindDead, job: j, redisDone: true,
		failure: &failure{err: errLeaseExhausted{j.LastError}, reason: clipErrorText(j.LastError), at: diedAt}}
}

type errLeaseExhausted struct{ msg string }

func (e errLeaseExhausted) Error() string { return e.msg }

func newCompleter(w *Worker) *completer {
	return &completer{w: w, kick: make(chan struct{}, 1), closed: make(chan struct{})}
}

// add queues outcomes for the next flush.
func (c *completer) add(os ...outcome) {
	c.mu.Lock()
	for _, o := range os {
		c.pending[o.kind] = append(c.pending[o.kind], o)
	}
	c.mu.Unlock()
	signal(c.kick)
}

func (c *completer) pendingLen() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return total(c.pending)
}

// unsettled lists, by topic, the jobs whose outcome waits for its Redis
// step (pending or being flushed): their leases must not run out before
// it lands, or another worker runs them again. A job whose ledger step is
// done (a completed job's row deleted) is among them: only its Redis lease
// keeps it. final limits them to the jobs that ended for good (completed,
// dead, cancelled), whose outcomes a second run would repeat: a retried or released
// job runs again anyway.
func (c *completer) unsettled(final bool) map[string][]Ref {
	c.mu.Lock()
	defer c.mu.Unlock()
	var refs map[string][]Ref
	for _, byKind := range [...]*[numKinds][]outcome{&c.pending, &c.flushing} {
		for kind, os := range byKind {
			if final && outcomeKind(kind) != kindCompleted && outcomeKind(kind) != kindDead && outcomeKind(kind) != kindCancelled {
				continue
			}
			for i := range os {
				// Field by field: the flush sets ledgerDone meanwhile.
				o := &os[i]
				if o.redisDone {
					continue
				}
				if refs == nil {
					refs = make(map[string][]Ref, 1)
				}
				topic := TopicOf(o.job.Topic) // the runner's, a partition's topic
				refs[topic] = append(refs[topic], o.job.Ref())
			}
		}
	}
	return refs
}

func total(byKind [numKinds][]outcome) int {
	n := 0
	for _, os := range byKind {
		n += len(os)
	}
	return n
}

// close asks run to flush what is pending and return.
func (c *completer) close() { c.once.Do(func() { close(c.closed) }) }

// run flushes until close; after close it flushes once more and returns
// (trying for a while if the ledger or Redis is down). A flush that failed
// is tried again as soon as the store that failed answers again, or after
// the error backoff, whichever comes first: a job finished during an
// outage is settled the moment the store is back, and one finished right
// after it does not wait out a pause grown during the outage.
func (c *completer) run(detached context.Context) {
	pause := time.Duration(0)
	for {
		select {
		case <-c.kick:
		case <-c.closed:
			c.drain(detached)
			return
		}
		// Let a batch gather, unless one is already full.
		if c.pendingLen() < c.w.cfg.CompleteBatch {
			t := time.NewTimer(c.w.cfg.CompleteEvery)
			select {
			case <-t.C:
			case <-c.closed:
				t.Stop()
			}
		}
		if err := c.flush(detached); err != nil {
			pause = min(max(2*pause, c.w.cfg.ErrorBackoffMin), c.w.cfg.ErrorBackoffMax)
			logFailure(c.w.log.WithField("retry_in", pause), err, "completer: flush failed")
			awaitStore(detached, c.closed, err, pause)
			signal(c.kick)
			continue
		}
		pause = 0
	}
}

// drain flushes what is left at shutdown, retrying for up to a shutdown
// timeout; whatever still fails is redelivered after its lease.
func (c *completer) drain(detached context.Context) {
	deadline := time.Now().Add(c.w.cfg.ShutdownTimeout)
	pause := time.Duration(0)
	for {
		err := c.flush(detached)
		if err == nil {
			return
		}
		left := time.Until(deadline)
		if left <= 0 {
			c.w.log.WithError(err).Error("completer: giving up at shutdown; unsettled jobs run again after their lease")
			return
		}
		pause = min(max(2*pause, c.w.cfg.ErrorBackoffMin), c.w.cfg.ErrorBackoffMax)
		awaitStore(detached, nil, err, min(pause, left))
	}
}

// flush settles everything pending, kind by kind. What fails stays pending
// for the next try. It returns the first error.
func (c *completer) flush(detached context.Context) error {
	c.mu.Lock()
	pending := c.pending
	c.pending = [numKinds][]outcome{}
	c.flushing = pending
	c.mu.Unlock()
	if total(pending) == 0 {
		return nil
	}
	defer func() {
		c.mu.Lock()
		c.flushing = [numKinds][]outcome{}
		c.mu.Unlock()
	}()
	ctx, cancel := withOpTimeout(detached)
	defer cancel()
	var firstErr error
	for k, os := range pending {
		if len(os) == 0 {
			continue
		}
		left, err := c.settle(ctx, outcomeKind(k), os)
		if err == nil {
			continue
		}
		if firstErr == nil {
			firstErr = err
		}
		c.mu.Lock()
		c.pending[k] = append(c.pending[k], left...)
		c.mu.Unlock()
	}
	return firstErr
}

// settle writes one kind's batch to both stores in the kind's order and
// reports what settled. It returns the outcomes to try again, marked with
// the steps already done, and the error that stopped them.
func (c *completer) settle(ctx context.Context, k outcomeKind, outcomes []outcome) ([]outcome, error) {
	s := k.settlement()
	all := &batch{outcomes: outcomes}
	redisW, ledgerW := c.w.redisWatch, c.w.ledgerWatch
	if s.redisFirst {
		if err := redisW.result(s.redis(c, ctx, all)); err != nil {
			return outcomes, err
		}
		c.report(ctx, s, outcomes)
		if err := ledgerW.result(s.ledger(c, ctx, all)); err != nil {
			c.w.log.WithError(err).WithField("outcome", k).Warn("completer: ledger rows of jobs due again in Redis stay until they are claimed again")
		}
		return nil, nil
	}
	if todo := all.without(func(o outcome) bool { return o.ledgerDone }); len(todo.outcomes) > 0 {
		if err := ledgerW.result(s.ledger(c, ctx, todo)); err != nil {
			return outcomes, err
		}
	}
	for i := range outcomes {
		outcomes[i].ledgerDone = true
	}
	if todo := all.without(func(o outcome) bool { return o.redisDone }); len(todo.outcomes) > 0 {
		if err := redisW.result(s.redis(c, ctx, todo)); err != nil {
			// Outcomes Redis had settled already (buried by Claim) are done.
			if todo != all {
				c.report(ctx, s, all.without(func(o outcome) bool { return !o.redisDone }).outcomes)
			}
			return todo.outcomes, err
		}
	}
	c.report(ctx, s, outcomes)
	return nil, nil
}

// batch is outcomes of one kind going to one store, with what the steps
// build from them, built once.
type batch struct {
	outcomes []outcome
	refs     []Ref
	retries  []RetryRequest
	dead     []DeadJob
}

// without returns the outcomes of b for which skip is false: b itself when
// that is all of them (the usual case: its refs then serve both steps).
func (b *batch) without(skip func(outcome) bool) *batch {
	n := 0
	for _, o := range b.outcomes {
		if !skip(o) {
			n++
		}
	}
	if n == len(b.outcomes) {
		return b
	}
	out := &batch{outcomes: make([]outcome, 0, n)}
	for _, o := range b.outcomes {
		if !skip(o) {
			out.outcomes = append(out.outcomes, o)
		}
	}
	return out
}

func (b *batch) refList() []Ref {
	return buildOnce(&b.refs, b.outcomes, func(o outcome) Ref { return o.job.Ref() })
}

func (b *batch) retryRequests() []RetryRequest {
	return buildOnce(&b.retries, b.outcomes, func(o outcome) RetryRequest {
		f := o.failure
		return RetryRequest{Ref: o.job.Ref(), RunAt: f.at, LeaseUntil: f.leaseUntil, Error: f.reason}
	})
}

func (b *batch) deadJobs() []DeadJob {
	return buildOnce(&b.dead, b.outcomes, func(o outcome) DeadJob {
		return DeadJob{Job: o.job, Error: o.failure.reason, DiedAt: o.failure.at}
	})
}

// buildOnce returns *built, building it from outcomes the first time: both
// stores' steps of a batch take the same slice.
func buildOnce[T any](built *[]T, outcomes []outcome, build func(outcome) T) []T {
	if *built == nil {
		*built = make([]T, len(outcomes))
		for i, o := range outcomes {
			(*built)[i] = build(o)
		}
	}
	return *built
}

// report tells the observer (once per topic) and the kind's hook about
// outcomes settled in both stores.
func (c *completer) report(ctx context.Context, s settlement, outcomes []outcome) {
	n := make(map[string]int, 1)
	for _, o := range outcomes {
		n[TopicOf(o.job.Topic)]++ // a partition's count is its topic's
	}
	for topic, k := range n {
		s.count(c.w.cfg.Observer, topic, k)
	}
	if s.settled != nil {
		s.settled(c, ctx, outcomes)
	}
}

// The steps of each kind: one call to one store for a whole batch.

func (c *completer) deleteRows(ctx context.Context, b *batch) error {
	var results [][]byte
	for i, o := range b.outcomes {
		if o.result != nil {
			if results == nil {
				results = make([][]byte, len(b.outcomes))
			}
			results[i] = o.result
		}
	}
	if results == nil {
		return c.w.led.Complete(ctx, b.refList())
	}
	return c.w.led.CompleteResults(ctx, b.refList(), results)
}

func (c *completer) cancelRows(ctx context.Context, b *batch) error {
	return c.w.led.CancelRows(ctx, b.refList())
}

func (c *completer) ackCancelled(ctx context.Context, b *batch) error {
	_, err := c.w.c.AckCancelled(ctx, b.refList())
	return err
}

// countCancelled tells an observer that counts cancellations
// (queue.CancelObserver) of n jobs of topic ended cancelled while held.
func countCancelled(o Observer, topic string, n int) {
	if co, ok := o.(queue.CancelObserver); ok {
		co.CancelledRunning(topic, n)
	}
}

func (c *completer) unclaimRows(ctx context.Context, b *batch) error {
	return c.w.unclaimRows(ctx, b.refList())
}

func (c *completer) ack(ctx context.Context, b *batch) error {
	_, err := c.w.c.Ack(ctx, b.refList())
	return err
}

func (c *completer) release(ctx context.Context, b *batch) error {
	_, err := c.w.c.Release(ctx, b.refList())
	return err
}

func (c *completer) markRetrying(ctx context.Context, b *batch) error {
	return c.w.led.MarkRetrying(ctx, b.retryRequests())
}

func (c *completer) retry(ctx context.Context, b *batch) error {
	_, err := c.w.c.Retry(ctx, b.retryRequests())
	return err
}

func (c *completer) archive(ctx context.Context, b *batch) error {
	return c.w.led.Bury(ctx, b.deadJobs())
}

func (c *completer) bury(ctx context.Context, b *batch) error {
	_, _, err := c.w.c.Bury(ctx, b.deadJobs())
	return err
}

func (c *completer) onDead(ctx context.Context, outcomes []outcome) {
	if c.w.cfg.OnDead == nil {
		return
	}
	for _, o := range outcomes {
		c.w.cfg.OnDead(ctx, handlerJob(o.job), o.failure.err) // the topic's name, as handlers see
	}
}

// maxErrorText bounds the error text kept with a job.
const maxErrorText = 4096

func errorText(err error) string { return clipErrorText(err.Error()) }

func clipErrorText(s string) string {
	if len(s) > maxErrorText {
		s = s[:maxErrorText]
	}
	return s
}

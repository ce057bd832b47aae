package queue

import (
	"context"
	"sync"
	"time"
)

// completer settles finished jobs in batches: the ledger first, then Redis,
// so a crash in between leaves a Redis lease that expires and redelivers
// (at least once, never lost). It flushes CompleteEvery after the first
// pending outcome, or as soon as CompleteBatch are pending; an idle worker
// arms no timer at all.
type completer struct {
	w *Worker

	mu      sync.Mutex
	pending outcomes
	kick    chan struct{} // cap 1: something is pending
	closed  chan struct{}
	once    sync.Once
}

// outcomes are the settled jobs waiting for one flush.
type outcomes struct {
	done    []Ref
	release []Ref // interrupted by shutdown: back to due, attempt unspent
	retries []retryOutcome
	dead    []deadOutcome
	// buried are jobs Claim already buried in Redis: only the ledger and
	// the OnDead hook are left to do.
	buried []deadOutcome
}

type retryOutcome struct {
	job        *Job
	err        string
	runAt      int64
	leaseUntil int64
}

type deadOutcome struct {
	job    *Job
	err    error
	diedAt int64
	// archived: the ledger step is done, only Redis is left (so a retry
	// after a Redis error does not archive the job twice).
	archived bool
}

func (o *outcomes) len() int {
	return len(o.done) + len(o.release) + len(o.retries) + len(o.dead) + len(o.buried)
}

func newCompleter(w *Worker) *completer {
	return &completer{w: w, kick: make(chan struct{}, 1), closed: make(chan struct{})}
}

func (c *completer) add(f func(o *outcomes)) {
	c.mu.Lock()
	f(&c.pending)
	c.mu.Unlock()
	signal(c.kick)
}

func (c *completer) done(r Ref) { c.add(func(o *outcomes) { o.done = append(o.done, r) }) }

func (c *completer) release(r Ref) { c.add(func(o *outcomes) { o.release = append(o.release, r) }) }

func (c *completer) retry(j *Job, err error, runAt, leaseUntil int64) {
	c.add(func(o *outcomes) {
		o.retries = append(o.retries, retryOutcome{job: j, err: errorText(err), runAt: runAt, leaseUntil: leaseUntil})
	})
}

func (c *completer) bury(j *Job, err error) {
	c.add(func(o *outcomes) { o.dead = append(o.dead, deadOutcome{job: j, err: err, diedAt: c.w.redisNow()}) })
}

func (c *completer) buriedByClaim(jobs []*Job, at int64) {
	c.add(func(o *outcomes) {
		for _, j := range jobs {
			o.buried = append(o.buried, deadOutcome{job: j, err: errLeaseExhausted{j.LastError}, diedAt: at})
		}
	})
}

type errLeaseExhausted struct{ msg string }

func (e errLeaseExhausted) Error() string { return e.msg }

// close asks run to flush what is pending and return.
func (c *completer) close() { c.once.Do(func() { close(c.closed) }) }

// run flushes until close; after close it flushes once more and returns
// (trying for a while if the ledger or Redis is down).
func (c *completer) run(io context.Context) {
	pause := time.Duration(0)
	for {
		select {
		case <-c.kick:
		case <-c.closed:
			c.drain(io)
			return
		}
		// Let a batch gather, unless one is already full.
		c.mu.Lock()
		n := c.pending.len()
		c.mu.Unlock()
		if n < c.w.cfg.CompleteBatch {
			t := time.NewTimer(c.w.cfg.CompleteEvery)
			select {
			case <-t.C:
			case <-c.closed:
				t.Stop()
			}
		}
		if err := c.flush(io); err != nil {
			pause = min(max(2*pause, c.w.cfg.ErrorBackoffMin), c.w.cfg.ErrorBackoffMax)
			c.w.log.WithError(err).WithField("retry_in", pause).Warn("completer: flush failed")
			select {
			case <-time.After(pause):
			case <-c.closed:
			}
			signal(c.kick)
			continue
		}
		pause = 0
	}
}

// drain flushes what is left at shutdown, retrying for up to a shutdown
// timeout; whatever still fails is redelivered after its lease.
func (c *completer) drain(io context.Context) {
	deadline := time.Now().Add(c.w.cfg.ShutdownTimeout)
	pause := c.w.cfg.ErrorBackoffMin
	for {
		err := c.flush(io)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.w.log.WithError(err).Error("completer: giving up at shutdown; unsettled jobs run again after their lease")
			return
		}
		time.Sleep(pause)
		pause = min(2*pause, c.w.cfg.ErrorBackoffMax)
	}
}

// flush settles everything pending. What fails stays pending for the next
// try; the ledger step of each kind always goes before its Redis step.
func (c *completer) flush(io context.Context) error {
	c.mu.Lock()
	o := c.pending
	c.pending = outcomes{}
	c.mu.Unlock()
	if o.len() == 0 {
		return nil
	}
	ctx, cancel := withOpTimeout(io)
	defer cancel()
	var failed outcomes
	var firstErr error
	note := func(err error) {
		if firstErr == nil {
			firstErr = err
		}
	}

	if len(o.done) > 0 {
		if err := c.w.cfg.Ledger.Complete(ctx, o.done); err != nil {
			note(err)
			failed.done = o.done
		} else if _, err := c.w.c.Ack(ctx, o.done); err != nil {
			// The ledger rows are gone; the lease expires and the job runs
			// again with a fresh row. At least once.
			note(err)
			failed.done = o.done
		} else {
			countRefs(o.done, c.w.cfg.Observer.Completed)
		}
	}
	if len(o.release) > 0 {
		// Redis first: once the job is due again its row is just debris,
		// deleted fenced by attempt (a newer claim's row stays).
		if _, err := c.w.c.Release(ctx, o.release); err != nil {
			note(err)
			failed.release = o.release
		} else {
			countRefs(o.release, c.w.cfg.Observer.Released)
			if err := c.w.cfg.Ledger.Complete(ctx, o.release); err != nil {
				c.w.log.WithError(err).Warn("completer: released jobs' ledger rows stay until they are claimed again")
			}
		}
	}
	if len(o.retries) > 0 {
		marks := make([]RetryMark, len(o.retries))
		reqs := make([]RetryRequest, len(o.retries))
		for i, r := range o.retries {
			marks[i] = RetryMark{Ref: r.job.Ref(), RunAt: r.runAt, LeaseUntil: r.leaseUntil, Error: r.err}
			reqs[i] = RetryRequest{Ref: r.job.Ref(), RunAt: r.runAt, Error: r.err}
		}
		if err := c.w.cfg.Ledger.MarkRetrying(ctx, marks); err != nil {
			note(err)
			failed.retries = o.retries
		} else if _, err := c.w.c.Retry(ctx, reqs); err != nil {
			note(err)
			failed.retries = o.retries
		} else {
			countJobs(o.retries, func(r retryOutcome) *Job { return r.job }, c.w.cfg.Observer.Retried)
		}
	}
	if len(o.dead) > 0 {
		var toArchive []DeadJob
		for _, d := range o.dead {
			if !d.archived {
				toArchive = append(toArchive, DeadJob{Job: d.job, Error: errorText(d.err), DiedAt: d.diedAt})
			}
		}
		reqs := make([]BuryRequest, len(o.dead))
		for i, d := range o.dead {
			reqs[i] = BuryRequest{Ref: d.job.Ref(), Reason: errorText(d.err)}
		}
		if err := c.w.cfg.Ledger.Bury(ctx, toArchive); err != nil {
			note(err)
			failed.dead = o.dead
		} else if _, _, err := c.w.c.Bury(ctx, reqs); err != nil {
			note(err)
			for _, d := range o.dead {
				d.archived = true
				failed.dead = append(failed.dead, d)
			}
		} else {
			countJobs(o.dead, deadJob, c.w.cfg.Observer.Dead)
			c.onDead(ctx, o.dead)
		}
	}
	if len(o.buried) > 0 {
		dead := make([]DeadJob, len(o.buried))
		for i, d := range o.buried {
			dead[i] = DeadJob{Job: d.job, Error: errorText(d.err), DiedAt: d.diedAt}
		}
		if err := c.w.cfg.Ledger.Bury(ctx, dead); err != nil {
			note(err)
			failed.buried = o.buried
		} else {
			countJobs(o.buried, deadJob, c.w.cfg.Observer.Dead)
			c.onDead(ctx, o.buried)
		}
	}
	if failed.len() > 0 {
		c.mu.Lock()
		c.pending.done = append(c.pending.done, failed.done...)
		c.pending.release = append(c.pending.release, failed.release...)
		c.pending.retries = append(c.pending.retries, failed.retries...)
		c.pending.dead = append(c.pending.dead, failed.dead...)
		c.pending.buried = append(c.pending.buried, failed.buried...)
		c.mu.Unlock()
	}
	return firstErr
}

func deadJob(d deadOutcome) *Job { return d.job }

func (c *completer) onDead(ctx context.Context, dead []deadOutcome) {
	if c.w.cfg.OnDead == nil {
		return
	}
	for _, d := range dead {
		c.w.cfg.OnDead(ctx, d.job, d.err)
	}
}

// maxErrorText bounds the error text kept with a job.
const maxErrorText = 4096

func errorText(err error) string {
	s := err.Error()
	if len(s) > maxErrorText {
		s = s[:maxErrorText]
	}
	return s
}

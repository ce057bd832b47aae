package orderclose

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/queue"
)

// Sweeper is the safety net of the close jobs: a cron job that finds the
// orders still pending payment past their deadline plus Config.SweepGrace
// and enqueues their close job again. An order whose close job was never
// enqueued (Redis was down when it was created) or was lost by Redis before
// any worker claimed it is closed this way; for one whose job is still
// there the enqueue is a duplicate and changes nothing (the job id is the
// idempotency key).
//
// One process at a time sweeps: each run takes a Redis lock
// (Config.SweepLockKey, naming this process as host:pid) and a process that
// cannot take it skips the run. The lock is released when the sweep ends,
// shutdown included; only a process that dies mid-sweep leaves it to
// expire (Config.SweepLockTTL).
type Sweeper struct {
	s   *Service
	id  string // host:pid, the lock's owner
	log logrus.FieldLogger

	runs, enqueued atomic.Int64
}

// SweepReport is what one sweep found and did.
type SweepReport struct {
	Start    time.Time     // when the sweep was tried
	Duration time.Duration // how long it took, skipped or not
	// HeldBy is, for a sweep skipped because the lock was held, the
	// holder's host:pid ("" if unknown).
	HeldBy string

	Pages      int // pages of orders read
	Overdue    int // pending orders found past deadline plus grace
	Enqueued   int // close jobs that were missing and were enqueued
	Duplicates int // close jobs that were there already
	// Dead counts the duplicates whose close job is dead (out of attempts):
	// their orders stay pending until the job is requeued by hand. Each is
	// logged as an error.
	Dead   int
	Cutoff int64 // Unix ms: orders with a deadline before it were looked at
}

// NewSweeper returns the Sweeper of s's orders.
func NewSweeper(s *Service) *Sweeper {
	host, _ := os.Hostname()
	id := fmt.Sprintf("%s:%d", host, os.Getpid())
	return &Sweeper{s: s, id: id, log: s.log.WithFields(logrus.Fields{"topic": Topic, "component": "orderclose-sweeper"})}
}

// Runs is how many sweeps this Sweeper ran (holding the lock).
func (sw *Sweeper) Runs() int64 { return sw.runs.Load() }

// Enqueued is how many close jobs this Sweeper's sweeps enqueued in all:
// each one a job that was missing.
func (sw *Sweeper) Enqueued() int64 { return sw.enqueued.Load() }

// Run sweeps on Config.SweepSpec until ctx ends, then waits for a sweep in
// progress to return: the end of ctx cancels it, and it releases the lock
// (even with ctx gone), so that another process can sweep at once rather
// than after the lock's TTL. Sweeps never overlap within a process, and
// the lock keeps them from overlapping across processes. It returns nil
// when ctx ends.
func (sw *Sweeper) Run(ctx context.Context) error {
	c := cron.New(
		cron.WithLogger(cronLogger{sw.log}),
		cron.WithChain(cron.Recover(cronLogger{sw.log}), cron.SkipIfStillRunning(cronLogger{sw.log})),
	)
	if _, err := c.AddFunc(sw.s.cfg.SweepSpec, func() { _, _, _ = sw.RunOnce(ctx) }); err != nil {
		return fmt.Errorf("orderclose: sweeper: schedule %q: %w", sw.s.cfg.SweepSpec, err)
	}
	sw.log.WithField("spec", sw.s.cfg.SweepSpec).Info("sweeper started")
	c.Start()
	<-ctx.Done()
	<-c.Stop().Done()
	sw.log.Info("sweeper stopped")
	return nil
}

// RunOnce sweeps now, if no other process is sweeping: it reports whether
// it ran, what it found, and the first error (a failed page ends the run;
// the next run starts over). Config.OnSweep hears of it.
func (sw *Sweeper) RunOnce(ctx context.Context) (SweepReport, bool, error) {
	start := time.Now()
	rep, ran, err := sw.runOnce(ctx)
	rep.Start, rep.Duration = start, time.Since(start)
	if sw.s.cfg.OnSweep != nil {
		sw.s.cfg.OnSweep(rep, ran, err)
	}
	return rep, ran, err
}

func (sw *Sweeper) runOnce(ctx context.Context) (SweepReport, bool, error) {
	var rep SweepReport
	lock := sw.s.q.Lock(sw.s.cfg.SweepLockKey, sw.s.cfg.SweepLockTTL).WithOwner(sw.id)
	ran, err := lock.Do(ctx, func(ctx context.Context) error {
		var err error
		rep, err = sw.sweep(ctx)
		return err
	})
	if !ran {
		if err != nil {
			sw.log.WithError(err).Warn("sweep skipped: could not take the lock")
			return rep, false, err
		}
		// Info, not debug: a holder that died keeps every sweep off for
		// the lock's TTL, and this line is how that shows.
		log := sw.log.WithField("lock", sw.s.cfg.SweepLockKey)
		if holder, left, held, herr := lock.Holder(ctx); herr == nil && held {
			rep.HeldBy = holder
			log = log.WithFields(logrus.Fields{"holder": holder, "lock_ttl_left": left.String()})
		}
		log.Info("sweep skipped: another process holds the sweeper lock")
		return rep, false, nil
	}
	sw.runs.Add(1)
	sw.enqueued.Add(int64(rep.Enqueued))
	log := sw.log.WithFields(logrus.Fields{
		"pages": rep.Pages, "overdue": rep.Overdue, "enqueued": rep.Enqueued, "duplicates": rep.Duplicates, "dead": rep.Dead,
	})
	switch {
	case err != nil && ctx.Err() != nil:
		log.WithError(err).Info("sweep cut short: shutting down")
	case err != nil:
		log.WithError(err).Error("sweep failed")
	case rep.Enqueued > 0:
		log.Warn("sweep re-enqueued missing close jobs (Redis was down at order creation, or lost them)")
	default:
		log.Debug("sweep done")
	}
	return rep, true, err
}

// sweepRow is what a sweep reads of an order: its keyset position and
// number.
type sweepRow struct {
	ID          int64
	OrderNo     string
	PayDeadline int64
}

// sweep pages through the overdue pending orders in (pay_deadline, id)
// order, a stable keyset that the index on (status, pay_deadline) serves,
// and enqueues their close jobs one page per batch.
func (sw *Sweeper) sweep(ctx context.Context) (SweepReport, error) {
	cfg := sw.s.cfg
	rep := SweepReport{Cutoff: cfg.Now().Add(-cfg.SweepGrace).UnixMilli()}
	db := sw.s.db.WithContext(ctx)
	afterDeadline, afterID := int64(math.MinInt64), int64(0)
	for {
		var rows []sweepRow
		err := db.Model(&Order{}).Select("id", "order_no", "pay_deadline").
			Where("status = ? AND pay_deadline < ?", StatusPending, rep.Cutoff).
			Where("pay_deadline > ? OR (pay_deadline = ? AND id > ?)", afterDeadline, afterDeadline, afterID).
			Order("pay_deadline, id").Limit(cfg.SweepPageSize).
			Scan(&rows).Error
		if err != nil {
			return rep, fmt.Errorf("orderclose: sweep: read overdue orders: %w", err)
		}
		if len(rows) == 0 {
			return rep, nil
		}
		rep.Pages++
		rep.Overdue += len(rows)
		if err := sw.enqueuePage(ctx, rows, &rep); err != nil {
			return rep, err
		}
		last := rows[len(rows)-1]
		afterDeadline, afterID = last.PayDeadline, last.ID
		if len(rows) < cfg.SweepPageSize {
			return rep, nil
		}
	}
}

// enqueuePage enqueues the close jobs of one page of orders, due now.
func (sw *Sweeper) enqueuePage(ctx context.Context, rows []sweepRow, rep *SweepReport) error {
	jobs := make([]queue.NewJob, len(rows))
	for i, r := range rows {
		payload, err := json.Marshal(closePayload{OrderNo: r.OrderNo})
		if err != nil {
			return fmt.Errorf("orderclose: sweep: payload of %s: %w", r.OrderNo, err)
		}
		jobs[i] = queue.NewJob{ID: JobID(r.OrderNo), Payload: payload, MaxAttempts: sw.s.cfg.MaxAttempts}
	}
	ectx, cancel := context.WithTimeout(ctx, sw.s.cfg.EnqueueTimeout)
	defer cancel()
	res, err := sw.s.q.EnqueueBatch(ectx, Topic, jobs)
	if err != nil {
		return fmt.Errorf("orderclose: sweep: enqueue %d close jobs: %w", len(jobs), err)
	}
	for _, r := range res {
		switch r.Status {
		case queue.BatchCreated:
			rep.Enqueued++
			sw.log.WithFields(logrus.Fields{"job": r.ID, "order": r.ID[len(JobIDPrefix):]}).
				Info("close job was missing: enqueued")
		case queue.BatchDuplicate:
			rep.Duplicates++
			sw.checkDead(ctx, r.ID, rep)
		default:
			// Order numbers are checked when orders are made: this is a
			// row written by something else.
			sw.log.WithError(r.Err).WithField("job", r.ID).Error("sweep: close job refused")
		}
	}
	return nil
}

// checkDead looks at a close job that is there already though its order is
// overdue: normally it waits or runs (workers are behind, or it is retrying);
// a dead one would leave the order pending for good, so it is reported.
func (sw *Sweeper) checkDead(ctx context.Context, id string, rep *SweepReport) {
	info, err := sw.s.q.Get(ctx, Topic, id)
	if err != nil {
		sw.log.WithError(err).WithField("job", id).Warn("sweep: could not look at an existing close job")
		return
	}
	if info.State == queue.StateDead {
		rep.Dead++
		sw.log.WithFields(logrus.Fields{"job": id, "order": id[len(JobIDPrefix):], "last_error": info.Job.LastError}).
			Error("close job is dead: its order stays pending until the job is requeued")
	}
}

// cronLogger passes robfig/cron's logs to logrus.
type cronLogger struct{ log logrus.FieldLogger }

func (l cronLogger) Info(msg string, kv ...any) {
	l.log.WithFields(kvFields(kv)).Debug("cron: " + msg)
}

func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.WithError(err).WithFields(kvFields(kv)).Error("cron: " + msg)
}

func kvFields(kv []any) logrus.Fields {
	f := logrus.Fields{}
	for i := 0; i+1 < len(kv); i += 2 {
		f[fmt.Sprint(kv[i])] = kv[i+1]
	}
	return f
}

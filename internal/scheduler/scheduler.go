package scheduler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/queue"
)

// Store is the SQL side of the schedules of durable topics: *ledger.Ledger.
// The queue client decides, per topic, whether a tick goes through it.
type Store = dataplane.TickStore

// Scheduler runs schedules: Run enqueues their ticks, List shows them.
// Any number of processes may run the same schedules.
type Scheduler struct {
	q       *dataplane.Client
	store   Store
	opts    Options
	entries []*entry
}

// entry is one schedule with its parsed spec and its state in this process.
type entry struct {
	Schedule
	sched cron.Schedule

	mu   sync.Mutex
	next time.Time // the tick Run waits for; zero when not running
}

// New checks the schedules and returns their Scheduler. store may be nil
// when no schedule's topic is durable. An invalid schedule returns an *Error
// naming it and the field.
func New(q *dataplane.Client, store Store, schedules []Schedule, opts Options) (*Scheduler, error) {
	if q == nil {
		return nil, errors.New("periodic: a *dataplane.Client is required")
	}
	if opts.Logger == nil {
		l := logrus.New()
		l.SetOutput(io.Discard)
		opts.Logger = l
	}
	if opts.RetryBase <= 0 {
		opts.RetryBase = 100 * time.Millisecond
	}
	s := &Scheduler{q: q, store: store, opts: opts}
	seen := make(map[string]bool, len(schedules))
	for i, sc := range schedules {
		at := sc.Name
		if at == "" {
			at = fmt.Sprintf("#%d", i)
		}
		sched, err := sc.Check(at)
		if err != nil {
			return nil, err
		}
		if seen[sc.Name] {
			return nil, &Error{Schedule: at, Field: "name", Reason: "a second schedule has this name"}
		}
		seen[sc.Name] = true
		if err := queue.ValidateTopic(sc.Topic); err != nil {
			return nil, &Error{Schedule: at, Field: "topic", Reason: err.Error()}
		}
		if q.WaitsInSQL(sc.Topic) && store == nil {
			return nil, &Error{Schedule: at, Field: "topic", Reason: "durable topic: the scheduler needs the SQL store"}
		}
		if n := q.Config().MaxPayloadBytes; len(sc.Payload) > n {
			return nil, &Error{Schedule: at, Field: "payload", Reason: fmt.Sprintf("%d bytes: limit is %d", len(sc.Payload), n)}
		}
		sc.Payload = slices.Clone(sc.Payload)
		s.entries = append(s.entries, &entry{Schedule: sc, sched: sched})
	}
	return s, nil
}

// Schedules returns the schedules, with defaults filled in.
func (s *Scheduler) Schedules() []Schedule {
	out := make([]Schedule, len(s.entries))
	for i, e := range s.entries {
		out[i] = e.Schedule
	}
	return out
}

// Run enqueues the schedules' ticks until ctx ends, then returns nil. Each
// schedule waits on a timer for its next tick; nothing polls.
func (s *Scheduler) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, e := range s.entries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.run(ctx, e)
		}()
	}
	wg.Wait()
	return nil
}

func (s *Scheduler) log(e *entry) logrus.FieldLogger {
	return s.opts.Logger.WithFields(logrus.Fields{"schedule": e.Name, "topic": e.Topic})
}

// run runs one schedule until ctx ends.
func (s *Scheduler) run(ctx context.Context, e *entry) {
	defer e.setNext(time.Time{})
	now := time.Now()
	next := e.sched.Next(now)
	catchUp := true // on start: the ticks missed while no process ran
	for ctx.Err() == nil {
		if next.IsZero() {
			s.log(e).Warn("the schedule has no more ticks")
			return
		}
		if catchUp {
			catchUp = !s.catchUp(ctx, e, now, next)
		}
		e.setNext(next)
		s.observeNext(e, next)
		if !sleepUntil(ctx, next) {
			return
		}
		now = time.Now()
		following := e.sched.Next(next)
		if !following.IsZero() && !now.Before(following) {
			// Woken after the tick that follows: this process stalled
			// (or the clock jumped) across whole ticks. They are missed
			// ticks, unless another process enqueued them.
			s.log(e).WithField("tick", next).Warn("woke after the next tick too: treating the ticks passed as missed")
			next, catchUp = e.sched.Next(now), true
			continue
		}
		s.claim(ctx, e, next, following)
		next = following
	}
}

// catchUp applies the missed-tick policy once the schedule's last tick is
// known; false means it could not be read (try again at the next wake).
// next is the next tick, which bounds the retries of a claim.
func (s *Scheduler) catchUp(ctx context.Context, e *entry, now, next time.Time) bool {
	last, ok, err := s.lastTick(ctx, e)
	if err != nil {
		s.log(e).WithError(err).Warn("reading the schedule's last tick for missed ticks; trying again at the next tick")
		return false
	}
	if !ok || e.Missed != MissedOnce {
		return true // never ran: it starts at its next tick; or skip
	}
	if t := latestTick(e.sched, time.UnixMilli(last), now); !t.IsZero() {
		s.log(e).WithFields(logrus.Fields{"tick": t, "last_tick": time.UnixMilli(last)}).Info("enqueuing the latest missed tick once")
		s.claim(ctx, e, t, next)
	}
	return true
}

// lastTick reads the schedule's last tick from its topic's store.
func (s *Scheduler) lastTick(ctx context.Context, e *entry) (int64, bool, error) {
	m, err := s.q.LastTicks(ctx, s.store, e.Topic, e.Name)
	if err != nil {
		return 0, false, err
	}
	v, ok := m[e.Name]
	return v, ok, nil
}

// claim enqueues the job of tick unless some process did, trying again
// after a failure for as long as the next tick (until) is not due.
func (s *Scheduler) claim(ctx context.Context, e *entry, tick, until time.Time) {
	j := queue.NewJob{ID: JobID(e.Name, tick), Payload: e.Payload, RunAt: tick.UnixMilli(), MaxAttempts: e.MaxAttempts, Priority: e.Priority}
	log := s.log(e).WithFields(logrus.Fields{"tick": tick, "job_id": j.ID})
	pause := s.opts.RetryBase
	for {
		res, err := s.enqueueTick(ctx, e, tick, j)
		if err == nil {
			r := ResultEnqueued
			if res.Duplicate || res.Job.Duplicate {
				r = ResultDuplicate
			}
			s.observe(e, r)
			log.WithField("result", r).Debug("tick claimed")
			return
		}
		var verr *queue.ValidationError
		if errors.As(err, &verr) || ctx.Err() != nil || !time.Now().Add(pause).Before(until) {
			s.observe(e, ResultError)
			log.WithError(err).Error("enqueuing the tick's job failed; other processes may enqueue it")
			return
		}
		log.WithError(err).Warn("enqueuing the tick's job; trying again")
		if !sleepUntil(ctx, time.Now().Add(pause)) {
			s.observe(e, ResultError)
			return
		}
		pause *= 2
	}
}

func (s *Scheduler) enqueueTick(ctx context.Context, e *entry, tick time.Time, j queue.NewJob) (queue.TickResult, error) {
	return s.q.EnqueueTick(ctx, s.store, e.Topic, e.Name, tick.UnixMilli(), j)
}

func (s *Scheduler) observe(e *entry, r Result) {
	if s.opts.Observer != nil {
		s.opts.Observer.Tick(e.Name, r)
	}
}

func (s *Scheduler) observeNext(e *entry, next time.Time) {
	if s.opts.Observer != nil {
		s.opts.Observer.NextRun(e.Name, next)
	}
}

func (e *entry) setNext(t time.Time) {
	e.mu.Lock()
	e.next = t
	e.mu.Unlock()
}

// sleepUntil waits until t or ctx's end, and says whether t came.
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// List returns the schedules, in their order, with their next tick and the
// last tick enqueued by any process (read from Redis and SQL).
func (s *Scheduler) List(ctx context.Context) ([]Info, error) {
	now := time.Now()
	byTopic := map[string][]string{}
	for _, e := range s.entries {
		byTopic[e.Topic] = append(byTopic[e.Topic], e.Name)
	}
	last := map[string]int64{}
	for topic, names := range byTopic {
		m, err := s.q.LastTicks(ctx, s.store, topic, names...)
		if err != nil {
			return nil, fmt.Errorf("periodic: list: %w", err)
		}
		for k, v := range m {
			last[k] = v
		}
	}
	out := make([]Info, len(s.entries))
	for i, e := range s.entries {
		e.mu.Lock()
		next, running := e.next, !e.next.IsZero()
		e.mu.Unlock()
		if !running || next.Before(now) {
			next = e.sched.Next(now)
		}
		out[i] = Info{
			Name: e.Name, Spec: e.Spec, Location: e.ZoneName(), Topic: e.Topic,
			Durability: string(s.q.Durability(e.Topic)), Missed: e.Missed, MaxAttempts: e.MaxAttempts, Priority: e.Priority,
			NextRun: next.UnixMilli(), Running: running,
		}
		if t, ok := last[e.Name]; ok {
			out[i].LastTick = t
			out[i].LastJobID = JobID(e.Name, time.UnixMilli(t))
		}
	}
	return out, nil
}

package recoverer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// RelayStore is what the relay reads from the SQL ledger; *ledger.Ledger is
// one.
type RelayStore interface {
	// SQLNow is the SQL server's clock (Unix ms), the one durable due
	// times are on.
	SQLNow(ctx context.Context) (int64, error)
	// Scheduled pages through the waiting rows with (run_at, id) after
	// the cursor and run_at up to upTo, by run_at then id (topic "" = all).
	Scheduled(ctx context.Context, topic string, after ledger.Cursor, upTo int64, limit int) ([]ledger.Entry, error)
	// ScheduledCounts counts the waiting rows per topic, and those due
	// after beyond.
	ScheduledCounts(ctx context.Context, beyond int64) (map[string]ledger.ScheduledCount, error)
	// TopicStates are the operators' pauses (queue.PauseStore), applied
	// to Redis before a reload or full pass pushes anything.
	TopicStates(ctx context.Context) ([]queue.PauseState, error)
	// Layouts are the topics' partition layouts (queue.LayoutStore),
	// applied to Redis before the pauses.
	Layouts(ctx context.Context) (map[string][]int, error)
}

// Relay keeps Redis in step with the SQL ledger's waiting rows (the
// durable topics' waiting jobs, docs/design.md §4.11). Holding a lock so one
// process at a time relays, it ticks every Every, reading only Redis (its
// mark, its inbox of enqueuers' notes, the next load time), and passes over
// SQL when woken (the Wake* causes): a note is due (a push after a commit
// was lost, skipped or never made), the next waiting row beyond the
// horizon entered it, Redis lost the mark, a tick or pass failed, the lock
// changed hands, or CheckEvery or FullEvery passed. Each pass:
//
//   - the loader pushes the rows that entered the horizon since the last
//     pass (due within queue.Config.Horizon of now): jobs enqueued further
//     ahead stayed in SQL only;
//   - the relay checks the rows that fell due since the last pass (minus
//     Grace) and pushes those Redis does not have: their enqueuer died
//     between its commit and its push, or Redis was down or lost them;
//   - when Redis has no mark (first start, or Redis lost data), and every
//     FullEvery, every row due within the horizon, overdue ones first, is
//     checked and pushed.
//
// Every push is restore.lua's check-and-create (mode scheduled), fenced by
// the tombstones of jobs acked or cancelled since the page was read, so a
// pass never re-creates a job that finished meanwhile.
type Relay struct {
	q     *dataplane.Client
	store RelayStore
	cfg   RelayConfig
	log   logrus.FieldLogger
	shard int // the ledger shard whose rows store holds (its mark, inbox, lock)

	mu       sync.Mutex
	counts   map[string]ledger.ScheduledCount
	countsAt time.Time
	totals   RelayTotals
	lastFull time.Time // the last full pass that succeeded
	lastOK   time.Time // the last pass that succeeded
	// needFull makes the next pass a full one: set at first, when this
	// process takes the lead, and after a tick, a pass or the lock failed
	// (Redis or SQL unreachable: pushes made meanwhile may have failed);
	// fullCause says which.
	needFull  bool
	fullCause string
	// warned: the failure of the passes was logged, and not their
	// recovery yet; kept across leads so that an outage that hands the
	// lock round logs once.
	warned atomic.Bool
}

// NewRelay returns a Relay over q and store, a ledger of one shard (or
// shard 0 of several).
func NewRelay(q *dataplane.Client, store RelayStore, cfg RelayConfig) (*Relay, error) {
	return NewShardRelay(q, store, 0, cfg)
}

// NewShardRelay returns the Relay of ledger shard shard, whose rows store
// holds (ledgerops.Shards.Shard): it keeps its own mark and inbox in Redis
// (dataplane's relay keys of the shard), and takes its own lock,
// cfg.LockKey suffixed ":<shard>" for a shard other than 0, so that the
// shards' relays run side by side.
func NewShardRelay(q *dataplane.Client, store RelayStore, shard int, cfg RelayConfig) (*Relay, error) {
	if q == nil || store == nil {
		return nil, errors.New("recovery: relay: a queue client and a ledger store are required")
	}
	if shard < 0 || shard >= q.LedgerShards() {
		return nil, fmt.Errorf("recovery: relay: shard %d: the queue client's store has %d", shard, q.LedgerShards())
	}
	cfg, err := cfg.WithDefaults(q.Config().Namespace)
	if err != nil {
		return nil, err
	}
	cfg.LockKey = ShardKey(cfg.LockKey, shard)
	host, _ := os.Hostname()
	store = boundedStore{RelayStore: store, timeout: max(2*cfg.HandOverAfter, time.Second)}
	fields := logrus.Fields{"component": "relay", "relay": fmt.Sprintf("%s:%d", host, os.Getpid())}
	if q.LedgerShards() > 1 {
		fields["shard"] = shard
	}
	return &Relay{q: q, store: store, cfg: cfg, shard: shard, needFull: true, fullCause: WakeLead, totals: RelayTotals{Wakes: map[string]int64{}},
		log: cfg.Logger.WithFields(fields)}, nil
}

// ShardKey is the key of shard's lock for a lock configured as key: key
// itself for shard 0 (a ledger of one shard keeps its lock's name), key
// suffixed ":<shard>" for the others.
func ShardKey(key string, shard int) string {
	if shard == 0 {
		return key
	}
	return key + ":" + strconv.Itoa(shard)
}

// Shard is the ledger shard the relay passes over.
func (r *Relay) Shard() int { return r.shard }

// Config returns the relay's configuration with defaults filled in.
func (r *Relay) Config() RelayConfig { return r.cfg }

// Totals returns the relay's running totals.
func (r *Relay) Totals() RelayTotals {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.totals
	t.Wakes = maps.Clone(t.Wakes)
	return t
}

// Counts returns the waiting rows per topic (Total) and those beyond the
// horizon (Beyond), as of the last count (refreshed every CountEvery by
// Run), and when that was.
func (r *Relay) Counts() (map[string]ledger.ScheduledCount, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts, r.countsAt
}

// Run ticks every Every while it holds the relay lock, passing when woken,
// and tries to take the lock every Every while another process holds it,
// until ctx ends; then it releases the lock. It returns nil when ctx ends.
func (r *Relay) Run(ctx context.Context) error {
	lock := r.q.Lock(r.cfg.LockKey, r.cfg.LockTTL)
	r.log.WithFields(logrus.Fields{"every": r.cfg.Every, "grace": r.cfg.Grace, "horizon": r.q.Config().Horizon}).Info("relay started")
	defer r.log.Info("relay stopped")
	go r.countLoop(ctx)
	t := time.NewTicker(r.cfg.Every)
	defer t.Stop()
	for {
		held, err := lock.Do(ctx, r.lead)
		if ctx.Err() != nil {
			return nil
		}
		wait := t.C
		switch {
		case errors.Is(err, errHandOver):
			// Give the others LockTTL to take the lock (they try every
			// Every) before competing for it again.
			r.mu.Lock()
			r.totals.HandOvers++
			first := r.totals.HandOvers == 1
			r.mu.Unlock()
			entry := r.log.WithField("after", r.cfg.HandOverAfter)
			if first {
				entry.Warn("relay passes kept failing; lock released for another process to relay (delayq_relay_handovers_total counts the next ones)")
			} else {
				entry.Debug("relay passes kept failing; lock released for another process to relay")
			}
			r.setNeedFull(WakeError)
			wait = time.After(r.cfg.LockTTL)
		case err != nil && !errors.Is(err, dataplane.ErrLockNotHeld):
			r.log.WithError(err).Debug("relay lock")
			r.setNeedFull(WakeError)
		case held:
			r.log.Info("relay lock lost; another process relays")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wait:
		}
	}
}

// boundedStore bounds each read of a pass by timeout (twice HandOverAfter,
// at least 1 s; Counts' GROUP BY, outside the passes, is not bounded): a server that went silent (no reset, no
// refusal: its host gone) fails the pass instead of holding it, and with it
// the lock, for ever. A page of rows takes milliseconds on a server that
// answers.
type boundedStore struct {
	RelayStore
	timeout time.Duration
}

func (s boundedStore) SQLNow(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.RelayStore.SQLNow(ctx)
}

func (s boundedStore) Scheduled(ctx context.Context, topic string, after ledger.Cursor, upTo int64, limit int) ([]ledger.Entry, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.RelayStore.Scheduled(ctx, topic, after, upTo, limit)
}

func (s boundedStore) TopicStates(ctx context.Context) ([]queue.PauseState, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.RelayStore.TopicStates(ctx)
}

func (s boundedStore) Layouts(ctx context.Context) (map[string][]int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.RelayStore.Layouts(ctx)
}

// errHandOver ends a lead whose passes all failed for HandOverAfter.
var errHandOver = errors.New("relay: passes kept failing")

// lead ticks every Every until ctx ends (shutdown, or the lock was lost).
func (r *Relay) lead(ctx context.Context) error {
	r.setNeedFull(WakeLead) // what the last holder missed, this one finds
	t := time.NewTicker(r.cfg.Every)
	defer t.Stop()
	var failingSince time.Time // zero: the last pass succeeded
	for {
		rep, passed, idle := r.tick(ctx)
		switch {
		case !passed:
		case rep.Err != nil && ctx.Err() != nil:
			return ctx.Err()
		case rep.Err != nil && failingSince.IsZero():
			// Logged once per outage, not five times a second.
			if !r.warned.Swap(true) {
				r.log.WithError(rep.Err).Warn("relay pass failed; retrying every pass")
			}
			failingSince = rep.Start
		case rep.Err != nil && time.Since(failingSince) >= r.cfg.HandOverAfter:
			return errHandOver
		case rep.Err == nil:
			if r.warned.Swap(false) {
				r.log.Info("relay passes again")
			}
			failingSince = time.Time{}
		}
		if idle > 0 {
			// Nothing pending: block on the bell (a note wakes us at
			// once), at most idle; then tick at the ticker's pace.
			r.mu.Lock()
			r.totals.IdleWaits++
			r.mu.Unlock()
			if err := r.q.WaitRelayBell(ctx, r.shard, idle); err != nil && ctx.Err() == nil {
				r.setNeedFull(WakeError)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// RunOnce makes one pass now if no other relay holds the lock, whatever
// woke it or not: ran says whether it did. Tests and operators use it; Run
// passes by itself.
func (r *Relay) RunOnce(ctx context.Context) (rep RelayReport, ran bool, err error) {
	lock := r.q.Lock(r.cfg.LockKey, r.cfg.LockTTL)
	ran, err = lock.Do(ctx, func(ctx context.Context) error {
		rep = r.pass(ctx, WakeOnce, 0)
		return rep.Err
	})
	if err != nil {
		r.setNeedFull(WakeError)
	}
	return rep, ran, err
}

func (r *Relay) setNeedFull(cause string) {
	r.mu.Lock()
	if !r.needFull {
		r.needFull, r.fullCause = true, cause
	}
	r.mu.Unlock()
}

// tick reads the relay's state in Redis (one round trip) and passes if
// something woke it: passed says whether it did (a failed read counts as a
// failed pass, as it did when every tick passed). idle, when not 0, is
// how long the relay may wait for the bell: no pass now, no note in the
// inbox, and no load, check or full pass due for at least that long (whole
// seconds, at most IdleEvery).
func (r *Relay) tick(ctx context.Context) (rep RelayReport, passed bool, idle time.Duration) {
	now := time.Now()
	st, err := r.q.ReadRelayTick(ctx, r.shard, now.Add(-r.cfg.Grace).UnixMilli(), now.UnixMilli())
	if err != nil {
		rep := RelayReport{Start: now, Cause: WakeError, Err: err}
		r.finish(&rep)
		return rep, true, 0
	}
	r.mu.Lock()
	need, cause := r.needFull, r.fullCause
	fullDue := now.Sub(r.lastFull) >= r.cfg.FullEvery
	checkDue := now.Sub(r.lastOK) >= r.cfg.CheckEvery
	idle = min(r.cfg.IdleEvery, r.cfg.FullEvery-now.Sub(r.lastFull), r.cfg.CheckEvery-now.Sub(r.lastOK))
	r.mu.Unlock()
	switch {
	case need:
	case !st.MarkOK:
		cause = WakeLost
	case fullDue:
		cause = WakeFull
	case st.RecheckDue:
		cause = WakeRecheck
		r.setNeedFull(WakeRecheck)
	case len(st.Notes) > 0:
		cause = WakeNote
	case st.LoadDue:
		cause = WakeLoad
	case checkDue:
		cause = WakeCheck
	default:
		if st.NextLoad != 0 {
			idle = min(idle, time.Duration(st.NextLoad-now.UnixMilli())*time.Millisecond)
		}
		if idle = idle.Truncate(time.Second); st.Pending > 0 || idle < time.Second {
			idle = 0 // tick at Every: something is pending or due within a second
		}
		return RelayReport{}, false, idle
	}
	rep = r.pass(ctx, cause, st.Latest)
	if rep.Err == nil && rep.Reload {
		// A full pass covers the rechecks asked for before it started.
		if err := r.q.DropRelayRechecks(ctx, r.shard, rep.Start.UnixMilli()); err != nil {
			r.log.WithError(err).Debug("relay rechecks")
		}
	}
	if rep.Err == nil {
		// Every pass covers the notes read before it (the check reaches
		// their latest job); a failure to drop them costs one more pass.
		if err := r.q.DropRelayNotes(ctx, r.shard, st.Notes); err != nil {
			r.log.WithError(err).Debug("relay notes")
		}
	}
	return rep, true, 0
}

// pass is one pass: reload, or load and check (through noteLatest, the
// latest due time of the notes that woke it, if any).
func (r *Relay) pass(ctx context.Context, cause string, noteLatest int64) RelayReport {
	rep := RelayReport{Start: time.Now(), Cause: cause}
	rep.Err = r.passSteps(ctx, &rep, noteLatest)
	r.finish(&rep)
	return rep
}

// finish counts a pass in the totals, logs it and reports it.
func (r *Relay) finish(rep *RelayReport) {
	rep.Duration = time.Since(rep.Start)
	r.mu.Lock()
	r.totals.Wakes[rep.Cause]++
	r.totals.Passes++
	r.totals.LastPass = rep.Start
	if rep.Err != nil {
		r.totals.Failed++
		r.totals.LastErr = rep.Start
		// Whatever was enqueued while Redis or SQL was unreachable (pushes
		// failed, or were skipped) is found by a full pass as soon as a
		// pass succeeds again, not only when it falls due.
		if !r.needFull {
			r.needFull, r.fullCause = true, WakeError
		}
	} else {
		r.totals.LastOK = rep.Start
		r.lastOK = rep.Start
	}
	if rep.Reload {
		r.totals.LastReload = rep.Start
	}
	loaded, relayed, reloaded := rep.Counts()
	r.totals.Loaded += int64(loaded)
	r.totals.Relayed += int64(relayed)
	r.totals.Reloaded += int64(reloaded)
	r.mu.Unlock()
	if relayed > 0 {
		r.log.WithField("jobs", relayed).WithField("topics", rep.Relayed).
			Warn("relay pushed jobs that were due and missing from Redis (lost pushes)")
	}
	switch {
	case rep.Err != nil || !rep.Reload:
	case rep.Lost:
		r.log.WithFields(logrus.Fields{"jobs": reloaded, "topics": rep.Reloaded}).
			Info("relay reloaded the horizon from SQL (no mark in Redis: first start or a Redis data loss)")
	case reloaded > 0:
		r.log.WithFields(logrus.Fields{"jobs": reloaded, "topics": rep.Reloaded}).
			Warn("relay's full pass pushed jobs missing from Redis")
	}
	if r.cfg.OnPass != nil && (rep.Err != nil || rep.Pushed() > 0 || rep.Reload) {
		r.cfg.OnPass(*rep)
	}
}

func (r *Relay) passSteps(ctx context.Context, rep *RelayReport, noteLatest int64) error {
	local := time.Now().UnixMilli() // before SQL's clock: what the pass covers, on this clock
	sqlNow, err := r.store.SQLNow(ctx)
	if err != nil {
		return err
	}
	mark, ok, err := r.q.RelayMark(ctx, r.shard)
	if err != nil {
		return err
	}
	upTo := sqlNow + r.q.Config().Horizon.Milliseconds()
	checkTo := sqlNow - r.cfg.Grace.Milliseconds()
	r.mu.Lock()
	full := r.needFull || time.Since(r.lastFull) >= r.cfg.FullEvery
	r.mu.Unlock()
	if !ok || full {
		// The operators' pauses before a reload pushes anything: without a
		// mark Redis lost its data, the pauses with it, and no job may be
		// pushed (and so claimed) before its topic's pause is back. A full
		// pass re-applies them too: it follows a failed pass (a Pause whose
		// Redis step failed then) and runs every FullEvery. Other passes
		// read no pause: Redis kept its data, and an extra SQL read every
		// 200 ms measurably delayed the reload under a busy SQL pool.
		if err := applyPauses(ctx, r.q, r.store, r.log); err != nil {
			return err
		}
		rep.Reload, rep.Lost = true, !ok
		rep.Reloaded = map[string]int{}
		// The mark's key exists from here on (still no mark to a reader),
		// so that a Redis that loses its data during the reload loses it
		// too, and the mark is not written at the end: the next tick
		// reloads again.
		if err := r.q.OpenRelayMark(ctx, r.shard); err != nil {
			return err
		}
		start := ledger.Cursor{RunAt: math.MinInt64, ID: math.MinInt64}
		if err := r.push(ctx, start, upTo, rep.Reloaded, rep); err != nil {
			return err
		}
		if moved, err := r.q.MoveRelayMark(ctx, r.shard, dataplane.RelayMark{Loaded: upTo, Checked: checkTo}); err != nil || !moved {
			return err
		}
		if err := r.setNextLoad(ctx, local, sqlNow, upTo); err != nil {
			return err
		}
		r.mu.Lock()
		r.lastFull, r.needFull = rep.Start, false
		r.mu.Unlock()
		return nil
	}
	if upTo > mark.Loaded {
		rep.Loaded = map[string]int{}
		if err := r.push(ctx, ledger.Cursor{RunAt: mark.Loaded, ID: math.MaxInt64}, upTo, rep.Loaded, rep); err != nil {
			return err
		}
		mark.Loaded = upTo
	}
	// Notes woke the pass: their jobs are checked through the latest one,
	// due or not (pushing a job within the horizon early is what its
	// enqueuer would have done), so that a batch's later jobs are not left
	// to a later wake. The mark moves only as far as the jobs due.
	checkUpTo := checkTo
	if noteLatest != 0 {
		fwd := noteLatest + (sqlNow - local) + r.q.HorizonSlack().Milliseconds()
		checkUpTo = max(checkUpTo, min(fwd, upTo))
	}
	if checkUpTo > mark.Checked {
		rep.Relayed = map[string]int{}
		if err := r.push(ctx, ledger.Cursor{RunAt: mark.Checked, ID: math.MaxInt64}, checkUpTo, rep.Relayed, rep); err != nil {
			return err
		}
		mark.Checked = max(mark.Checked, checkTo)
	}
	// Only if the mark is still there: Redis may have lost its data since
	// this pass read it, and the next tick must see that and reload.
	if moved, err := r.q.MoveRelayMark(ctx, r.shard, mark); err != nil || !moved {
		return err
	}
	return r.setNextLoad(ctx, local, sqlNow, upTo)
}

// setNextLoad reads when the first waiting row beyond upTo enters the
// horizon and records it in Redis (on this process's clock, local being
// its reading when SQL's clock read sqlNow), for the ticks to wake on.
func (r *Relay) setNextLoad(ctx context.Context, local, sqlNow, upTo int64) error {
	rows, err := r.store.Scheduled(ctx, "", ledger.Cursor{RunAt: upTo, ID: math.MaxInt64}, math.MaxInt64, 1)
	if err != nil {
		return err
	}
	var next int64 // 0: none
	if len(rows) > 0 {
		next = max(rows[0].RunAt-r.q.Config().Horizon.Milliseconds()-(sqlNow-local), 1)
	}
	return r.q.SetRelayNextLoad(ctx, r.shard, local, next)
}

// push pages through the waiting rows after the cursor and due up to
// upTo and pushes each that Redis has no trace of, counting them per topic
// in created. Each page is read after taking Redis's clock, the seen-at that
// keeps a job acked or cancelled after the read from coming back.
func (r *Relay) push(ctx context.Context, after ledger.Cursor, upTo int64, created map[string]int, rep *RelayReport) error {
	for {
		seen, err := r.q.Time(ctx)
		if err != nil {
			return err
		}
		rows, err := r.store.Scheduled(ctx, "", after, upTo, r.cfg.PageSize)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		out, err := r.q.Restore(ctx, restoreRows(rows), dataplane.RestoreOptions{SeenAt: seen.UnixMilli()})
		if err != nil {
			return err
		}
		for i, o := range out {
			switch o {
			case dataplane.RestoreCreated:
				created[dataplane.TopicOf(rows[i].Topic)]++ // a partition's rows count as its topic's
			case dataplane.RestoreGone:
				rep.Gone++
			}
		}
		if len(rows) < r.cfg.PageSize {
			return nil
		}
		last := rows[len(rows)-1]
		after = ledger.Cursor{RunAt: last.RunAt, ID: last.ID}
	}
}

// countLoop refreshes Counts every CountEvery until ctx ends.
func (r *Relay) countLoop(ctx context.Context) {
	t := time.NewTicker(r.cfg.CountEvery)
	defer t.Stop()
	for {
		r.count(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *Relay) count(ctx context.Context) {
	now, err := r.store.SQLNow(ctx)
	if err != nil {
		return
	}
	counts, err := r.store.ScheduledCounts(ctx, now+r.q.Config().Horizon.Milliseconds())
	if err != nil {
		return
	}
	r.mu.Lock()
	r.counts, r.countsAt = counts, time.Now()
	r.mu.Unlock()
}

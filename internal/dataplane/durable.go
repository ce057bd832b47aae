package dataplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/delayq/delayq/internal/unavailable"
)

// Staged is what a transactional enqueue wrote: the results, and the jobs to
// push to Redis once the transaction has committed (Client.Push).
type Staged struct {
	topic   string
	results []BatchResult
	// rows are the created jobs; Push sends those within the horizon's
	// reach then, on SQL's clock as of the insert (sqlNow) plus the time
	// since (at): a transaction that lasts may see jobs enter the horizon
	// before it commits, which the relay's loader may have missed.
	rows   []RestoreRow
	sqlNow int64
	at     time.Time
	// note is the relay's note written for the batch (none: the zero
	// noteRef).
	note noteRef
}

// Results are the outcomes of the staged jobs, in input order: valid once
// the transaction commits (a rollback undoes them all).
func (s *Staged) Results() []BatchResult {
	if s == nil {
		return nil
	}
	return s.results
}

// Topic is the topic the jobs were enqueued to.
func (s *Staged) Topic() string { return s.topic }

// EnqueueTx enqueues jobs to a durable topic inside the caller's transaction:
// store is bound to it (ledger.Ledger.Tx for a *gorm.DB, SQLTx for a
// *sql.Tx). The jobs exist exactly when the transaction commits; a rollback
// leaves nothing anywhere. After the commit, call Push with the returned
// Staged so the jobs reach Redis at once; if the process dies before that,
// the relay pushes them (recoverer.Relay, at the latest when they fall due).
//
// Invalid jobs are reported as BatchInvalid and not written, as in
// EnqueueBatch. A topic that is not durable returns ErrNotDurable.
func (c *Client) EnqueueTx(ctx context.Context, store DurableStore, topic string, jobs ...NewJob) (*Staged, error) {
	if err := ValidateTopic(topic); err != nil {
		return nil, err
	}
	if store == nil {
		return nil, errors.New("queue: enqueue in a transaction: a DurableStore is required")
	}
	if !c.lifecycle(topic).waitsInSQL() {
		return nil, fmt.Errorf("queue: enqueue to %s in a transaction: %w", topic, ErrNotDurable)
	}
	if len(jobs) > c.cfg.MaxBatch {
		return nil, &ValidationError{Field: "jobs", Kind: ErrBatchTooLarge,
			Reason: fmt.Sprintf("%d jobs: limit is %d", len(jobs), c.cfg.MaxBatch)}
	}
	results, valid, at := c.validateBatch(jobs)
	s := &Staged{topic: topic, results: results}
	if len(valid) == 0 {
		return s, nil
	}
	c.noteTraces(ctx, topic, valid)
	// The relay's note goes with the statements, and is in Redis before
	// the caller can commit: if the process dies between the commit and
	// Push, the relay finds the jobs when they fall due (or at once if they
	// are due), as their lost push.
	// On a topic of several partitions each job goes to its partition,
	// all in the caller's transaction (PartitionStore.ScheduleEach); a
	// store that cannot do that writes them to the topic's own.
	l, _ := c.enqueueLayout(ctx, topic)
	store, pinned := unpin(store)
	ps, each := store.(PartitionStore)
	// Over several ledger shards the transaction is one shard's. Pinned
	// (PinShard), its jobs go to their partitions, which must be on that
	// shard; unpinned, it is the topic's own shard (a periodic tick's,
	// EnqueueTick), and the jobs go to the topic's own name, which every
	// layout keeps and every worker claims from (docs/design.md §7.1).
	sharded := c.LedgerShards() > 1
	var names []string
	var subs [][]NewJob
	var idx [][]int
	if sharded && pinned >= 0 {
		var err error
		if l, names, subs, idx, err = c.routePinned(ctx, topic, valid, pinned, each); err != nil {
			return nil, err
		}
		each = each && l.Current() > 1
	} else {
		each = each && l.Current() > 1 && !sharded
		names = []string{topic}
		if each {
			names, subs, idx = c.splitJobs(ctx, l, topic, valid)
		}
	}
	var out []EnqueueResult
	var rows []RestoreRow
	var now int64
	note, err := c.noteAlong(ctx, c.planNote(valid, names...), func() (err error) {
		if !each {
			out, now, err = schedule(ctx, store, topic, valid)
			rows = c.created(topic, valid, out, now)
			return err
		}
		out, rows, now, err = c.scheduleParts(ctx, ps, topic, names, subs, idx)
		return err
	})
	if err != nil {
		c.unnote(ctx, note) // a refused enqueue writes nothing
		return nil, err
	}
	mergeResults(results, at, out)
	s.rows, s.sqlNow, s.at, s.note = rows, now, time.Now(), note
	return s, nil
}

// routePinned routes the jobs of a transactional enqueue on ledger shard
// shard (PinShard) by topic's layout (pinnedLayout), each to its
// partition when the store writes partitions (each), else all to the
// topic's own name. A layout that sends a job to another shard is read
// again first, in case this process's copy predates a raise; then the
// call is refused (checkShard).
func (c *Client) routePinned(ctx context.Context, topic string, valid []NewJob, shard int, each bool) (l Layout, names []string, subs [][]NewJob, idx [][]int, err error) {
	l, err = c.pinnedLayout(ctx, topic, false)
	for fresh := false; ; fresh = true {
		if err != nil {
			return Layout{}, nil, nil, nil, fmt.Errorf("queue: enqueue to %s in a transaction on ledger shard %d: %w", topic, shard, err)
		}
		names, subs, idx = []string{topic}, nil, nil
		if each && l.Current() > 1 {
			names, subs, idx = c.splitJobs(ctx, l, topic, valid)
		}
		if err = c.checkShard(names, subs, valid, shard); err == nil || fresh {
			return l, names, subs, idx, err
		}
		l, err = c.pinnedLayout(ctx, topic, true)
	}
}

// pinnedLayout is topic's layout for a pinned transactional enqueue: this
// process's copy (read again when fresh), from Redis within PushTimeout;
// when Redis cannot say, the layouts stored in SQL (the store's
// LayoutStore: the home shard's, which SetPartitions writes before
// Redis), so that a durable transaction commits with Redis down as on a
// ledger of one shard. Only when neither answers is it an error.
func (c *Client) pinnedLayout(ctx context.Context, topic string, fresh bool) (Layout, error) {
	var l Layout
	err := errPushPaused
	if !c.pushesPaused() {
		rctx, cancel := context.WithTimeout(ctx, c.cfg.PushTimeout)
		if fresh {
			l, err = c.readLayout(rctx, topic)
		} else {
			l, err = c.Layout(rctx, topic)
		}
		cancel()
	}
	if err == nil {
		return l, nil
	}
	ls, ok := c.cfg.Store.(LayoutStore)
	if !ok {
		return Layout{}, err
	}
	all, serr := ls.Layouts(ctx)
	if serr != nil {
		return Layout{}, errors.Join(err, serr)
	}
	return layoutOf(topic, all[topic]), nil
}

// checkShard refuses a transactional enqueue on shard whose jobs (valid,
// split over names as subs, or all on names[0] when subs is nil) go to a
// partition of another shard, naming the first such job.
func (c *Client) checkShard(names []string, subs [][]NewJob, valid []NewJob, shard int) error {
	for n, name := range names {
		s := ShardOf(name, c.LedgerShards())
		if s == shard {
			continue
		}
		j := valid[0]
		if subs != nil {
			j = subs[n][0]
		}
		if name == TopicOf(name) && !IsPartition(name) {
			return &ValidationError{Field: "partition_key", Kind: ErrOtherShard,
				Reason: fmt.Sprintf("topic %s has one partition, whose rows are on ledger shard %d, not this transaction's shard %d (give the topic a partition count that is a multiple of the shards, and its jobs a partition key of shard %d: Engine.ShardOfKey)",
					truncateKey(name), s, shard, shard)}
		}
		return &ValidationError{Field: "partition_key", Kind: ErrOtherShard,
			Reason: fmt.Sprintf("job %s routes to %s on ledger shard %d, not to this transaction's shard %d (give its jobs a partition key of shard %d: Engine.ShardOfKey)",
				truncateKey(j.ID), truncateKey(name), s, shard, shard)}
	}
	return nil
}

// Push sends the jobs of a committed transactional enqueue to Redis. Its
// error is only worth a log line: the relay pushes whatever it could not.
// Calling it before the commit is a mistake the relay cannot undo (a job
// pushed and then rolled back would run); calling it twice is harmless.
func (c *Client) Push(ctx context.Context, s *Staged) error {
	if s == nil {
		return nil
	}
	limit := s.sqlNow + time.Since(s.at).Milliseconds() + c.reach()
	var rows []RestoreRow
	for _, r := range s.rows {
		if r.RunAt <= limit {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		c.unnote(ctx, s.note) // nothing to push (duplicates, or beyond the horizon): nothing to wake the relay for
		return nil
	}
	return c.pushScheduled(ctx, s.topic, rows, s.note)
}

// reach is how far ahead of SQL's clock an enqueue pushes its jobs: the
// horizon and its slack.
func (c *Client) reach() int64 { return (c.cfg.Horizon + c.HorizonSlack()).Milliseconds() }

// schedule writes validated jobs' rows through store, one result per job;
// a store error wraps ErrLedger.
func schedule(ctx context.Context, store DurableStore, topic string, jobs []NewJob) ([]EnqueueResult, int64, error) {
	out, now, err := store.Schedule(ctx, topic, jobs)
	if err != nil {
		return nil, 0, fmt.Errorf("queue: enqueue to %s: %w: %w", topic, ErrLedger, err)
	}
	if len(out) != len(jobs) {
		return nil, 0, fmt.Errorf("queue: enqueue to %s: store answered %d results for %d jobs", topic, len(out), len(jobs))
	}
	return out, now, nil
}

// validateBatch validates jobs as EnqueueBatch does: the results with the
// invalid ones filled in, the valid jobs, and the index in jobs of each.
func (c *Client) validateBatch(jobs []NewJob) (results []BatchResult, valid []NewJob, at []int) {
	results = make([]BatchResult, len(jobs))
	valid = make([]NewJob, 0, len(jobs))
	at = make([]int, 0, len(jobs))
	now := time.Now()
	for i, j := range jobs {
		results[i].ID = j.ID
		if err := c.validate(&j, now); err != nil {
			results[i].Status, results[i].Err = BatchInvalid, err
			continue
		}
		valid = append(valid, j)
		at = append(at, i)
	}
	return results, valid, at
}

// mergeResults writes the results of the valid jobs (out, in the order of
// at) into results.
func mergeResults(results []BatchResult, at []int, out []EnqueueResult) {
	for k, r := range out {
		res := &results[at[k]]
		res.RunAt, res.Finished = r.RunAt, r.Finished
		res.Status = BatchCreated
		if r.Duplicate {
			res.Status = BatchDuplicate
		}
	}
}

// created returns the rows of the jobs Schedule created (now: SQL's clock
// at the insert), for Push, which sends those within the horizon's reach;
// the others stay in SQL until the relay loads them.
func (c *Client) created(topic string, jobs []NewJob, out []EnqueueResult, now int64) []RestoreRow {
	var rows []RestoreRow
	for i, r := range out {
		if r.Duplicate {
			continue
		}
		j := &jobs[i]
		rows = append(rows, RestoreRow{
			Topic: topic, ID: j.ID, State: StateWaiting, RunAt: r.RunAt, EnqueuedAt: now,
			MaxAttempts: j.MaxAttempts, Payload: j.Payload, Priority: j.Priority, OrderingKey: j.OrderingKey,
		})
	}
	return rows
}

// enqueue is a durable topic's enqueue of validated jobs (coalesced by
// the caller like a redis topic's): one Schedule, committed, then one push of
// the new jobs within the horizon. The push's failure is not the caller's:
// the jobs are safe in SQL and the relay pushes them.
//
// The relay's note is written before the statements: Schedule's INSERT
// commits on its own (autocommit), so there is no COMMIT to hold back
// until the note is in Redis, and a note sent alongside could lose the
// race with the commit if the process died right then (the job would wait
// for the relay's backstop). One Redis round trip in series per batch
// costs far less than the commit's flush; the push removes the note.
//
// On a topic of several partitions each job goes to its partition (route),
// all of them in one commit (PartitionStore.ScheduleEach), then one push.
func (t durableTopic) enqueue(ctx context.Context, topic string, jobs []NewJob) ([]EnqueueResult, error) {
	c := t.c
	if IsPartition(topic) {
		return t.enqueueOne(ctx, topic, jobs)
	}
	l, err := c.enqueueLayout(ctx, topic)
	if err != nil {
		return nil, err
	}
	if l.Current() == 1 {
		return t.enqueueOne(ctx, topic, jobs)
	}
	names, subs, at := c.splitJobs(ctx, l, topic, jobs)
	ps, ok := c.cfg.Store.(PartitionStore)
	if !ok || len(names) == 1 {
		out := make([]EnqueueResult, len(jobs))
		for n, name := range names {
			res, err := t.enqueueOne(ctx, name, subs[n])
			if err != nil {
				return nil, err
			}
			for k, i := range at[n] {
				out[i] = res[k]
			}
		}
		return out, nil
	}
	note := c.writeNote(ctx, c.planNote(jobs, names...))
	out, rows, now, err := c.scheduleParts(ctx, ps, topic, names, subs, at)
	if err != nil {
		c.unnote(ctx, note)
		if unavailable.OutcomeUnknown(err) {
			c.AskRelayRecheck(ctx, names...) // as enqueueOne, below
		}
		return nil, err
	}
	c.observeEnqueued(topic, out)
	_ = c.Push(ctx, &Staged{topic: topic, rows: rows, sqlNow: now, at: time.Now(), note: note})
	return out, nil
}

// scheduleParts writes the jobs of a partitioned topic, split by partition
// (splitJobs: names, subs, and idx, each job's index in the call), through
// ps in one commit or the caller's transaction: the results in the call's
// order, the created rows to push, and SQL's clock. Its error wraps
// ErrLedger, as schedule's does.
func (c *Client) scheduleParts(ctx context.Context, ps PartitionStore, topic string, names []string, subs [][]NewJob, idx [][]int) ([]EnqueueResult, []RestoreRow, int64, error) {
	outs, now, err := ps.ScheduleEach(ctx, names, subs)
	if err == nil && len(outs) != len(names) {
		err = fmt.Errorf("store answered %d partitions for %d", len(outs), len(names))
	}
	for n := range outs {
		if err == nil && len(outs[n]) != len(subs[n]) {
			err = fmt.Errorf("store answered %d results for %d jobs of %s", len(outs[n]), len(subs[n]), names[n])
		}
	}
	if err != nil {
		return nil, nil, 0, fmt.Errorf("queue: enqueue to %s: %w: %w", topic, ErrLedger, err)
	}
	n := 0
	for _, s := range subs {
		n += len(s)
	}
	out := make([]EnqueueResult, n)
	var rows []RestoreRow
	for p, name := range names {
		for k, i := range idx[p] {
			out[i] = outs[p][k]
		}
		rows = append(rows, c.created(name, subs[p], outs[p], now)...)
	}
	return out, rows, now, nil
}

// enqueueOne is enqueue on one partition (or a topic of one).
func (t durableTopic) enqueueOne(ctx context.Context, topic string, jobs []NewJob) ([]EnqueueResult, error) {
	c := t.c
	note := c.writeNote(ctx, c.planNote(jobs, topic))
	out, now, err := schedule(ctx, c.cfg.Store, topic, jobs)
	if err != nil {
		c.unnote(ctx, note)
		if unavailable.OutcomeUnknown(err) {
			// The connection was lost mid-statement: the rows may have
			// committed all the same, and on a Galera cluster become
			// visible only after the relay's windows passed them. It
			// checks them all, now and once more later.
			c.AskRelayRecheck(ctx, topic)
		}
		return nil, err
	}
	c.observeEnqueued(TopicOf(topic), out)
	// The push after a transactional enqueue's commit, at once.
	_ = c.Push(ctx, &Staged{topic: topic, rows: c.created(topic, jobs, out, now), sqlNow: now, at: time.Now(), note: note})
	return out, nil
}

// pushScheduled pushes waiting rows of one topic to Redis (restore.lua,
// mode scheduled), bounded by Config.PushTimeout. After a failure, pushes
// are skipped for PushTimeout: with Redis down, durable enqueues answer at
// the speed of SQL, and the relay pushes their jobs once Redis is back.
// note, the relay's note of the batch, goes in the push's round trip; a
// skipped push leaves it for the relay, a failed one puts it back due now.
func (c *Client) pushScheduled(ctx context.Context, topic string, rows []RestoreRow, note noteRef) error {
	if c.pushesPaused() {
		c.observePush(topic, 0, len(rows))
		return fmt.Errorf("queue: push to %s: %w", topic, errPushPaused)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.PushTimeout)
	defer cancel()
	// Seen-at: the insert (SQL's clock) less the clocks' allowed skew. A
	// job the relay pushed first, that then ran and was acked, has a
	// tombstone after it, so this late push does not bring it back.
	seen := rows[0].EnqueuedAt
	for _, r := range rows {
		seen = min(seen, r.EnqueuedAt)
	}
	out, err := c.Restore(ctx, rows, RestoreOptions{SeenAt: max(seen-pushClockSkew.Milliseconds(), 1), note: note})
	pushed := 0
	for _, o := range out {
		if o == RestoreCreated {
			pushed++
		}
	}
	if err != nil {
		c.pausePushes()
		if note.member != "" {
			c.renote(ctx, note)
		}
	} else {
		c.pushDownUntil.Store(0)
	}
	c.observePush(topic, pushed, len(rows)-pushed)
	return err
}

// pushesPaused says whether a push or a note failed less than PushTimeout
// ago: the next ones are skipped (left to the relay) until then.
func (c *Client) pushesPaused() bool {
	until := c.pushDownUntil.Load()
	return until != 0 && time.Now().UnixNano() < until
}

// pausePushes skips pushes and notes for PushTimeout after a failure.
func (c *Client) pausePushes() { c.pushDownUntil.Store(time.Now().Add(c.cfg.PushTimeout).UnixNano()) }

// pushClockSkew is how far Redis's clock may run ahead of SQL's before a
// push right after a commit could be refused for the tombstone of an
// earlier job with the same id (it then waits for the relay).
const pushClockSkew = time.Second

// errPushPaused: a push was skipped because the one before failed less than
// PushTimeout ago.
var errPushPaused = errors.New("skipped: Redis failed a push moments ago; the relay will push")

func (c *Client) observePush(topic string, pushed, notPushed int) {
	if o, ok := c.cfg.Observer.(PushObserver); ok {
		o.Pushed(TopicOf(topic), pushed, notPushed)
	}
}

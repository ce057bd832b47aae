package recoverer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/ledger"
	"github.com/robfig/cron/v3"
	"github.com/sirupsen/logrus"
)

// Recoverer puts back into Redis the jobs the ledger holds and Redis lost.
// It is safe for concurrent use; across processes, a Redis lock lets one run
// at a time.
type Recoverer struct {
	q     *dataplane.Client
	store Store
	cfg   Config
	sched cron.Schedule
	log   logrus.FieldLogger
	id    string // host:pid, in reports and epoch markers
	shard int    // the ledger shard whose rows store holds

	history history
	kicks   chan string // Trigger's requests to Run (cap 1: they coalesce)

	mu     sync.Mutex
	topics []string // the topics the last run checked, for RedisReconnected

	runs, skipped, failed, scanned, reenqueued, dataLoss atomic.Int64
}

// New returns a Recoverer over the queue client q (its Redis and namespace)
// and the ledger store. It refuses a bad Config, among others a Grace not
// greater than the HeartbeatInterval.
func New(q *dataplane.Client, store Store, cfg Config) (*Recoverer, error) {
	return NewShard(q, store, 0, cfg)
}

// NewShard returns the Recoverer of ledger shard shard, whose rows store
// holds (ledgerops.Shards.Shard): it checks the topics and partitions
// whose rows live on the shard (dataplane.ShardOf), resets the shard's
// relay mark, and takes its own lock, cfg.LockKey suffixed ":<shard>" for
// a shard other than 0, so that the shards' recoverers run side by side.
func NewShard(q *dataplane.Client, store Store, shard int, cfg Config) (*Recoverer, error) {
	if q == nil || store == nil {
		return nil, errors.New("recovery: a queue client and a ledger store are required")
	}
	if shard < 0 || shard >= q.LedgerShards() {
		return nil, fmt.Errorf("recovery: shard %d: the queue client's store has %d", shard, q.LedgerShards())
	}
	cfg, sched, err := cfg.WithDefaults(q.Config().Namespace)
	if err != nil {
		return nil, err
	}
	cfg.LockKey = ShardKey(cfg.LockKey, shard)
	host, _ := os.Hostname()
	id := fmt.Sprintf("%s:%d", host, os.Getpid())
	fields := logrus.Fields{"component": "recovery", "recoverer": id}
	if q.LedgerShards() > 1 {
		fields["shard"] = shard
	}
	return &Recoverer{
		q:       q,
		store:   store,
		cfg:     cfg,
		sched:   sched,
		log:     cfg.Logger.WithFields(fields),
		id:      id,
		shard:   shard,
		history: history{keep: cfg.KeepReports},
		kicks:   make(chan string, 1),
	}, nil
}

// Config returns the recoverer's configuration with defaults filled in.
func (r *Recoverer) Config() Config { return r.cfg }

// Counters returns the running totals.
func (r *Recoverer) Counters() Counters {
	return Counters{
		Runs: r.runs.Load(), Skipped: r.skipped.Load(), Failed: r.failed.Load(),
		Scanned: r.scanned.Load(), Reenqueued: r.reenqueued.Load(), DataLoss: r.dataLoss.Load(),
	}
}

// Reports returns the latest reports, newest first (at most
// Config.KeepReports).
func (r *Recoverer) Reports() []Report { return r.history.list() }

// RunOnce runs recovery now, if no other recoverer holds the lock, and
// returns its report (Skipped when the lock was held). The error is non-nil
// when anything went wrong; the report then says how far it got.
func (r *Recoverer) RunOnce(ctx context.Context) (Report, error) {
	return r.runOnce(ctx, "manual")
}

func (r *Recoverer) runOnce(ctx context.Context, trigger string) (Report, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RunTimeout)
	defer cancel()
	rep := Report{Start: time.Now(), Trigger: trigger, Recoverer: r.id, DryRun: r.cfg.DryRun}
	lock := r.q.Lock(r.cfg.LockKey, r.cfg.LockTTL)
	// A lock lost mid-run cancels the run's context: the run then stops
	// with that error.
	ran, err := lock.Do(ctx, func(ctx context.Context) error { return r.run(ctx, &rep) })
	if err != nil {
		addError(&rep, 1, err)
	}
	rep.Duration = time.Since(rep.Start)
	rep.Skipped = !ran && err == nil
	r.finish(rep, ctx.Err() != nil)
	if rep.Err != nil {
		return rep, fmt.Errorf("recovery: run had %d errors: %w", rep.Errors, rep.Err)
	}
	return rep, nil
}

// finish counts, logs and keeps a report. interrupted says the run's
// context ended (shutdown, RunTimeout).
func (r *Recoverer) finish(rep Report, interrupted bool) {
	fields := logrus.Fields{
		"trigger": rep.Trigger, "duration": rep.Duration, "dry_run": rep.DryRun,
	}
	switch {
	case rep.Skipped:
		r.skipped.Add(1)
		fields["lock"] = r.cfg.LockKey
		r.log.WithFields(fields).Info("recovery skipped: another recoverer holds the lock")
	default:
		r.runs.Add(1)
		r.scanned.Add(int64(rep.Scanned))
		r.reenqueued.Add(int64(rep.Reenqueued))
		fields["topics"] = rep.Topics
		fields["scanned"] = rep.Scanned
		fields["still_tracked"] = rep.StillTracked
		fields["reenqueued"] = rep.Reenqueued
		fields["moved"] = rep.Moved
		fields["errors"] = rep.Errors
		if len(rep.DataLoss) > 0 {
			lost := make([]string, len(rep.DataLoss))
			for i, l := range rep.DataLoss {
				lost[i] = l.Topic
			}
			fields["data_loss"] = lost
		}
		if len(rep.Sample) > 0 {
			fields["sample"] = rep.Sample
		}
		log := r.log.WithFields(fields)
		switch {
		case rep.Errors > 0 && interrupted:
			r.failed.Add(1)
			log.WithField("error_messages", rep.ErrorMessages).Warn("recovery run cut short (shutdown or RunTimeout)")
		case rep.Errors > 0:
			r.failed.Add(1)
			log.WithField("error_messages", rep.ErrorMessages).Error("recovery run failed")
		case rep.Reenqueued > 0 || len(rep.DataLoss) > 0:
			log.Warn("recovery run re-enqueued jobs Redis had lost")
		default:
			log.Info("recovery run")
		}
	}
	r.history.add(rep)
	if r.cfg.OnReport != nil {
		r.cfg.OnReport(rep)
	}
}

// run is one run, under the lock.
func (r *Recoverer) run(ctx context.Context, rep *Report) error {
	redisNow, err := r.q.Time(ctx)
	if err != nil {
		return fmt.Errorf("recovery: %w", err)
	}
	counts, err := r.store.TopicCounts(ctx)
	if err != nil {
		return err
	}
	known, err := r.q.AllPartitions(ctx) // each partition has its own keys and epoch
	if err != nil {
		return err
	}
	topics := slices.Clone(known)
	for t := range counts {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	topics = slices.Compact(topics)
	if n := r.q.LedgerShards(); n > 1 {
		// Each shard's recoverer checks the names whose rows it holds:
		// another shard's would write a lost partition's epoch marker
		// and leave its rows to wait for their leases to go stale.
		topics = slices.DeleteFunc(topics, func(t string) bool { return dataplane.ShardOf(t, n) != r.shard })
	}
	rep.Topics = len(topics)
	r.mu.Lock()
	r.topics = topics
	r.mu.Unlock()

	missing, err := r.q.EpochMissing(ctx, topics)
	if err != nil {
		return err
	}
	lost, err := r.detectLoss(ctx, missing, counts, rep)
	if err != nil {
		return err
	}
	if err := r.resetRelay(ctx, missing, counts); err != nil {
		return err
	}
	if !r.cfg.DryRun {
		// Before any job goes back: a paused topic's restored jobs must
		// not be claimed because Redis lost the pause with them.
		if err := applyPauses(ctx, r.q, r.store, r.log); err != nil {
			return err
		}
	}
	cutoff := redisNow.UnixMilli() - r.cfg.Grace.Milliseconds()
	failedTopics, err := r.pass(ctx, cutoff, lost, rep)
	if err != nil {
		return err
	}
	if r.cfg.DryRun {
		return nil
	}
	// A lost topic whose rows could not all be restored keeps its marker
	// missing, so the next run treats it as lost again.
	var mark []string
	for _, t := range missing {
		if !failedTopics[t] {
			mark = append(mark, t)
		}
	}
	written, err := r.q.EnsureEpoch(ctx, mark, fmt.Sprintf("written by recoverer %s at %s", r.id,
		redisNow.UTC().Format(time.RFC3339Nano)))
	if err != nil {
		return err
	}
	rep.EpochsWritten = written
	// The safety net of ordering keys: a key a path that knows nothing of
	// them left held by a job that is gone goes to its next job.
	if rep.KeysHandedOn, err = r.q.HealOrdering(ctx, topics); err != nil {
		return err
	}
	if rep.KeysHandedOn > 0 {
		r.log.WithField("keys", rep.KeysHandedOn).Warn("ordering keys held by jobs that are gone, handed on to their next jobs")
	}
	return r.purgeHistory(ctx, redisNow, rep)
}

// purgeHistory deletes the history rows past their retention, after the
// run's real work: a run that recovers jobs is never held up by it, and a
// run cut short by RunTimeout leaves the rest to the next one.
func (r *Recoverer) purgeHistory(ctx context.Context, now time.Time, rep *Report) error {
	cutoff := func(d time.Duration) int64 {
		if d < 0 {
			return 0 // kept for ever
		}
		return now.Add(-d).UnixMilli()
	}
	topics := make(map[string]int64, len(r.cfg.TopicHistoryRetention))
	for t, d := range r.cfg.TopicHistoryRetention {
		topics[t] = cutoff(d)
	}
	n, err := r.store.PurgeHistoryWith(ctx, cutoff(r.cfg.HistoryRetention), topics,
		ledger.PurgeOptions{Batch: r.cfg.HistoryPurgeBatch, Duty: r.cfg.HistoryPurgeDuty})
	rep.HistoryDeleted = n
	if n > 0 {
		r.log.WithField("rows", n).Info("job history past its retention deleted")
	}
	return err
}

// resetRelay makes the shard's relay reload the horizon when a topic with ledger
// rows has lost its epoch marker: its durable jobs in Redis may be gone
// while the relay's own mark survived (it lives in another key, in Redis
// Cluster on another shard), and only a reload puts those back before they
// fall due. A reload checks rows Redis still has at no harm.
func (r *Recoverer) resetRelay(ctx context.Context, missing []string, counts map[string]int64) error {
	if r.cfg.DryRun {
		return nil
	}
	for _, t := range missing {
		if counts[t] > 0 {
			return r.q.ResetRelayMark(ctx, r.shard)
		}
	}
	return nil
}

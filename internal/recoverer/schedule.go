package recoverer

import (
	"context"
	"slices"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/robfig/cron/v3"
	"github.com/sirupsen/logrus"
)

// Run runs recovery on the schedule (Config.Schedule, robfig/cron), once at
// start unless Config.SkipRunOnStart, and whenever Trigger asks, until ctx
// ends; then it waits for the current run to finish (its context is
// cancelled too) and returns nil. Runs never overlap: a tick that comes
// while a run is going is skipped.
func (r *Recoverer) Run(ctx context.Context) error {
	ticks := make(chan struct{})
	c := cron.New(cron.WithLogger(cronLogger{r.log}))
	c.Schedule(r.sched, cron.FuncJob(func() {
		select {
		case ticks <- struct{}{}:
		default: // a run is going: this tick is skipped
		}
	}))
	c.Start()
	defer func() { <-c.Stop().Done() }()
	r.log.WithField("schedule", r.cfg.Schedule).Info("recoverer started")
	defer r.log.Info("recoverer stopped")

	if !r.cfg.SkipRunOnStart {
		r.Trigger("start")
	}
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	retries, retryReason := 0, ""
	for {
		var trigger string
		select {
		case <-ctx.Done():
			return nil
		case <-ticks:
			trigger = "schedule"
		case trigger = <-r.kicks:
			retries = 0
		case <-retry.C:
			trigger = retryReason
		}
		rep, _ := r.runOnce(ctx, trigger) // logged and kept by runOnce
		if rep.Skipped && trigger != "schedule" && retries < r.cfg.TriggerRetries {
			// Asked for now, for a reason (a reconnect, a loss): try again
			// soon rather than wait for the next tick.
			retries++
			retryReason = trigger
			retry.Reset(r.cfg.TriggerRetry)
		}
	}
}

// Trigger asks Run for a run now, with reason as the report's Trigger (an
// empty reason means "trigger"). It never blocks: requests made while one is
// pending are folded into it. Without Run going, the request waits for Run.
func (r *Recoverer) Trigger(reason string) {
	if reason == "" {
		reason = "trigger"
	}
	select {
	case r.kicks <- reason:
	default:
	}
}

// RedisReconnected is meant as the worker's queue.WorkerConfig.
// OnRedisReconnect hook: Redis may have restarted empty meanwhile. It checks
// the epoch markers of the topics the last run saw and of the queue's topics
// set, and triggers a run at once (see Trigger; it needs Run going) when one
// is missing, or when it cannot tell (no run yet, Redis not answering).
func (r *Recoverer) RedisReconnected(ctx context.Context) {
	r.mu.Lock()
	topics := slices.Clone(r.topics)
	r.mu.Unlock()
	known, err := r.q.AllPartitions(ctx) // each partition has its own keys and epoch
	if err != nil {
		r.log.WithError(err).Warn("Redis reconnected: cannot list topics; running recovery now")
		r.Trigger("redis-reconnect")
		return
	}
	topics = append(topics, known...)
	slices.Sort(topics)
	topics = slices.Compact(topics)
	if len(topics) == 0 {
		r.log.Info("Redis reconnected: no topic known yet; running recovery now")
		r.Trigger("redis-reconnect")
		return
	}
	if n := r.q.LedgerShards(); n > 1 { // the names of this recoverer's shard, as in run
		topics = slices.DeleteFunc(topics, func(t string) bool { return dataplane.ShardOf(t, n) != r.shard })
		if len(topics) == 0 {
			r.log.Info("Redis reconnected: no topic of this shard known yet; running recovery now")
			r.Trigger("redis-reconnect")
			return
		}
	}
	missing, err := r.q.EpochMissing(ctx, topics)
	if err != nil {
		r.log.WithError(err).Warn("Redis reconnected: cannot check epoch markers; running recovery now")
		r.Trigger("redis-reconnect")
		return
	}
	if len(missing) > 0 {
		r.log.WithField("topics", missing).Warn("Redis reconnected with epoch markers missing: running recovery now")
		r.Trigger("redis-reconnect")
		return
	}
	r.log.WithField("topics", len(topics)).Info("Redis reconnected: every epoch marker is there")
}

// cronLogger passes robfig/cron's logs to logrus: its chatter at debug
// level, its errors at error level.
type cronLogger struct{ log logrus.FieldLogger }

func (l cronLogger) Info(msg string, kv ...any) { l.log.WithFields(kvFields(kv)).Debug("cron: " + msg) }

func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.WithFields(kvFields(kv)).WithError(err).Error("cron: " + msg)
}

func kvFields(kv []any) logrus.Fields {
	f := make(logrus.Fields, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		if k, ok := kv[i].(string); ok {
			f[k] = kv[i+1]
		}
	}
	return f
}

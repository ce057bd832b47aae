package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/recovery"
)

// HorizonStats is what the horizon scenario measured: a durable topic's
// Redis memory against a redis topic's for the same jobs, the relay's idle
// cost, and the recovery of the horizon after Redis lost everything.
type HorizonStats struct {
	Horizon string `json:"horizon"`
	Over    string `json:"over"` // the jobs' due times spread over this long
	// EnqueueSeconds and EnqueueRate: the durable enqueue of the Jobs,
	// Batch per call from Concurrency goroutines.
	EnqueueSeconds float64 `json:"enqueue_seconds"`
	EnqueueRate    float64 `json:"enqueue_jobs_per_s"`
	// Rows is the ledger's rows after the enqueue (one per job);
	// InHorizon those due within the horizon of the SQL clock then;
	// InRedis the durable topic's jobs in Redis.
	Rows      int64 `json:"rows"`
	InHorizon int64 `json:"in_horizon"`
	InRedis   int64 `json:"in_redis"`
	// RedisBytes is MEMORY USAGE (SAMPLES 0) summed over the durable
	// topic's keys; UsedMemoryDelta INFO memory used_memory after the
	// enqueue minus before (server-wide: other clients count too). Both
	// -1 when Redis does not say (miniredis).
	RedisBytes      int64 `json:"redis_bytes"`
	UsedMemoryDelta int64 `json:"used_memory_delta"`
	// The same for CompareJobs jobs of the same due times on a redis
	// topic, and CompareBytesForJobs the topic's bytes scaled to Jobs
	// (equal to CompareBytes unless CompareJobs < Jobs: extrapolated).
	CompareJobs            int     `json:"compare_jobs"`
	CompareRate            float64 `json:"compare_enqueue_jobs_per_s"`
	CompareBytes           int64   `json:"compare_redis_bytes"`
	CompareUsedMemoryDelta int64   `json:"compare_used_memory_delta"`
	CompareBytesForJobs    int64   `json:"compare_redis_bytes_for_jobs"`
	// FirstPassSeconds is the relay's first pass, over an intact Redis
	// (no mark yet: it checks the whole horizon and pushes nothing new).
	FirstPassSeconds float64 `json:"first_pass_seconds"`
	// RelaySeconds is how long the running relay was watched, RelayCPU
	// this process's CPU time meanwhile (only the relay runs) in % of one
	// core, RelayPasses its passes and RelayLoaded the jobs its loader
	// pushed as they entered the horizon.
	RelaySeconds float64 `json:"relay_seconds"`
	RelayCPU     float64 `json:"relay_cpu_pct"`
	RelayPasses  int64   `json:"relay_passes"`
	RelayLoaded  int64   `json:"relay_loaded"`
	// After every key of the run was deleted (the relay mark too):
	// ReloadSeconds is one relay pass (RunOnce), Reloaded the jobs it
	// pushed, InRedisAfter the topic's jobs in Redis then and
	// InHorizonAfter the rows due within the horizon of that pass's start;
	// RecovererSeconds is one recoverer run (RunOnce) after it, over every
	// row, RecovererScanned its rows.
	ReloadSeconds    float64 `json:"reload_seconds"`
	Reloaded         int     `json:"reloaded"`
	InRedisAfter     int64   `json:"in_redis_after"`
	InHorizonAfter   int64   `json:"in_horizon_after"`
	RecovererSeconds float64 `json:"recoverer_seconds"`
	RecovererScanned int     `json:"recoverer_scanned"`
}

// horizonWarmup lets the relay's start-up work (the first count of the
// rows) pass before its CPU is watched.
const horizonWarmup = time.Second

// Horizon measures what a durable topic's horizon is for. Jobs durable jobs
// due uniformly over Window (a day) are enqueued, Batch per call from
// Concurrency goroutines, with queue Horizon (1h): Redis holds only those
// due within the horizon. Their Redis memory is compared with CompareJobs
// jobs of the same due times on a redis topic (scaled to Jobs when fewer).
// Then a relay (recoverer.Relay) runs for Duration, loading the jobs that
// enter the horizon, and its CPU is this process's (Rate, % of one core).
// Last, every key of the run is deleted (Redis lost its data) and one relay
// pass and one recoverer run put the horizon back: Seconds is the two
// together. Missing counts rows due within the horizon the relay did not
// put back. No job is handled: most are due tomorrow.
func Horizon(ctx context.Context, o Options) (Result, error) {
	return run(ctx, "horizon", o, horizonBody)
}

func horizonBody(ctx context.Context, s *sandbox, o Options, r *Result) error {
	const topic, compare = "bench.horizon", "bench.horizon.redis"
	h := &HorizonStats{Horizon: o.Horizon.String(), Over: o.Window.String(), CompareJobs: o.CompareJobs}
	r.Horizon = h
	r.Jobs = o.Jobs
	horizon := o.Horizon.Milliseconds()

	// The durable topic: due times on the SQL clock, which Schedule uses.
	sqlNow, err := s.led.SQLNow(ctx)
	if err != nil {
		return err
	}
	used0 := usedMemory(ctx, s.env.Redis)
	start := time.Now()
	err = s.load(ctx, topic, loadSpec{n: o.Jobs, workers: o.Concurrency, batch: o.Batch,
		set: spreadDue(sqlNow, o.Window, o.Jobs), label: "durable enqueue"}, o.Progress)
	if err != nil {
		return err
	}
	took := time.Since(start)
	h.EnqueueSeconds, h.EnqueueRate = seconds(took), perSecond(o.Jobs, took)
	h.UsedMemoryDelta = delta(used0, usedMemory(ctx, s.env.Redis))
	if h.RedisBytes, err = keysMemory(ctx, s.env.Redis, topicKeys(s.ns, topic)); err != nil {
		return err
	}
	if h.InRedis, err = s.waiting(ctx, topic); err != nil {
		return err
	}
	if h.Rows, err = s.led.Count(ctx); err != nil {
		return err
	}
	r.DurableRows = &h.Rows
	if h.InHorizon, err = s.inHorizon(ctx, topic, sqlNow+horizon); err != nil {
		return err
	}
	if h.Rows != int64(o.Jobs) {
		r.Notes = append(r.Notes, fmt.Sprintf("the ledger holds %d rows for %d jobs enqueued", h.Rows, o.Jobs))
	}

	// The same due times on a redis topic, for the memory they take there.
	redisNow, err := s.redisNowMs(ctx)
	if err != nil {
		return err
	}
	used0 = usedMemory(ctx, s.env.Redis)
	start = time.Now()
	err = s.load(ctx, compare, loadSpec{n: o.CompareJobs, workers: o.Concurrency, batch: o.Batch,
		set: spreadDue(redisNow, o.Window, o.CompareJobs), label: "redis-topic enqueue"}, o.Progress)
	if err != nil {
		return err
	}
	h.CompareRate = perSecond(o.CompareJobs, time.Since(start))
	h.CompareUsedMemoryDelta = delta(used0, usedMemory(ctx, s.env.Redis))
	if h.CompareBytes, err = keysMemory(ctx, s.env.Redis, topicKeys(s.ns, compare)); err != nil {
		return err
	}
	h.CompareBytesForJobs = h.CompareBytes
	if h.CompareBytes > 0 && o.CompareJobs < o.Jobs {
		h.CompareBytesForJobs = h.CompareBytes * int64(o.Jobs) / int64(o.CompareJobs)
		r.Notes = append(r.Notes, fmt.Sprintf("the redis topic's memory is extrapolated from %d jobs to %d", o.CompareJobs, o.Jobs))
	}
	if err := deleteKeys(ctx, s.env.Redis, topicKeys(s.ns, compare)); err != nil {
		return err
	}

	if err := s.watchRelay(ctx, o, r, h); err != nil {
		return err
	}
	if err := s.recoverHorizon(ctx, topic, horizon, r, h); err != nil {
		return err
	}
	r.Seconds = h.ReloadSeconds + h.RecovererSeconds
	return nil
}

// watchRelay runs a relay over the sandbox for o.Duration after its first
// pass, and measures its CPU.
func (s *sandbox) watchRelay(ctx context.Context, o Options, r *Result, h *HorizonStats) error {
	relay, err := s.newRelay()
	if err != nil {
		return err
	}
	start := time.Now()
	if _, ran, err := relay.RunOnce(ctx); err != nil || !ran {
		return relayErr("first relay pass", ran, err)
	}
	h.FirstPassSeconds = seconds(time.Since(start))

	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(rctx) }()
	sleep(ctx, horizonWarmup)
	totals0 := relay.Totals()
	before := s.probe(ctx)
	// No progress display here: its redraws would count in the figure.
	sleep(ctx, o.Duration)
	after := s.probe(ctx)
	totals1 := relay.Totals()
	cancel()
	if err := <-done; err != nil {
		return fmt.Errorf("bench: relay: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r.Usage = usageBetween(before, after)
	h.RelaySeconds = seconds(after.at.Sub(before.at))
	h.RelayCPU = r.Usage.ProcessCPU
	h.RelayPasses = totals1.Passes - totals0.Passes
	h.RelayLoaded = totals1.Loaded - totals0.Loaded
	r.Rate, r.Unit = h.RelayCPU, "%core"
	if f := totals1.Failed - totals0.Failed; f > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d relay passes failed while watched", f))
	}
	return nil
}

// recoverHorizon deletes every key of the run, as a Redis that lost its
// data, then times one relay pass and one recoverer run.
func (s *sandbox) recoverHorizon(ctx context.Context, topic string, horizon int64, r *Result, h *HorizonStats) error {
	if err := deleteKeys(ctx, s.env.Redis, s.ns+":*"); err != nil {
		return fmt.Errorf("bench: wipe the run's keys: %w", err)
	}
	relay, err := s.newRelay()
	if err != nil {
		return err
	}
	sqlNow, err := s.led.SQLNow(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	rep, ran, err := relay.RunOnce(ctx)
	if err != nil || !ran {
		return relayErr("relay pass after the wipe", ran, err)
	}
	h.ReloadSeconds = seconds(time.Since(start))
	h.Reloaded = rep.Pushed()
	if h.InRedisAfter, err = s.waiting(ctx, topic); err != nil {
		return err
	}
	// The pass loaded up to its own clock + horizon, at or after sqlNow's.
	if h.InHorizonAfter, err = s.inHorizon(ctx, topic, sqlNow+horizon); err != nil {
		return err
	}
	if lost := h.InHorizonAfter - h.InRedisAfter; lost > 0 {
		r.Missing = int(lost)
		r.Notes = append(r.Notes, fmt.Sprintf("after the wipe the relay put back %d jobs; %d rows due within the horizon are not in Redis", h.InRedisAfter, lost))
	}

	rec, err := recoverer.New(s.q, ledgerops.Of(s.led), recovery.Config{Grace: 2 * time.Second, HeartbeatInterval: time.Second, Logger: quietLogger()})
	if err != nil {
		return err
	}
	start = time.Now()
	rrep, err := rec.RunOnce(ctx)
	h.RecovererSeconds = seconds(time.Since(start))
	if err != nil {
		return err
	}
	if rrep.Skipped {
		return errors.New("bench: recovery run skipped: another recoverer holds the sandbox's lock")
	}
	h.RecovererScanned = rrep.Scanned
	r.Notes = append(r.Notes, fmt.Sprintf("recovery report after the wipe: scanned %d, re-enqueued %d, data loss detected: %v",
		rrep.Scanned, rrep.Reenqueued, rrep.DataLossDetected()))
	return nil
}

func (s *sandbox) newRelay() (*recoverer.Relay, error) {
	return recoverer.NewRelay(s.q, ledgerops.Of(s.led), recovery.RelayConfig{Logger: quietLogger()})
}

func relayErr(what string, ran bool, err error) error {
	if err != nil {
		return fmt.Errorf("bench: %s: %w", what, err)
	}
	return fmt.Errorf("bench: %s: another relay holds the sandbox's lock", what)
}

// quietLogger drops everything: the staged losses' loud logs would only
// alarm, and the reports say the same in the result.
func quietLogger() logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(discard{})
	return l
}

// waiting is topic's jobs waiting in Redis.
func (s *sandbox) waiting(ctx context.Context, topic string) (int64, error) {
	st, err := s.q.Stats(ctx, topic)
	if err != nil {
		return 0, err
	}
	return st.Due, nil
}

// inHorizon counts topic's waiting rows due up to upTo (SQL clock).
func (s *sandbox) inHorizon(ctx context.Context, topic string, upTo int64) (int64, error) {
	counts, err := s.led.ScheduledCounts(ctx, upTo)
	if err != nil {
		return 0, err
	}
	c := counts[topic]
	return c.Total - c.Beyond, nil
}

// spreadDue returns a loadSpec.set that makes n jobs due uniformly over
// (now, now + over], Unix ms. Job k takes the slot (k × p) mod n, p a prime
// coprime with n, so every batch of consecutive jobs mixes near and far
// due times as real traffic does (each batch then pushes its share of the
// horizon to Redis).
func spreadDue(now int64, over time.Duration, n int) func(k int, j *queue.NewJob) {
	const p = 1_000_003
	span := over.Milliseconds()
	mix := int64(n)%p != 0
	return func(k int, j *queue.NewJob) {
		slot := int64(k)
		if mix {
			slot = int64(k) * p % int64(n)
		}
		j.RunAt = now + 1 + slot*span/int64(n)
	}
}

// topicKeys is the pattern of topic's keys in namespace ns (internal/dataplane/keys.go).
func topicKeys(ns, topic string) string { return ns + ":{" + topic + "}:*" }

// keysMemory sums MEMORY USAGE ... SAMPLES 0 (every element counted) over
// the keys matching match; -1 when Redis does not say (miniredis).
func keysMemory(ctx context.Context, rdb redis.UniversalClient, match string) (int64, error) {
	if embeddedRedis(ctx, rdb) {
		return -1, nil // miniredis has no MEMORY USAGE ... SAMPLES
	}
	var total int64
	unknown := false
	err := forEachKeys(ctx, rdb, match, func(ctx context.Context, c redis.UniversalClient, keys []string) error {
		for _, k := range keys {
			n, err := c.MemoryUsage(ctx, k, 0).Result()
			if err != nil {
				if errors.Is(err, redis.Nil) {
					continue // gone meanwhile
				}
				if strings.Contains(strings.ToLower(err.Error()), "unknown command") {
					unknown = true
					return nil
				}
				return fmt.Errorf("bench: MEMORY USAGE %s: %w", k, err)
			}
			total += n
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if unknown {
		return -1, nil
	}
	return total, nil
}

// usedMemory reads INFO memory used_memory, or -1.
func usedMemory(ctx context.Context, rdb redis.UniversalClient) int64 {
	c, ok := rdb.(*redis.Client)
	if !ok {
		return -1
	}
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return -1
	}
	v, err := strconv.ParseInt(infoFields(info)["used_memory"], 10, 64)
	if err != nil {
		return -1
	}
	return v
}

// delta is after - before, or -1 when either is unknown.
func delta(before, after int64) int64 {
	if before < 0 || after < 0 {
		return -1
	}
	return after - before
}

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// payloadJSON is every task's payload: delayq bench's (an order-close
// job's size).
const payloadJSON = `{"order_no":"202611300001","user":42}`

// measure runs one scenario in a queue of its own and deletes the queue's
// keys afterwards, whatever happens.
func measure(ctx context.Context, o options) (r result, err error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return r, err
	}
	queue := "dqbench_asynq_" + hex.EncodeToString(b)
	r = result{Scenario: "asynq-" + o.scenario, AsynqVersion: asynqVersion(), Jobs: o.jobs, Queue: queue}
	r.Params = fmt.Sprintf("jobs=%d concurrency=%d", o.jobs, o.concurrency)
	if o.scenario == "lateness" {
		r.Params = fmt.Sprintf("jobs=%d window=%s lead=%s concurrency=%d", o.jobs, o.window, o.lead, o.concurrency)
	}

	// The fill's own pool, big enough for its goroutines; the server gets
	// asynq's defaults, as its users do.
	fillRDB := redis.NewClient(&redis.Options{Addr: o.redis, DB: o.redisDB, PoolSize: o.fill + 4})
	defer fillRDB.Close()
	if err := fillRDB.Ping(ctx).Err(); err != nil {
		return r, fmt.Errorf("redis %s: %w", o.redis, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		err = errors.Join(err, deleteQueue(cctx, fillRDB, queue))
	}()

	t := newTracker(o.jobs)
	handler := asynq.HandlerFunc(func(ctx context.Context, _ *asynq.Task) error {
		id, _ := asynq.GetTaskID(ctx)
		t.handle(id, time.Now())
		return nil
	})
	cfg := asynq.Config{Concurrency: o.concurrency, Queues: map[string]int{queue: 1}, LogLevel: asynq.WarnLevel,
		DelayedTaskCheckInterval: o.delayedCheck}
	srvOpt := asynq.RedisClientOpt{Addr: o.redis, DB: o.redisDB}
	client := asynq.NewClientFromRedisClient(fillRDB)

	if o.scenario == "drain" {
		if err := fill(ctx, client, queue, o, nil); err != nil {
			return r, err
		}
		before := readProbe(ctx, fillRDB)
		start := time.Now()
		srv := asynq.NewServer(srvOpt, cfg)
		if err := srv.Start(handler); err != nil {
			return r, fmt.Errorf("asynq server: %w", err)
		}
		all, lastAt := t.wait(ctx, time.Time{}, o.stall)
		srv.Shutdown()
		after := readProbe(ctx, fillRDB)
		elapsed := lastAt.Sub(start)
		if !all {
			r.Notes = append(r.Notes, fmt.Sprintf("stalled: no task ran for %s; the rest count as missing", o.stall))
		}
		t.tally(&r)
		r.Seconds, r.Unit = elapsed.Seconds(), "jobs/s"
		if elapsed > 0 {
			r.Rate = float64(r.Handled) / elapsed.Seconds()
		}
		r.Costs = costsBetween(before, after, r.Handled)
		return r, ctx.Err()
	}

	// lateness: the server first, idle, as in production.
	srv := asynq.NewServer(srvOpt, cfg)
	if err := srv.Start(handler); err != nil {
		return r, fmt.Errorf("asynq server: %w", err)
	}
	before := readProbe(ctx, fillRDB)
	now, err := fillRDB.Time(ctx).Result()
	if err != nil {
		srv.Shutdown()
		return r, fmt.Errorf("redis TIME: %w", err)
	}
	first := now.Add(o.lead).UnixMilli()
	span := o.window.Milliseconds()
	t.due = func(k int) int64 { return first + int64(k)*span/int64(o.jobs) }
	loadStart := time.Now()
	if err := fill(ctx, client, queue, o, t.due); err != nil {
		srv.Shutdown()
		return r, err
	}
	if took := time.Since(loadStart); took > o.lead {
		r.Notes = append(r.Notes, fmt.Sprintf("enqueueing took %s, longer than the lead %s", took.Round(time.Millisecond), o.lead))
	}
	all, _ := t.wait(ctx, time.UnixMilli(t.due(o.jobs-1)), o.stall)
	srv.Shutdown()
	after := readProbe(ctx, fillRDB)
	if !all {
		r.Notes = append(r.Notes, fmt.Sprintf("stalled: no task ran for %s after the last due time; the rest count as missing", o.stall))
	}
	t.tally(&r)
	window := time.Duration(t.due(o.jobs-1)-first) * time.Millisecond
	r.Seconds, r.Unit = window.Seconds(), "due/s"
	r.Rate = float64(o.jobs) / max(window, time.Millisecond).Seconds()
	r.Latency = latencyOf(t.lateness())
	r.Costs = costsBetween(before, after, r.Handled)
	interval := o.delayedCheck
	if interval == 0 {
		interval = 5 * time.Second
	}
	r.Notes = append(r.Notes, fmt.Sprintf("asynq moves due tasks to its pending list every DelayedTaskCheckInterval (%s here), "+
		"keeps due times in whole seconds (a task may run up to 1 s early: EARLY), and an idle processor polls every TaskCheckInterval (1 s by default): these bound its lateness", interval))
	return r, ctx.Err()
}

// fill enqueues tasks 0..jobs-1 with asynq's client from o.fill
// goroutines, each task due at due(k) (Unix ms) or at once when due is nil.
func fill(ctx context.Context, c *asynq.Client, queue string, o options, due func(k int) int64) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	payload := []byte(payloadJSON)
	for range o.fill {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				k := int(next.Add(1) - 1)
				if k >= o.jobs {
					return
				}
				opts := []asynq.Option{asynq.Queue(queue), asynq.TaskID(jobID(k))}
				if due != nil {
					opts = append(opts, asynq.ProcessAt(time.UnixMilli(due(k))))
				}
				if _, err := c.EnqueueContext(ctx, asynq.NewTask("bench", payload), opts...); err != nil {
					cancel(fmt.Errorf("enqueue %s: %w", jobID(k), err))
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// jobID names the k-th task; jobIndex reads k back.
func jobID(k int) string { return "j" + strconv.Itoa(k) }

func jobIndex(id string) (int, bool) {
	if len(id) < 2 || id[0] != 'j' {
		return 0, false
	}
	k, err := strconv.Atoi(id[1:])
	return k, err == nil && k >= 0
}

// tracker counts what the handlers saw: runs per task, the first run's
// lateness, and when the last new task ran.
type tracker struct {
	counts   []atomic.Uint32
	late     []int64 // µs, first run's start minus due time (lateness)
	due      func(k int) int64
	distinct atomic.Int64
	early    atomic.Int64
	stray    atomic.Int64
	lastAt   atomic.Int64 // Unix ns of the last task run for the first time
	all      chan struct{}
	once     sync.Once
}

func newTracker(n int) *tracker {
	return &tracker{counts: make([]atomic.Uint32, n), late: make([]int64, n), all: make(chan struct{})}
}

func (t *tracker) handle(id string, at time.Time) {
	k, ok := jobIndex(id)
	if !ok || k >= len(t.counts) {
		t.stray.Add(1)
		return
	}
	if t.counts[k].Add(1) != 1 {
		return
	}
	if t.due != nil {
		lateUs := at.UnixMicro() - t.due(k)*1000
		if lateUs < 0 {
			t.early.Add(1)
		}
		t.late[k] = lateUs
	}
	t.lastAt.Store(at.UnixNano())
	if t.distinct.Add(1) == int64(len(t.counts)) {
		t.once.Do(func() { close(t.all) })
	}
}

// wait returns when every task ran (true), when ctx ends, or when no new
// task ran for stall after quietUntil; and when the last new task ran.
func (t *tracker) wait(ctx context.Context, quietUntil time.Time, stall time.Duration) (bool, time.Time) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last, lastChange := t.distinct.Load(), time.Now()
	for {
		select {
		case <-t.all:
			return true, time.Unix(0, t.lastAt.Load())
		case <-ctx.Done():
			return false, time.Unix(0, t.lastAt.Load())
		case now := <-tick.C:
			if n := t.distinct.Load(); n != last {
				last, lastChange = n, now
			}
			since := lastChange
			if quietUntil.After(since) {
				since = quietUntil
			}
			if now.After(quietUntil) && now.Sub(since) > stall {
				return false, time.Unix(0, t.lastAt.Load())
			}
		}
	}
}

func (t *tracker) tally(r *result) {
	r.Handled = int(t.distinct.Load())
	r.Early = int(t.early.Load())
	r.Duplicates, r.Missing = 0, 0
	for k := range t.counts {
		switch c := t.counts[k].Load(); {
		case c == 0:
			r.Missing++
		case c > 1:
			r.Duplicates += int(c - 1)
		}
	}
	if s := t.stray.Load(); s > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d runs of tasks the run did not enqueue", s))
	}
}

// lateness is the recorded lateness of the tasks that ran, in µs.
func (t *tracker) lateness() []int64 {
	out := make([]int64, 0, len(t.late))
	for k, v := range t.late {
		if t.counts[k].Load() > 0 {
			out = append(out, v)
		}
	}
	return out
}

// latencyOf sorts µs values and returns their percentiles, nil for none.
func latencyOf(us []int64) *latency {
	if len(us) == 0 {
		return nil
	}
	slices.Sort(us)
	at := func(p float64) float64 { return float64(us[int(p*float64(len(us)-1)+0.5)]) / 1000 }
	return &latency{P50: at(0.5), P90: at(0.9), P99: at(0.99), Max: at(1), Min: at(0), N: len(us)}
}

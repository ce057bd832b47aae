package dataplane

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/internal/testenv"
)

// buryLedger records the dead jobs each Bury archives.
type buryLedger struct {
	memLedger
	mu     sync.Mutex
	buries [][]string // ids per call
}

func (l *buryLedger) Bury(_ context.Context, dead []DeadJob) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]string, len(dead))
	for i, d := range dead {
		ids[i] = d.Job.ID
	}
	l.buries = append(l.buries, ids)
	return nil
}

// failScripts fails every script call while on is set, as a Redis outage
// between the ledger step and the Redis step would.
type failScripts struct{ on atomic.Bool }

func (*failScripts) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f.on.Load() && (cmd.Name() == "evalsha" || cmd.Name() == "eval") {
			cmd.SetErr(errOutage)
			return errOutage
		}
		return next(ctx, cmd)
	}
}

func (*failScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

var errOutage = errors.New("test: redis outage")

// deadCounter counts Dead per topic.
type deadCounter struct {
	NopObserver
	n atomic.Int64
}

func (d *deadCounter) Dead(_ string, n int) { d.n.Add(int64(n)) }

// A dead job whose Redis bury fails is archived once: the flush tried again
// buries it in Redis only. A job Claim had buried already is reported at
// once, without waiting for the other's Redis step; each job reaches OnDead
// and the observer once, after both stores have it.
func TestCompleterRetriesOnlyTheStepLeft(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	fail := &failScripts{}
	rdb.AddHook(fail)
	c, err := New(rdb, Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Enqueue(ctx, "t", NewJob{ID: "failed"}); err != nil {
		t.Fatal(err)
	}
	cl, err := c.Claim(ctx, "t", 1, 10*time.Second)
	if err != nil || len(cl.Jobs) != 1 {
		t.Fatalf("claim: %v, %d jobs", err, len(cl.Jobs))
	}
	failed := cl.Jobs[0]
	exhausted := &Job{Topic: "t", ID: "exhausted", Attempt: 3, LastError: "lease expired 3 times"}

	led := &buryLedger{memLedger: memLedger{rows: map[string]int{}}}
	obs := &deadCounter{}
	var mu sync.Mutex
	onDead := map[string]string{}
	log := testenv.QuietLogger()
	w, err := NewWorker(c, led, WorkerConfig{Logger: log, Observer: obs,
		OnDead: func(_ context.Context, j *Job, err error) {
			mu.Lock()
			defer mu.Unlock()
			onDead[j.ID] += err.Error() + ";"
		}})
	if err != nil {
		t.Fatal(err)
	}
	w.completer.add(deadOutcome(failed, errors.New("boom"), 1), buriedOutcome(exhausted, 1))

	fail.on.Store(true)
	if err := w.completer.flush(ctx); !errors.Is(err, errOutage) {
		t.Fatalf("flush during the outage: %v, want the outage", err)
	}
	if len(led.buries) != 1 || len(led.buries[0]) != 2 {
		t.Fatalf("ledger buries %v, want one of both jobs", led.buries)
	}
	if obs.n.Load() != 1 || len(onDead) != 1 || onDead["exhausted"] != "lease expired 3 times;" {
		t.Fatalf("after the failed flush: observer %d, OnDead %v; want the exhausted job only", obs.n.Load(), onDead)
	}

	fail.on.Store(false)
	if err := w.completer.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if len(led.buries) != 1 {
		t.Fatalf("ledger buries %v: archived again", led.buries)
	}
	if obs.n.Load() != 2 || onDead["failed"] != "boom;" || onDead["exhausted"] != "lease expired 3 times;" {
		t.Fatalf("observer %d, OnDead %v; want each job once", obs.n.Load(), onDead)
	}
	info, err := c.Get(ctx, "t", "failed")
	if err != nil || info.State != StateDead || info.Job.LastError != "boom" {
		t.Fatalf("Redis: %v, %+v", err, info)
	}
	if w.completer.pendingLen() != 0 {
		t.Fatalf("%d outcomes still pending", w.completer.pendingLen())
	}
}

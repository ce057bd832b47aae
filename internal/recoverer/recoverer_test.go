package recoverer_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/internal/redislock"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// Stale rows whose jobs Redis lost come back (in-progress ones due at once,
// retrying ones at their run time, with the row's attempt); stale rows Redis
// still tracks and rows not stale yet are left alone. A second run finds
// nothing left to do.
func TestRunRestoresLostStaleRows(t *testing.T) {
	e := newREnv(t)
	ctx := testenv.Context(t)
	now := e.redisNow(t)
	stale := now - 10_000
	e.ensureEpoch(t, "orders")
	e.claimAndRecord(t, "orders", []string{"tracked-1", "tracked-2"}, stale)
	e.record(t, []row{
		{topic: "orders", id: "lost-1", attempt: 1, runAt: now - 60_000, leaseUntil: stale},
		{topic: "orders", id: "lost-2", attempt: 3, runAt: now - 60_000, leaseUntil: stale},
		{topic: "orders", id: "lost-retry", attempt: 2, runAt: now + 3_600_000, leaseUntil: stale, retrying: true, lastError: "boom"},
		{topic: "orders", id: "fresh", attempt: 1, runAt: now, leaseUntil: now + 30_000},
		{topic: "orders", id: "within-grace", attempt: 1, runAt: now, leaseUntil: now - 500},
	})
	r := e.recoverer(t, recoverer.Config{})
	rep, err := r.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Skipped || rep.Scanned != 5 || rep.StillTracked != 2 || rep.Reenqueued != 3 || rep.Errors != 0 || rep.DataLossDetected() {
		t.Fatalf("report %+v", rep)
	}
	if tc := rep.ByTopic["orders"]; tc != (recoverer.TopicCounts{Scanned: 5, StillTracked: 2, Reenqueued: 3}) {
		t.Fatalf("by topic %+v", rep.ByTopic)
	}
	slices.Sort(rep.Sample)
	if !slices.Equal(rep.Sample, []string{"orders/lost-1", "orders/lost-2", "orders/lost-retry"}) {
		t.Fatalf("sample %v", rep.Sample)
	}
	for id, attempt := range map[string]int{"lost-1": 1, "lost-2": 3} {
		info := e.state(t, "orders", id)
		if info.State != queue.StateRetrying || info.Score > now || info.Job.Attempt != attempt {
			t.Fatalf("%s: %s at %d attempt %d", id, info.State, info.Score, info.Job.Attempt)
		}
	}
	if info := e.state(t, "orders", "lost-retry"); info.State != queue.StateRetrying || info.Score != now+3_600_000 ||
		info.Job.Attempt != 2 || info.Job.LastError != "boom" {
		t.Fatalf("lost-retry: %+v %+v", info, info.Job)
	}
	for _, id := range []string{"fresh", "within-grace"} {
		if info := e.state(t, "orders", id); info.State != queue.StateUnknown {
			t.Fatalf("%s (not stale) was touched: %s", id, info.State)
		}
	}
	for _, id := range []string{"tracked-1", "tracked-2"} {
		if info := e.state(t, "orders", id); info.State != queue.StateInFlight || info.Job.Attempt != 1 {
			t.Fatalf("%s: %s attempt %d", id, info.State, info.Job.Attempt)
		}
	}

	rep, err = r.RunOnce(ctx)
	if err != nil || rep.Reenqueued != 0 || rep.StillTracked != 5 {
		t.Fatalf("second run: %+v, %v", rep, err)
	}
	if c := r.Counters(); c.Runs != 2 || c.Reenqueued != 3 || c.Scanned != 10 || c.DataLoss != 0 {
		t.Fatalf("counters %+v", c)
	}
}

// A page full of rows that need nothing (Redis tracks them) does not hide
// the rows after it: rows are paged by id.
func TestRunPagesPastRowsNeedingNothing(t *testing.T) {
	e := newREnv(t)
	now := e.redisNow(t)
	e.ensureEpoch(t, "t")
	tracked := make([]string, 45)
	for i := range tracked {
		tracked[i] = fmt.Sprintf("tracked-%02d", i)
	}
	e.claimAndRecord(t, "t", tracked, now-10_000)
	var lost []row
	for i := 0; i < 7; i++ {
		lost = append(lost, row{topic: "t", id: fmt.Sprintf("lost-%d", i), attempt: 1, runAt: now - 20_000, leaseUntil: now - 10_000})
	}
	e.record(t, lost)
	r := e.recoverer(t, recoverer.Config{PageSize: 10, Chunk: 3})
	rep, err := r.RunOnce(testenv.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Scanned != 52 || rep.StillTracked != 45 || rep.Reenqueued != 7 {
		t.Fatalf("report %+v", rep)
	}
	st, err := e.c.Stats(testenv.Context(t), "t")
	if err != nil || st.Due != 7 || st.InFlight != 45 {
		t.Fatalf("stats %+v, %v", st, err)
	}
}

// A dry run reports what it would re-enqueue and changes nothing, not even
// the epoch markers.
func TestRunDryRunChangesNothing(t *testing.T) {
	e := newREnv(t)
	now := e.redisNow(t)
	e.claimAndRecord(t, "a", []string{"held"}, now-10_000)
	e.record(t, []row{
		{topic: "b", id: "lost-1", attempt: 1, runAt: now, leaseUntil: now - 10_000},
		{topic: "b", id: "lost-2", attempt: 1, runAt: now, leaseUntil: now - 10_000},
	})
	e.ensureEpoch(t, "b")
	before, err := e.rdb.Keys(testenv.Context(t), e.ns+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(before)
	r := e.recoverer(t, recoverer.Config{DryRun: true})
	rep, err := r.RunOnce(testenv.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if !rep.DryRun || rep.Reenqueued != 2 || rep.StillTracked != 1 || len(rep.EpochsWritten) != 0 {
		t.Fatalf("report %+v", rep)
	}
	after, err := e.rdb.Keys(testenv.Context(t), e.ns+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(after)
	if !slices.Equal(before, after) {
		t.Fatalf("keys before %v, after %v", before, after)
	}
	for _, id := range []string{"lost-1", "lost-2"} {
		if info := e.state(t, "b", id); info.State != queue.StateUnknown {
			t.Fatalf("dry run restored %s", id)
		}
	}
}

// A second recoverer that finds the lock held skips its run and says so.
func TestRunSkipsWhenLockHeld(t *testing.T) {
	e := newREnv(t)
	now := e.redisNow(t)
	e.record(t, []row{{topic: "t", id: "lost", attempt: 1, runAt: now, leaseUntil: now - 10_000}})
	r := e.recoverer(t, recoverer.Config{})
	other := redislock.New(e.rdb, r.Config().LockKey, time.Minute)
	if ok, err := other.TryAcquire(testenv.Context(t)); !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	rep, err := r.RunOnce(testenv.Context(t))
	if err != nil || !rep.Skipped || rep.Scanned != 0 {
		t.Fatalf("report %+v, %v", rep, err)
	}
	if len(e.logged(logrus.InfoLevel, "another recoverer holds the lock")) != 1 {
		t.Fatal("the skip was not logged")
	}
	if info := e.state(t, "t", "lost"); info.State != queue.StateUnknown {
		t.Fatal("a skipped run restored a job")
	}
	if err := other.Release(testenv.Context(t)); err != nil {
		t.Fatal(err)
	}
	rep, err = r.RunOnce(testenv.Context(t))
	if err != nil || rep.Skipped || rep.Reenqueued != 1 {
		t.Fatalf("after release: %+v, %v", rep, err)
	}
	if c := r.Counters(); c.Skipped != 1 || c.Runs != 1 {
		t.Fatalf("counters %+v", c)
	}
	if v, _ := e.rdb.Exists(testenv.Context(t), r.Config().LockKey).Result(); v != 0 {
		t.Fatal("lock left behind")
	}
}

// The grace period must exceed the workers' heartbeat; bad specs and sizes
// are refused too.
func TestConfigValidation(t *testing.T) {
	e := newREnv(t)
	bad := []recoverer.Config{
		{Grace: 10 * time.Second, HeartbeatInterval: 10 * time.Second},
		{Grace: 5 * time.Second, HeartbeatInterval: 10 * time.Second},
		{Grace: 5 * time.Second},  // default heartbeat 10s
		{Grace: -1 * time.Second}, // negative
		{Schedule: "every now and then"},
		{PageSize: -1},
		{Chunk: -5},
		{LockTTL: time.Millisecond},
	}
	for _, cfg := range bad {
		if _, err := recoverer.New(e.c, ledgerops.Of(e.led), cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		} else if cfg.Grace != 0 && !strings.Contains(err.Error(), "Grace") {
			t.Errorf("config %+v: error %q does not name Grace", cfg, err)
		}
	}
	r, err := recoverer.New(e.c, ledgerops.Of(e.led), recoverer.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := r.Config()
	if cfg.Schedule != "@every 30s" || cfg.Grace != 30*time.Second || cfg.HeartbeatInterval != 10*time.Second ||
		cfg.LockKey != e.ns+":recovery:lock" {
		t.Fatalf("defaults %+v", cfg)
	}
	for _, spec := range []string{"*/5 * * * *", "*/10 * * * * *", "@hourly", "@every 1m30s"} {
		if _, err := recoverer.New(e.c, ledgerops.Of(e.led), recoverer.Config{Schedule: spec}); err != nil {
			t.Errorf("spec %q refused: %v", spec, err)
		}
	}
}

// Reports are kept, newest first, at most KeepReports; OnReport sees each.
func TestReportsKept(t *testing.T) {
	e := newREnv(t)
	var seen []recoverer.Report
	r := e.recoverer(t, recoverer.Config{KeepReports: 3, OnReport: func(rep recoverer.Report) { seen = append(seen, rep) }})
	var starts []time.Time
	for i := 0; i < 5; i++ {
		rep, err := r.RunOnce(testenv.Context(t))
		if err != nil {
			t.Fatal(err)
		}
		starts = append(starts, rep.Start)
	}
	got := r.Reports()
	if len(got) != 3 || len(seen) != 5 {
		t.Fatalf("%d reports kept, %d seen", len(got), len(seen))
	}
	for i, rep := range got {
		if !rep.Start.Equal(starts[4-i]) || rep.Trigger != "manual" || rep.Duration <= 0 {
			t.Fatalf("report %d: %+v", i, rep)
		}
	}
}

// A run whose Redis does not answer fails with an error in its report.
func TestRunReportsRedisDown(t *testing.T) {
	e := newREnv(t)
	r := e.recoverer(t, recoverer.Config{})
	ctx, cancel := context.WithCancel(testenv.Context(t))
	cancel()
	rep, err := r.RunOnce(ctx)
	if err == nil || rep.Errors == 0 || rep.Skipped {
		t.Fatalf("report %+v, %v", rep, err)
	}
	if c := r.Counters(); c.Failed != 1 {
		t.Fatalf("counters %+v", c)
	}
}

// finishing is a ledger whose jobs finish right after the recoverer first
// reads their rows (the rows are deleted): what a run sees while workers
// complete jobs.
type finishing struct {
	recoverer.Store
	led   *ledger.Ledger
	ids   map[string]bool
	reads int
}

func (f *finishing) Stale(ctx context.Context, olderThan, afterID int64, limit int) ([]ledger.Entry, error) {
	rows, err := f.Store.Stale(ctx, olderThan, afterID, limit)
	if f.reads++; f.reads == 1 && err == nil {
		for _, e := range rows {
			if f.ids[e.JobID] {
				if err := ledgerops.Of(f.led).Complete(ctx, []queue.Ref{{Topic: e.Topic, ID: e.JobID, Attempt: e.Attempt}}); err != nil {
					return nil, err
				}
			}
		}
	}
	return rows, err
}

// A row that looked lost but whose job finished meanwhile (the row is gone
// when read again) is not re-enqueued: the job would run twice.
func TestRunLeavesRowsThatFinishedMeanwhile(t *testing.T) {
	e := newREnv(t)
	now := e.redisNow(t)
	e.ensureEpoch(t, "t")
	e.record(t, []row{
		{topic: "t", id: "finished", attempt: 1, runAt: now, leaseUntil: now - 10_000},
		{topic: "t", id: "lost", attempt: 1, runAt: now, leaseUntil: now - 10_000},
	})
	store := &finishing{Store: ledgerops.Of(e.led), led: e.led, ids: map[string]bool{"finished": true}}
	r, err := recoverer.New(e.c, store, recoverer.Config{Logger: e.log, Grace: 2 * time.Second, HeartbeatInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.RunOnce(testenv.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Scanned != 2 || rep.Moved != 1 || rep.Reenqueued != 1 || rep.Sample[0] != "t/lost" {
		t.Fatalf("report %+v", rep)
	}
	if info := e.state(t, "t", "finished"); info.State != queue.StateUnknown {
		t.Fatalf("the finished job was re-enqueued: %s", info.State)
	}
}

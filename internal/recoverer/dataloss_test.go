package recoverer_test

import (
	"context"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// Redis lost a topic (its keys, epoch marker included, are gone) while the
// ledger holds rows of it: the loss is logged at error level with the topic
// and the row count, counted, and the topic recovered in the same run:
// stale rows and retrying rows (due later, so not stale yet) come back, rows
// a live worker still holds do not. The marker is written again, so the
// next run finds no loss. Another topic is untouched.
func TestRunDetectsDataLoss(t *testing.T) {
	e := newREnv(t)
	ctx := testenv.Context(t)
	now := e.redisNow(t)
	e.ensureEpoch(t, "orders", "other")
	e.claimAndRecord(t, "other", []string{"o1"}, now+60_000)
	e.record(t, []row{
		{topic: "orders", id: "worker-died", attempt: 1, runAt: now - 60_000, leaseUntil: now - 10_000},
		{topic: "orders", id: "retry-later", attempt: 2, runAt: now + 600_000, leaseUntil: now + 630_000, retrying: true, lastError: "e"},
		{topic: "orders", id: "retry-soon", attempt: 1, runAt: now + 100, leaseUntil: now + 30_100, retrying: true, lastError: "e"},
		{topic: "orders", id: "running", attempt: 1, runAt: now - 1000, leaseUntil: now + 30_000},
	})
	e.dropTopic(t, "orders")

	r := e.recoverer(t, recoverer.Config{})
	rep, err := r.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.DataLoss) != 1 || rep.DataLoss[0] != (recoverer.TopicLoss{Topic: "orders", Rows: 4, Untracked: 4}) {
		t.Fatalf("data loss %+v", rep.DataLoss)
	}
	if rep.Reenqueued != 3 || rep.ByTopic["orders"].Reenqueued != 3 || rep.ByTopic["other"] != (recoverer.TopicCounts{}) {
		t.Fatalf("report %+v", rep)
	}
	logged := e.logged(logrus.ErrorLevel, "Redis lost data")
	if len(logged) != 1 || logged[0].Data["topic"] != "orders" || logged[0].Data["rows"] != int64(4) {
		t.Fatalf("loss log %v", logged)
	}
	if c := r.Counters(); c.DataLoss != 1 {
		t.Fatalf("counters %+v", c)
	}
	for id, want := range map[string]queue.State{
		"worker-died": queue.StateRetrying, "retry-later": queue.StateRetrying, "retry-soon": queue.StateRetrying,
		"running": queue.StateUnknown, // its worker is alive (lease not expired): it finishes it
	} {
		if info := e.state(t, "orders", id); info.State != want {
			t.Fatalf("%s: %s, want %s", id, info.State, want)
		}
	}
	if info := e.state(t, "orders", "retry-later"); info.Score != now+600_000 || info.Job.Attempt != 2 {
		t.Fatalf("retry-later due at %d attempt %d, want its run time %d, attempt 2", info.Score, info.Job.Attempt, now+600_000)
	}
	if missing, _ := e.c.EpochMissing(ctx, []string{"orders"}); len(missing) != 0 {
		t.Fatal("epoch marker not written again")
	}
	rep, err = r.RunOnce(ctx)
	if err != nil || rep.DataLossDetected() || rep.Reenqueued != 0 {
		t.Fatalf("second run: %+v, %v", rep, err)
	}
}

// A topic seen for the first time (no marker yet) whose rows Redis tracks is
// not a loss: its marker is written quietly.
func TestRunNewTopicIsNotALoss(t *testing.T) {
	e := newREnv(t)
	now := e.redisNow(t)
	e.claimAndRecord(t, "fresh", []string{"a", "b", "c"}, now+60_000)
	r := e.recoverer(t, recoverer.Config{})
	rep, err := r.RunOnce(testenv.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if rep.DataLossDetected() || len(e.logged(logrus.ErrorLevel, "Redis lost data")) != 0 {
		t.Fatalf("a new topic was taken for a loss: %+v", rep)
	}
	if len(rep.EpochsWritten) != 1 || rep.EpochsWritten[0] != "fresh" {
		t.Fatalf("epochs written %v", rep.EpochsWritten)
	}
}

// A topic of the queue's topics set without any ledger row gets its marker
// without any check.
func TestRunWritesMarkersOfQueueTopics(t *testing.T) {
	e := newREnv(t)
	if _, err := e.c.Enqueue(testenv.Context(t), "queued", queue.NewJob{ID: "x", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	rep, err := e.recoverer(t, recoverer.Config{}).RunOnce(testenv.Context(t))
	if err != nil || rep.Topics != 1 || len(rep.EpochsWritten) != 1 {
		t.Fatalf("report %+v, %v", rep, err)
	}
}

// vanishingRows is a ledger whose rows are gone by the time they are read
// again: what a check racing with completions sees.
type vanishingRows struct{ recoverer.Store }

func (vanishingRows) Claims(ctx context.Context, ids []int64) (map[int64]ledger.Claim, error) {
	return map[int64]ledger.Claim{}, nil
}

// Rows found untracked that are gone when read again were completing (the
// ledger row goes first, then Redis's entries): no loss.
func TestRunLossNeedsRowsStillThere(t *testing.T) {
	e := newREnv(t)
	now := e.redisNow(t)
	e.record(t, []row{{topic: "t", id: "done", attempt: 1, runAt: now, leaseUntil: now + 60_000}})
	r, err := recoverer.New(e.c, vanishingRows{ledgerops.Of(e.led)}, recoverer.Config{
		Logger: e.log, Grace: 2 * time.Second, HeartbeatInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.RunOnce(testenv.Context(t))
	if err != nil || rep.DataLossDetected() {
		t.Fatalf("report %+v, %v", rep, err)
	}
}

package recoverer_test

import (
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// A durable job's priority survives a Redis data loss: its ledger row
// keeps it, and both the relay's reload of a waiting job and the
// recoverer's restore of a dead worker's job put it back at its level,
// where it is claimed before older jobs of priority 0.
func TestPriorityOfADurableJobSurvivesRedisLoss(t *testing.T) {
	e := newREnv(t)
	c := e.durableClient(t, false)
	ctx := testenv.Context(t)
	if _, err := c.EnqueueBatch(ctx, durableTopic, []queue.NewJob{
		{ID: "low0", Delay: 30 * time.Second}, {ID: "vip", Priority: 2, Delay: 30 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, durableTopic, queue.NewJob{ID: "running", Priority: 3}); err != nil {
		t.Fatal(err)
	}
	if rows := e.scheduledRows(t, durableTopic); rows["vip"].Priority != 2 || rows["low0"].Priority != 0 {
		t.Fatalf("the rows keep priorities %d and %d, want 2 and 0", rows["vip"].Priority, rows["low0"].Priority)
	}
	// "running" is claimed and recorded by a worker that then dies.
	// Its due time is SQL's clock at the insert, which may be a moment
	// ahead of Redis's.
	var cl *dataplane.Claimed
	var err error
	testenv.WaitFor(ctx, t, "running is due", func() bool {
		cl, err = c.Claim(ctx, durableTopic, 1, time.Millisecond)
		return err != nil || len(cl.Jobs) > 0
	})
	if err != nil || len(cl.Jobs) != 1 || cl.Jobs[0].ID != "running" || cl.Jobs[0].Priority != 3 {
		t.Fatalf("claim: %v %v", cl, err)
	}
	if err := ledgerops.Of(e.led).Record(ctx, cl.Jobs, "dead-worker:1"); err != nil {
		t.Fatal(err)
	}
	if row, err := e.led.Row(ctx, durableTopic, "running"); err != nil || row.Priority != 3 {
		t.Fatalf("running's row after its claim: %+v %v, want priority 3", row, err)
	}
	r := e.relay(t, recoverer.RelayConfig{})
	e.relayOnce(t, r)

	// Redis loses everything of the namespace.
	e.wipeNamespace(t)
	if rep := e.relayOnce(t, r); !rep.Reload || rep.Reloaded[durableTopic] != 2 {
		t.Fatalf("after the loss: %+v, want low0 and vip reloaded", rep)
	}
	if info, err := c.Get(ctx, durableTopic, "vip"); err != nil || info.Job.Priority != 2 {
		t.Fatalf("vip after the reload: %+v %v, want priority 2", info, err)
	}
	rec := e.recoverer(t, recoverer.Config{}) // its grace: 2 s past the dead worker's lease
	testenv.WaitFor(ctx, t, "the recoverer restores the dead worker's job", func() bool {
		rep, err := rec.RunOnce(ctx)
		return err == nil && rep.Reenqueued == 1
	})
	// Both due now, the older of priority 0 first in due order: the
	// restored job goes first all the same, at its level.
	if _, err := c.Reschedule(ctx, ledgerops.Of(e.led), durableTopic, "low0", queue.RescheduleAt(time.Now().Add(-time.Second).UnixMilli())); err != nil {
		t.Fatal(err)
	}
	cl, err = c.Claim(ctx, durableTopic, 2, time.Minute)
	if err != nil || len(cl.Jobs) != 2 || cl.Jobs[0].ID != "running" || cl.Jobs[0].Priority != 3 || cl.Jobs[1].ID != "low0" {
		t.Fatalf("claim after the restore: %v %v, want running (priority 3) before low0", cl, err)
	}
}

package recoverer_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// deadSQLStore is the ledger of a process whose SQL server died under it
// (its Galera node): every read fails, while Redis answers.
type deadSQLStore struct{ recoverer.RelayStore }

var errNodeDown = errors.New("dial tcp: connect: connection refused")

func (deadSQLStore) SQLNow(context.Context) (int64, error) { return 0, errNodeDown }
func (deadSQLStore) Scheduled(context.Context, string, ledger.Cursor, int64, int) ([]ledger.Entry, error) {
	return nil, errNodeDown
}

// silentSQLStore is the ledger of a process whose SQL server went silent
// (its host gone: no reset, no refusal): every read waits until its
// context ends.
type silentSQLStore struct{ recoverer.RelayStore }

func (silentSQLStore) SQLNow(ctx context.Context) (int64, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

// A relay whose passes keep failing while it holds the lock lets another
// process take it, so that a process cut off from its SQL alone does not
// keep every durable job whose push was lost from running: whether its
// server refuses it or went silent (each SQL step of a pass is bounded).
func TestRelayHandsOverWhenItsPassesKeepFailing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(recoverer.RelayStore) recoverer.RelayStore
	}{
		{"refused", func(s recoverer.RelayStore) recoverer.RelayStore { return deadSQLStore{s} }},
		{"silent", func(s recoverer.RelayStore) recoverer.RelayStore { return silentSQLStore{s} }},
	} {
		t.Run(tc.name, func(t *testing.T) { testRelayHandsOver(t, tc.store) })
	}
}

func testRelayHandsOver(t *testing.T, broken func(recoverer.RelayStore) recoverer.RelayStore) {
	e := newDurableEnv(t, time.Minute)
	ctx := testenv.Context(t)
	cfg := recoverer.RelayConfig{Every: 20 * time.Millisecond, LockTTL: time.Second, HandOverAfter: 300 * time.Millisecond, Grace: time.Nanosecond}
	cut, _ := e.runRelay(t, broken(ledgerops.Of(e.led)), cfg)
	testenv.WaitFor(ctx, t, "the cut-off relay to lead and fail", func() bool { return cut.Totals().Failed > 0 })
	healthy, _ := e.runRelay(t, ledgerops.Of(e.led), cfg)

	// A commit whose push was lost: only a relay that reads SQL finds it.
	err := e.led.DB().WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		_, err := e.c.EnqueueTx(ctx, e.led.Tx(tx), durableTopic, queue.NewJob{ID: "orphan", Payload: []byte(`1`)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(ctx, t, "the healthy relay to push the orphan", func() bool {
		_, ok := e.inRedis(t, durableTopic, "orphan")
		return ok
	})
	if n := cut.Totals().HandOvers; n < 1 {
		t.Fatalf("the cut-off relay handed over %d times, want at least once", n)
	}
	// The pass's totals are written after its pushes: wait for them.
	testenv.WaitFor(ctx, t, "the healthy relay's pass to be counted", func() bool { return healthy.Totals().Passes > 0 })
	if tot := healthy.Totals(); tot.Wakes[recoverer.WakeLead] < 1 || tot.Failed != 0 {
		t.Fatalf("the healthy relay: wakes %v, %d failed passes; want it to lead without failing", tot.Wakes, tot.Failed)
	}
}

// A commit of unknown outcome that becomes visible only after the relay's
// check window passed its job's due time (a Galera node that died while
// committing: the survivors apply its last write sets after they evicted
// it): the enqueuer asks for a recheck, and the full pass it makes
// queue.Config.UncertainRecheck (3 s here) later pushes the job.
func TestRelayRechecksAfterACommitOfUnknownOutcome(t *testing.T) {
	e := newREnv(t)
	ctx := testenv.Context(t)
	c, err := dataplane.New(e.rdb, queue.Config{Namespace: e.ns, Store: e.led, UncertainRecheck: 3 * time.Second,
		TopicDurability: map[string]queue.Durability{durableTopic: queue.DurabilityDurable}})
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	// The cause of the first pass that pushed the job: a recheck's, not
	// the check every CheckEvery (which a loaded host can reach first: it
	// is not what this test is about, and is not counted against it).
	var (
		mu       sync.Mutex
		pushedBy string
	)
	onPass := func(rep recoverer.RelayReport) {
		mu.Lock()
		defer mu.Unlock()
		if pushedBy == "" && rep.Reloaded[durableTopic]+rep.Relayed[durableTopic]+rep.Loaded[durableTopic] > 0 {
			pushedBy = rep.Cause
		}
	}
	r, _ := e.runRelay(t, ledgerops.Of(e.led), recoverer.RelayConfig{Every: 20 * time.Millisecond, Grace: time.Nanosecond,
		FullEvery: time.Hour, CheckEvery: 30 * time.Second, OnPass: onPass})
	testenv.WaitFor(ctx, t, "the relay's first pass", func() bool { return r.Totals().Passes > 0 })

	tx := e.led.DB().WithContext(ctx).Begin()
	staged, err := c.EnqueueTx(ctx, e.led.Tx(tx), durableTopic, queue.NewJob{ID: "unknown"})
	if err != nil {
		t.Fatal(err)
	}
	runAt := staged.Results()[0].RunAt
	// Its note wakes a pass, which finds nothing yet and moves on.
	testenv.WaitFor(ctx, t, "the relay's check window to pass the invisible job's due time", func() bool {
		m, ok, err := c.RelayMark(ctx, 0)
		return err == nil && ok && m.Checked > runAt
	})
	c.AskRelayRecheck(ctx) // what the enqueuer does on its error
	testenv.WaitFor(ctx, t, "the recheck asked for now", func() bool { return r.Totals().Wakes[recoverer.WakeRecheck] > 0 })
	if err := tx.Commit().Error; err != nil {
		t.Fatal(err)
	}
	// A pass counts its wake when it ends, after its pushes.
	testenv.WaitFor(ctx, t, "the later recheck to push the job", func() bool {
		_, ok := e.inRedis(t, durableTopic, "unknown")
		return ok && r.Totals().Wakes[recoverer.WakeRecheck] >= 2
	})
	mu.Lock()
	by := pushedBy
	mu.Unlock()
	if by != recoverer.WakeRecheck {
		t.Fatalf("the job was pushed by a %q pass (wakes %v), want a recheck", by, r.Totals().Wakes)
	}
	testenv.WaitFor(ctx, t, "the rechecks to be dropped", func() bool { return e.rdb.ZCard(ctx, e.ns+":{relay}:recheck").Val() == 0 })
}

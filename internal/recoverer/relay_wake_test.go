package recoverer_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// countingStore is the ledger as the relay sees it, counting the reads of
// scheduled rows: one or more in every pass over SQL, none in a tick.
type countingStore struct {
	*ledger.Ledger
	reads atomic.Int64
}

func (s *countingStore) Scheduled(ctx context.Context, topic string, after ledger.Cursor, upTo int64, limit int) ([]ledger.Entry, error) {
	s.reads.Add(1)
	return ledgerops.Of(s.Ledger).Scheduled(ctx, topic, after, upTo, limit)
}

// tickCounter counts the relay's ticks: the pipelines that read its inbox.
type tickCounter struct {
	inbox string
	ticks atomic.Int64
}

func (h *tickCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *tickCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *tickCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if strings.EqualFold(c.Name(), "zrangebyscore") && len(c.Args()) > 1 && c.Args()[1] == h.inbox {
				h.ticks.Add(1)
				break
			}
		}
		return next(ctx, cmds)
	}
}

// runRelay runs a relay over store until the test ends and returns it with
// its tick counter.
func (e renv) runRelay(t *testing.T, store recoverer.RelayStore, cfg recoverer.RelayConfig) (*recoverer.Relay, *tickCounter) {
	t.Helper()
	ticks := &tickCounter{inbox: e.ns + ":{relay}:inbox"}
	e.rdb.AddHook(ticks)
	if cfg.Logger == nil {
		cfg.Logger = e.log
	}
	r, err := recoverer.NewRelay(e.c, store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testenv.Context(t))
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r, ticks
}

// waitTicks waits until the relay has ticked n more times.
func waitTicks(t *testing.T, ticks *tickCounter, n int64) {
	t.Helper()
	from := ticks.ticks.Load()
	testenv.WaitFor(testenv.Context(t), t, "relay ticks", func() bool { return ticks.ticks.Load() >= from+n })
}

// An idle relay reads Redis at each tick, waits on its bell between
// ticks, and reads SQL not at all.
func TestRelayIdleReadsNoSQL(t *testing.T) {
	e := newDurableEnv(t, time.Minute)
	store := &countingStore{Ledger: e.led}
	r, ticks := e.runRelay(t, store, recoverer.RelayConfig{Every: 10 * time.Millisecond, CheckEvery: 30 * time.Second, IdleEvery: time.Second})
	ctx := testenv.Context(t)
	testenv.WaitFor(ctx, t, "the relay's first pass", func() bool { return r.Totals().Passes > 0 })
	waitTicks(t, ticks, 2) // the first pass is over
	before, passes, waits := store.reads.Load(), r.Totals().Passes, r.Totals().IdleWaits
	waitTicks(t, ticks, 3)
	if n, p := store.reads.Load()-before, r.Totals().Passes-passes; n != 0 || p != 0 {
		t.Fatalf("an idle relay read scheduled rows %d times in %d passes over 3 ticks, want none", n, p)
	}
	if w := r.Totals().IdleWaits - waits; w < 2 {
		t.Fatalf("%d waits on the bell over 3 idle ticks, want one between each two", w)
	}
	if w := r.Totals().Wakes; w[recoverer.WakeLead] != 1 {
		t.Fatalf("wakes %v, want one lead", w)
	}
}

// A job enqueued beyond the horizon is loaded as it enters it, woken by the
// next load time alone: the backstop is far off and no note is due.
func TestRelayWakesWhenAJobEntersTheHorizon(t *testing.T) {
	for _, tc := range []struct {
		name string
		// before: the job is enqueued before the relay starts, and the
		// enqueuer's next-load hint is lost, so the relay learns the time
		// from SQL alone; otherwise the job comes while it sleeps.
		before bool
	}{{"hint", false}, {"from SQL", true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newDurableEnv(t, time.Second)
			ctx := testenv.Context(t)
			enqueue := func() queue.EnqueueResult {
				res, err := e.c.Enqueue(ctx, durableTopic, queue.NewJob{ID: "far", Delay: 2500 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			var res queue.EnqueueResult
			if tc.before {
				res = enqueue()
				if err := e.rdb.Del(ctx, e.ns+":{relay}:next").Err(); err != nil {
					t.Fatal(err)
				}
			}
			r, ticks := e.runRelay(t, ledgerops.Of(e.led), recoverer.RelayConfig{Every: 20 * time.Millisecond, CheckEvery: 30 * time.Second})
			testenv.WaitFor(ctx, t, "the relay's first pass", func() bool { return r.Totals().Passes > 0 })
			if !tc.before {
				waitTicks(t, ticks, 2)
				res = enqueue()
			}
			if _, ok := e.inRedis(t, durableTopic, "far"); ok {
				t.Fatal("a job beyond the horizon is in Redis")
			}
			testenv.WaitFor(ctx, t, "the relay loads the job", func() bool {
				_, ok := e.inRedis(t, durableTopic, "far")
				return ok
			})
			sqlNow, err := e.led.SQLNow(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if sqlNow >= res.RunAt {
				t.Fatalf("loaded at %d, not ahead of its due time %d", sqlNow, res.RunAt)
			}
			// The pass counts its wake and its loads when it ends, after
			// its pushes.
			testenv.WaitFor(ctx, t, "the loading pass to end", func() bool { return r.Totals().Loaded > 0 })
			tot := r.Totals()
			if tot.Wakes[recoverer.WakeLoad] == 0 || tot.Wakes[recoverer.WakeCheck] != 0 || tot.Wakes[recoverer.WakeNote] != 0 || tot.Loaded != 1 {
				t.Fatalf("wakes %v, loaded %d: want the load wake to load it", tot.Wakes, tot.Loaded)
			}
		})
	}
}

// An enqueuer that commits and dies before its push: its note wakes the
// relay, which pushes the job within relay_every + relay_grace of its due
// time at the defaults, long before the backstop.
func TestRelayNoteFindsACommitNeverPushed(t *testing.T) {
	e := newDurableEnv(t, time.Minute)
	ctx := testenv.Context(t)
	// An idle relay waits on its bell for up to 30 s: only the note's ring
	// can wake it in time for the wait below.
	r, _ := e.runRelay(t, ledgerops.Of(e.led), recoverer.RelayConfig{Every: 200 * time.Millisecond, Grace: 300 * time.Millisecond,
		CheckEvery: 30 * time.Second, IdleEvery: 30 * time.Second})
	testenv.WaitFor(ctx, t, "the relay waiting on its bell", func() bool { return r.Totals().IdleWaits > 0 })
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var staged *dataplane.Staged
	err := e.led.DB().WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		staged, err = e.c.EnqueueTx(ctx, e.led.Tx(tx), durableTopic,
			queue.NewJob{ID: "orphan", Payload: []byte(`1`)}, queue.NewJob{ID: "later", Payload: []byte(`2`), Delay: 20 * time.Second})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// No Push: the process "died".
	testenv.WaitFor(ctx, t, "the relay pushes the orphan", func() bool {
		_, ok := e.inRedis(t, durableTopic, "orphan")
		return ok
	})
	due, ok := e.inRedis(t, durableTopic, "later")
	if !ok || due != staged.Results()[1].RunAt {
		t.Fatalf("the batch's later job: in Redis %v at %d, want at %d (checked with the note)", ok, due, staged.Results()[1].RunAt)
	}
	// The pass counts its wake and its pushes when it ends, after the
	// pushes: seeing the jobs in Redis is not seeing the counts yet.
	testenv.WaitFor(ctx, t, "the pushing pass to end", func() bool { return r.Totals().Relayed >= 2 })
	tot := r.Totals()
	if tot.Wakes[recoverer.WakeNote] == 0 || tot.Wakes[recoverer.WakeCheck] != 0 || tot.Relayed != 2 {
		t.Fatalf("wakes %v, relayed %d: want a note to wake the relay", tot.Wakes, tot.Relayed)
	}
	if n, err := e.rdb.ZCard(ctx, e.ns+":{relay}:inbox").Result(); err != nil || n != 0 {
		t.Fatalf("inbox holds %d notes (%v) after the relay handled them", n, err)
	}
}

// A push after the commit removes its note: the relay is not woken.
func TestDurableEnqueuePushRemovesItsNote(t *testing.T) {
	e := newDurableEnv(t, time.Minute)
	ctx := testenv.Context(t)
	if _, err := e.c.Enqueue(ctx, durableTopic, queue.NewJob{ID: "a", Delay: time.Second}); err != nil {
		t.Fatal(err)
	}
	err := e.led.DB().WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		s, err := e.c.EnqueueTx(ctx, e.led.Tx(tx), durableTopic, queue.NewJob{ID: "b"})
		if err != nil {
			return err
		}
		n, err := e.rdb.ZCard(ctx, e.ns+":{relay}:inbox").Result()
		if err != nil || n != 1 {
			t.Errorf("before the commit the inbox holds %d notes (%v), want 1", n, err)
		}
		defer func() { _ = e.c.Push(ctx, s) }() // after the commit below
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := e.rdb.ZCard(ctx, e.ns+":{relay}:inbox").Result(); err != nil || n != 0 {
		t.Fatalf("inbox holds %d notes (%v) after the pushes", n, err)
	}
}

// Redis loses everything: the relay's tick finds no mark and reloads.
func TestRelayReloadsAfterRedisLostItsData(t *testing.T) {
	e := newDurableEnv(t, time.Minute)
	ctx := testenv.Context(t)
	if _, err := e.c.Enqueue(ctx, durableTopic, queue.NewJob{ID: "j", Delay: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	r, ticks := e.runRelay(t, ledgerops.Of(e.led), recoverer.RelayConfig{Every: 20 * time.Millisecond, CheckEvery: 30 * time.Second})
	testenv.WaitFor(ctx, t, "the relay's first pass", func() bool { return r.Totals().Passes > 0 })
	waitTicks(t, ticks, 2)
	keys, err := e.rdb.Keys(ctx, e.ns+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	keys = slicesDeleteLock(keys, e.ns+":relay:lock")
	if err := e.rdb.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(ctx, t, "the relay reloads the job", func() bool {
		_, ok := e.inRedis(t, durableTopic, "j")
		return ok
	})
	// The pass counts its wake when it ends, after its pushes.
	testenv.WaitFor(ctx, t, "the reload's pass to end", func() bool { return r.Totals().Wakes[recoverer.WakeLost] > 0 })
	if w := r.Totals().Wakes; w[recoverer.WakeLost] != 1 || w[recoverer.WakeLead] != 1 {
		t.Fatalf("wakes %v, want the first pass and one reload for the lost mark", w)
	}
}

// slicesDeleteLock drops the relay's lock from keys: a data loss takes it
// too, but then another process may take the relay over, and this test
// watches this relay.
func slicesDeleteLock(keys []string, lock string) []string {
	out := keys[:0]
	for _, k := range keys {
		if k != lock {
			out = append(out, k)
		}
	}
	return out
}

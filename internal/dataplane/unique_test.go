package dataplane_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
)

// uniqueWindow is the window of the tests' topic "u": long enough that a
// loaded host does every step inside it, short enough to wait out.
const uniqueWindow = 2 * time.Second

// wantFinished checks that r is a duplicate of a finished job that ended
// with outcome, its id taken until about Redis's now + the window.
func wantFinished(t *testing.T, what string, r dataplane.EnqueueResult, outcome string, from, to int64) {
	t.Helper()
	if !r.Duplicate || r.Finished == nil {
		t.Fatalf("%s: %+v, want a duplicate of a finished job", what, r)
	}
	if r.Finished.Outcome != outcome || r.Finished.TakenUntil < from || r.Finished.TakenUntil > to {
		t.Fatalf("%s: finished %+v, want %s taken until %d..%d", what, *r.Finished, outcome, from, to)
	}
}

// A redis topic with a uniqueness window keeps a finished job's id taken
// for the window whatever its outcome, reports how it ended, and lets the
// id go after it; a topic without one frees it at once.
func TestUniqueWindowOnARedisTopic(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			rdb, ns := b.open(t)
			obs := &takenCount{}
			c, err := dataplane.New(rdb, dataplane.Config{Namespace: ns, Observer: obs,
				TopicUniqueFor: map[string]time.Duration{"u": uniqueWindow}})
			if err != nil {
				t.Fatal(err)
			}
			testUniqueWindowOnARedisTopic(t, env{c: c, rdb: rdb, ns: ns}, obs)
		})
	}
}

// takenCount counts the enqueues a window refused (TakenObserver).
type takenCount struct {
	dataplane.NopObserver
	n testenv.Counter
}

func (o *takenCount) Taken(_ string, n int) { o.n.Add(int64(n)) }

func testUniqueWindowOnARedisTopic(t *testing.T, e env, obs *takenCount) {
	ctx := testenv.Context(t)
	w := uniqueWindow.Milliseconds()
	led := ledgerops.Of(sqliteLedger(t))

	// Succeeded.
	before := redisNow(t, e)
	a := claimOne(t, e, "u", "a", time.Minute)
	if n, err := e.c.Ack(ctx, []dataplane.Ref{a.Ref()}); err != nil || n != 1 {
		t.Fatalf("ack = %d, %v", n, err)
	}
	after := redisNow(t, e)
	r, err := e.c.Enqueue(ctx, "u", dataplane.NewJob{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	wantFinished(t, "a again", r, dataplane.FinishedSucceeded, before+w, after+w)
	if info := mustGet(t, e, "u", "a"); info.State != dataplane.StateUnknown {
		t.Fatalf("a duplicate of a finished job wrote it: %s", info.State)
	}
	// A producer configured without the window honours it all the same:
	// the window is kept by whoever acked the job.
	plain, err := dataplane.New(e.rdb, dataplane.Config{Namespace: e.ns})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := plain.Enqueue(ctx, "u", dataplane.NewJob{ID: "a"}); err != nil || r.Finished == nil {
		t.Fatalf("a again from a producer without the window: %+v, %v; want a duplicate of a finished job", r, err)
	}
	if res, err := plain.EnqueueBatch(ctx, "u", []dataplane.NewJob{{ID: "a"}, {ID: "a2", Priority: 1}}); err != nil ||
		res[0].Finished == nil || res[1].Status != dataplane.BatchCreated {
		t.Fatalf("a batch from a producer without the window: %+v, %v", res, err)
	}
	if _, err := e.c.Cancel(ctx, led, "u", "a2"); err != nil {
		t.Fatal(err)
	}

	// Cancelled while waiting.
	mustEnqueue(t, e, "u", dataplane.NewJob{ID: "c", Delay: time.Hour})
	if _, err := e.c.Cancel(ctx, led, "u", "c"); err != nil {
		t.Fatal(err)
	}
	r, err = e.c.Enqueue(ctx, "u", dataplane.NewJob{ID: "c"})
	if err != nil {
		t.Fatal(err)
	}
	wantFinished(t, "c again", r, dataplane.FinishedCancelled, before+w, redisNow(t, e)+w)

	// Cancelled while running: the run ends cancelled.
	rc := claimOne(t, e, "u", "r", time.Minute)
	if n, err := e.c.AckCancelled(ctx, []dataplane.Ref{rc.Ref()}); err != nil || n != 1 {
		t.Fatalf("ack cancelled = %d, %v", n, err)
	}
	r, err = e.c.Enqueue(ctx, "u", dataplane.NewJob{ID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	wantFinished(t, "r again", r, dataplane.FinishedCancelled, before+w, redisNow(t, e)+w)

	// Dead, then purged, and dead, then deleted: taken from the death.
	for _, id := range []string{"p", "d"} {
		j := claimOne(t, e, "u", id, time.Minute)
		if n, _, err := e.c.Bury(ctx, []dataplane.DeadJob{{Job: j, Error: "no"}}); err != nil || n != 1 {
			t.Fatalf("bury %s = %d, %v", id, n, err)
		}
	}
	if r, err := e.c.Enqueue(ctx, "u", dataplane.NewJob{ID: "p"}); err != nil || !r.Duplicate || r.Finished != nil {
		t.Fatalf("a dead job's id: %+v, %v; want a duplicate of a job not finished", r, err)
	}
	if n, err := e.c.PurgeDead(ctx, "u", redisNow(t, e)); err != nil || n != 2 {
		t.Fatalf("purge = %d, %v", n, err)
	}
	res, err := e.c.EnqueueBatch(ctx, "u", []dataplane.NewJob{{ID: "p"}, {ID: "fresh"}, {ID: "d"}, {ID: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 2, 3} {
		if res[i].Status != dataplane.BatchDuplicate || res[i].Finished == nil || res[i].Finished.Outcome != dataplane.FinishedPurged {
			t.Fatalf("batch job %d (%s): %+v, want a duplicate of a purged job", i, res[i].ID, res[i])
		}
	}
	if res[1].Status != dataplane.BatchCreated {
		t.Fatalf("a new id in the batch: %+v", res[1])
	}

	// Another topic, without a window: the id is free at once.
	o := claimOne(t, e, "other", "a", time.Minute)
	if _, err := e.c.Ack(ctx, []dataplane.Ref{o.Ref()}); err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, e, "other", dataplane.NewJob{ID: "a"})

	// After the window the id is a new job's.
	waitRedisPast(t, e, after+w)
	if r := mustEnqueue(t, e, "u", dataplane.NewJob{ID: "a"}); r.Finished != nil {
		t.Fatalf("a after its window: %+v", r)
	}
	if n := obs.n.Load(); n != 6 {
		t.Fatalf("the observer heard of %d enqueues refused by the window, want 6", n)
	}
}

// A partitioned redis topic's batch goes in one call over its partitions
// (enqueue.lua's "+" form): each partition's taken ids are its own.
func TestUniqueWindowOverPartitions(t *testing.T) {
	cfg := dataplane.Config{TopicUniqueFor: map[string]time.Duration{"u": time.Hour}}
	forEachBackend(t, cfg, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		l, err := e.c.SetPartitions(ctx, "u", 4)
		if err != nil {
			t.Fatal(err)
		}
		ids := []string{"a", "b", "c", "d", "e", "f"}
		var jobs []dataplane.NewJob
		for _, id := range ids {
			jobs = append(jobs, dataplane.NewJob{ID: id})
		}
		if res, err := e.c.EnqueueBatch(ctx, "u", jobs); err != nil || len(res) != len(ids) {
			t.Fatalf("enqueue = %v, %v", res, err)
		}
		var refs []dataplane.Ref
		for _, name := range l.Names("u") {
			for _, j := range mustClaim(t, e, name, len(ids), time.Minute).Jobs {
				refs = append(refs, j.Ref())
			}
		}
		if n, err := e.c.Ack(ctx, refs); err != nil || n != len(ids) {
			t.Fatalf("ack = %d, %v; want %d (claimed %v)", n, err, len(ids), refs)
		}
		res, err := e.c.EnqueueBatch(ctx, "u", append(jobs, dataplane.NewJob{ID: "g"}))
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res[:len(ids)] {
			if r.Status != dataplane.BatchDuplicate || r.Finished == nil || r.Finished.Outcome != dataplane.FinishedSucceeded {
				t.Fatalf("job %d (%s) again: %+v", i, r.ID, r)
			}
		}
		if res[len(ids)].Status != dataplane.BatchCreated {
			t.Fatalf("g: %+v", res[len(ids)])
		}
	})
}

// A durable topic's window is read from the job history in SQL: a finished
// job's id stays taken after Redis lost every key of the topic, with the
// outcome its history row gives, and is free after the window.
func TestUniqueWindowOnADurableTopicSurvivesARedisWipe(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	windows := map[string]time.Duration{durableT: uniqueWindow}
	led, err := ledger.New(e.db, ledger.Options{UniqueFor: windows})
	if err != nil {
		t.Fatal(err)
	}
	e.led = led
	if e.c, err = dataplane.New(e.rdb, dataplane.Config{Namespace: e.ns, Store: led, TopicUniqueFor: windows,
		TopicDurability: map[string]dataplane.Durability{durableT: dataplane.DurabilityDurable}}); err != nil {
		t.Fatal(err)
	}
	before, err := led.SQLNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ok", "doomed"} {
		mustEnqueue(t, e.env, durableT, dataplane.NewJob{ID: id, MaxAttempts: 3})
	}
	mustEnqueue(t, e.env, durableT, dataplane.NewJob{ID: "c", Delay: time.Hour})
	if _, err := e.c.Cancel(ctx, ledgerops.Of(led), durableT, "c"); err != nil {
		t.Fatal(err)
	}
	obs := &settled{}
	w := newWorker(t, e, dataplane.WorkerConfig{Observer: obs})
	if err := w.Handle(durableT, dataplane.HandlerFunc(func(_ context.Context, j *dataplane.Job) error {
		if j.ID == "doomed" {
			return dataplane.SkipRetry(errors.New("never"))
		}
		return nil
	}), dataplane.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	stop := startWorker(t, w)
	obs.completed.WaitAtLeast(ctx, t, 1, "ok settled")
	obs.dead.WaitAtLeast(ctx, t, 1, "doomed settled")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	after, err := led.SQLNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := testenv.WipeNamespace(ctx, e.rdb, e.ns); err != nil {
		t.Fatal(err)
	}
	ms := uniqueWindow.Milliseconds()
	res, err := e.c.EnqueueBatch(ctx, durableT, []dataplane.NewJob{{ID: "ok"}, {ID: "doomed"}, {ID: "c"}, {ID: "new"}})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{dataplane.FinishedSucceeded, "dead", dataplane.FinishedCancelled} {
		r := dataplane.EnqueueResult{ID: res[i].ID, Duplicate: res[i].Status == dataplane.BatchDuplicate, Finished: res[i].Finished}
		wantFinished(t, res[i].ID+" after the wipe", r, want, before+ms, after+ms)
	}
	if res[3].Status != dataplane.BatchCreated {
		t.Fatalf("a new id: %+v", res[3])
	}
	// One job alone takes the same path.
	r, err := e.c.Enqueue(ctx, durableT, dataplane.NewJob{ID: "ok"})
	if err != nil {
		t.Fatal(err)
	}
	wantFinished(t, "ok alone", r, dataplane.FinishedSucceeded, before+ms, after+ms)
	if _, ok := e.row(t, "ok"); ok {
		t.Fatal("a duplicate of a finished job wrote a row")
	}
	testenv.WaitFor(ctx, t, "the SQL clock to pass the window", func() bool {
		now, err := led.SQLNow(ctx)
		return err == nil && now > r.Finished.TakenUntil
	})
	if r := mustEnqueue(t, e.env, durableT, dataplane.NewJob{ID: "ok"}); r.Finished != nil {
		t.Fatalf("ok after its window: %+v", r)
	}
}

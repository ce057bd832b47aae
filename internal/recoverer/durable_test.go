package recoverer_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"
	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/internal/tcpproxy"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// durableTopic is the durable topic of these tests.
const durableTopic = "dur"

// newDurableEnv is newREnv with durableTopic durable and the given horizon.
func newDurableEnv(t testing.TB, horizon time.Duration) renv {
	t.Helper()
	e := newREnv(t)
	c, err := dataplane.New(e.rdb, queue.Config{
		Namespace:       e.ns,
		TopicDurability: map[string]queue.Durability{durableTopic: queue.DurabilityDurable},
		Store:           e.led,
		Horizon:         horizon,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	return e
}

// relay returns a relay over the test's world; zero fields of cfg take
// test values (Grace 0: a job is checked as soon as it is due).
func (e renv) relay(t testing.TB, cfg recoverer.RelayConfig) *recoverer.Relay {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = e.log
	}
	if cfg.Grace == 0 {
		cfg.Grace = time.Nanosecond
	}
	r, err := recoverer.NewRelay(e.c, ledgerops.Of(e.led), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// relayOnce runs one relay pass and fails the test on an error.
func (e renv) relayOnce(t testing.TB, r *recoverer.Relay) recoverer.RelayReport {
	t.Helper()
	rep, ran, err := r.RunOnce(testenv.Context(t))
	if err != nil || !ran {
		t.Fatalf("relay pass: ran %v, %v", ran, err)
	}
	return rep
}

// inRedis says whether Redis has the job waiting in due, and at what time.
func (e renv) inRedis(t testing.TB, topic, id string) (int64, bool) {
	t.Helper()
	score, err := e.rdb.ZScore(testenv.Context(t), e.ns+":{"+topic+"}:due", id).Result()
	if err != nil {
		return 0, false
	}
	return int64(score), true
}

// scheduledRows returns the topic's scheduled rows by id.
func (e renv) scheduledRows(t testing.TB, topic string) map[string]ledger.Entry {
	t.Helper()
	rows, err := ledgerops.Of(e.led).Scheduled(testenv.Context(t), topic, ledger.Cursor{RunAt: math.MinInt64, ID: math.MinInt64}, math.MaxInt64, 100000)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]ledger.Entry, len(rows))
	for _, r := range rows {
		out[r.JobID] = r
	}
	return out
}

func TestDurableEnqueueCommitsThenPushesWithinHorizon(t *testing.T) {
	e := newDurableEnv(t, time.Minute)
	ctx := testenv.Context(t)
	var jobs []queue.NewJob
	for i := range 20 {
		d := time.Hour // beyond the horizon
		if i%2 == 0 {
			d = 30 * time.Second
		}
		jobs = append(jobs, queue.NewJob{ID: fmt.Sprintf("j%d", i), Payload: []byte(`{}`), Delay: d})
	}
	res, err := e.c.EnqueueBatch(ctx, durableTopic, jobs)
	if err != nil {
		t.Fatal(err)
	}
	rows := e.scheduledRows(t, durableTopic)
	if len(rows) != 20 {
		t.Fatalf("%d scheduled rows, want 20", len(rows))
	}
	for i, r := range res {
		if r.Status != queue.BatchCreated {
			t.Fatalf("job %d: %s", i, r.Status)
		}
		row := rows[r.ID]
		if row.RunAt != r.RunAt || row.State != queue.StateWaiting || row.Attempt != 0 {
			t.Fatalf("row of %s: %+v, result %+v", r.ID, row, r)
		}
		due, ok := e.inRedis(t, durableTopic, r.ID)
		if within := i%2 == 0; ok != within {
			t.Fatalf("%s in Redis: %v, want %v (within the horizon)", r.ID, ok, within)
		} else if ok && due != r.RunAt {
			t.Fatalf("%s due at %d in Redis, %d in SQL", r.ID, due, r.RunAt)
		}
	}
	// A second enqueue of an id is a duplicate reporting the first's time.
	again, err := e.c.Enqueue(ctx, durableTopic, queue.NewJob{ID: "j0", Delay: time.Second})
	if err != nil || !again.Duplicate || again.RunAt != res[0].RunAt {
		t.Fatalf("duplicate enqueue: %+v, %v (first due %d)", again, err, res[0].RunAt)
	}
}

func TestRelayReloadsTheHorizonAfterRedisLostEverything(t *testing.T) {
	e := newDurableEnv(t, time.Minute)
	ctx := testenv.Context(t)
	var jobs []queue.NewJob
	for i := range 300 {
		d := 10 * time.Minute
		switch {
		case i < 100:
			d = 0 // overdue by the time Redis comes back
		case i < 200:
			d = 30 * time.Second
		}
		jobs = append(jobs, queue.NewJob{ID: fmt.Sprintf("j%03d", i), Payload: []byte(`{}`), Delay: d})
	}
	res, err := e.c.EnqueueBatch(ctx, durableTopic, jobs)
	if err != nil {
		t.Fatal(err)
	}
	r := e.relay(t, recoverer.RelayConfig{})
	first := e.relayOnce(t, r)
	if !first.Reload || first.Pushed() != 0 {
		t.Fatalf("first pass: %+v (the enqueues pushed everything within the horizon)", first)
	}
	e.dropTopic(t, durableTopic)
	if err := e.rdb.Del(ctx, e.ns+":relay").Err(); err != nil {
		t.Fatal(err)
	}
	rep := e.relayOnce(t, r)
	if !rep.Reload || rep.Reloaded[durableTopic] != 200 {
		t.Fatalf("after the loss: %+v, want 200 reloaded", rep)
	}
	for i, res := range res {
		due, ok := e.inRedis(t, durableTopic, res.ID)
		if want := i < 200; ok != want {
			t.Fatalf("%s in Redis: %v, want %v", res.ID, ok, want)
		}
		if ok && due != res.RunAt {
			t.Fatalf("%s due %d, enqueued for %d", res.ID, due, res.RunAt)
		}
	}
	// A pass with its mark back finds nothing to do.
	if rep := e.relayOnce(t, r); rep.Reload || rep.Pushed() != 0 {
		t.Fatalf("pass after the reload: %+v", rep)
	}
}

func TestRelayLoadsJobsAsTheyEnterTheHorizon(t *testing.T) {
	e := newDurableEnv(t, time.Second)
	ctx := testenv.Context(t)
	res, err := e.c.Enqueue(ctx, durableTopic, queue.NewJob{ID: "far", Delay: 2500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.inRedis(t, durableTopic, "far"); ok {
		t.Fatal("a job beyond the horizon is in Redis")
	}
	r := e.relay(t, recoverer.RelayConfig{})
	e.relayOnce(t, r) // first pass: reload of the horizon, which the job is not in yet
	loaded := 0
	testenv.WaitFor(ctx, t, "the loader pushes the job as it enters the horizon", func() bool {
		rep := e.relayOnce(t, r)
		loaded += rep.Loaded[durableTopic]
		return loaded > 0
	})
	due, ok := e.inRedis(t, durableTopic, "far")
	if !ok || due != res.RunAt || loaded != 1 {
		t.Fatalf("loaded %d; in Redis %v due %d, enqueued for %d", loaded, ok, due, res.RunAt)
	}
	sqlNow, err := e.led.SQLNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sqlNow >= res.RunAt {
		t.Fatalf("loaded at %d, not ahead of its due time %d", sqlNow, res.RunAt)
	}
}

func TestRelayPushesAJobWhosePushWasLost(t *testing.T) {
	e := newDurableEnv(t, time.Minute)
	ctx := testenv.Context(t)
	r := e.relay(t, recoverer.RelayConfig{})
	e.relayOnce(t, r)
	// A transactional enqueue whose process "died" after the commit: Push
	// is never called.
	var staged *dataplane.Staged
	err := e.led.DB().WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		staged, err = e.c.EnqueueTx(ctx, e.led.Tx(tx), durableTopic, queue.NewJob{ID: "orphan", Payload: []byte(`1`)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.inRedis(t, durableTopic, "orphan"); ok {
		t.Fatal("pushed before Push")
	}
	relayed := 0
	testenv.WaitFor(ctx, t, "the relay pushes the orphan once it is due", func() bool {
		relayed += e.relayOnce(t, r).Relayed[durableTopic]
		return relayed > 0
	})
	due, ok := e.inRedis(t, durableTopic, "orphan")
	if !ok || due != staged.Results()[0].RunAt {
		t.Fatalf("in Redis %v due %d; enqueued for %d", ok, due, staged.Results()[0].RunAt)
	}
}

func TestRolledBackEnqueueLeavesNothing(t *testing.T) {
	e := newDurableEnv(t, time.Minute)
	ctx := testenv.Context(t)
	boom := errors.New("business rule failed")
	err := ledgerops.Of(e.led).Transaction(ctx, e.c, func(tx *gorm.DB, enq *ledger.TxEnqueuer) error {
		if _, err := enq.Enqueue(ctx, durableTopic, queue.NewJob{ID: "rolled-back"}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("transaction: %v", err)
	}
	if rows := e.scheduledRows(t, durableTopic); len(rows) != 0 {
		t.Fatalf("rows after a rollback: %v", rows)
	}
	r := e.relay(t, recoverer.RelayConfig{})
	if rep := e.relayOnce(t, r); rep.Pushed() != 0 {
		t.Fatalf("relay pushed %d", rep.Pushed())
	}
	if info := e.state(t, durableTopic, "rolled-back"); info.State != queue.StateUnknown {
		t.Fatalf("rolled-back job in Redis: %s", info.State)
	}
	// The same with a commit pushes at once.
	err = ledgerops.Of(e.led).Transaction(ctx, e.c, func(tx *gorm.DB, enq *ledger.TxEnqueuer) error {
		_, err := enq.Enqueue(ctx, durableTopic, queue.NewJob{ID: "committed"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.inRedis(t, durableTopic, "committed"); !ok {
		t.Fatal("committed job not pushed")
	}
}

// TestTombstoneKeepsAFinishedJobFromComingBack plays a relay page against a
// job that completes between the page's read and its push: the ack's
// tombstone, later than the page's seen-at, refuses the push; a seen-at
// after the ack (a later read, which would not find the row) would not.
func TestTombstoneKeepsAFinishedJobFromComingBack(t *testing.T) {
	e := newDurableEnv(t, time.Minute)
	ctx := testenv.Context(t)
	if _, err := e.c.Enqueue(ctx, durableTopic, queue.NewJob{ID: "fast", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	seen := e.redisNow(t)
	page := e.scheduledRows(t, durableTopic)
	row := page["fast"]
	// The job runs and completes: claim, record, row deleted, ack.
	cl, err := e.c.Claim(ctx, durableTopic, 1, time.Minute)
	if err != nil || len(cl.Jobs) != 1 {
		t.Fatalf("claim: %v %v", cl, err)
	}
	if err := ledgerops.Of(e.led).Record(ctx, cl.Jobs, "w:1"); err != nil {
		t.Fatal(err)
	}
	if err := ledgerops.Of(e.led).Complete(ctx, []queue.Ref{cl.Jobs[0].Ref()}); err != nil {
		t.Fatal(err)
	}
	if n, err := e.c.Ack(ctx, []queue.Ref{cl.Jobs[0].Ref()}); err != nil || n != 1 {
		t.Fatalf("ack: %d %v", n, err)
	}
	rr := dataplane.RestoreRow{Topic: durableTopic, ID: "fast", State: queue.StateWaiting, RunAt: row.RunAt, MaxAttempts: row.MaxAttempts}
	out, err := e.c.Restore(ctx, []dataplane.RestoreRow{rr}, dataplane.RestoreOptions{SeenAt: seen})
	if err != nil || out[0] != dataplane.RestoreGone {
		t.Fatalf("restore of a row read before its ack: %v %v, want gone", out, err)
	}
	out, err = e.c.Restore(ctx, []dataplane.RestoreRow{rr}, dataplane.RestoreOptions{SeenAt: e.redisNow(t) + 1, DryRun: true})
	if err != nil || out[0] != dataplane.RestoreCreated {
		t.Fatalf("dry restore with a seen-at after the ack: %v %v, want created", out, err)
	}
}

// TestDeathKeepsADeadJobFromComingBack plays a relay page against a job
// that dies between the page's read and its push (ledger archived and row
// deleted, then buried in Redis): the push is refused by the time of death
// and the job stays dead. CI once saw the relay's first reload revive such a
// job, whose worker then acked it unrun: it left the dead set.
func TestDeathKeepsADeadJobFromComingBack(t *testing.T) {
	e := newDurableEnv(t, time.Minute)
	ctx := testenv.Context(t)
	if _, err := e.c.Enqueue(ctx, durableTopic, queue.NewJob{ID: "bad", Payload: []byte(`{}`), MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	seen := e.redisNow(t)
	row := e.scheduledRows(t, durableTopic)["bad"]
	cl, err := e.c.Claim(ctx, durableTopic, 1, time.Minute)
	if err != nil || len(cl.Jobs) != 1 {
		t.Fatalf("claim: %v %v", cl, err)
	}
	ops := ledgerops.Of(e.led)
	if err := ops.Record(ctx, cl.Jobs, "w:1"); err != nil {
		t.Fatal(err)
	}
	dead := []queue.DeadJob{{Job: cl.Jobs[0], Error: "permanent"}}
	if err := ops.Bury(ctx, dead); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.c.Bury(ctx, dead); err != nil {
		t.Fatal(err)
	}
	if row.EnqueuedAt == 0 {
		t.Fatal("the row has no enqueued_at: the check below would not test the relay's case")
	}
	rr := dataplane.RestoreRow{Topic: durableTopic, ID: "bad", State: queue.StateWaiting, RunAt: row.RunAt, MaxAttempts: row.MaxAttempts, EnqueuedAt: row.EnqueuedAt}
	out, err := e.c.Restore(ctx, []dataplane.RestoreRow{rr}, dataplane.RestoreOptions{SeenAt: seen})
	if err != nil || out[0] != dataplane.RestoreGone {
		t.Fatalf("restore of a row read before its death: %v %v, want gone", out, err)
	}
	if info, err := e.c.Get(ctx, durableTopic, "bad"); err != nil || info.State != queue.StateDead {
		t.Fatalf("after the late push: %+v %v, want dead", info, err)
	}
}

func TestCancelOfAJobBeyondTheHorizon(t *testing.T) {
	e := newDurableEnv(t, time.Minute)
	ctx := testenv.Context(t)
	if _, err := e.c.Enqueue(ctx, durableTopic, queue.NewJob{ID: "later", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	seen := e.redisNow(t)
	page := e.scheduledRows(t, durableTopic) // a relay pass reads the row...
	job, err := e.c.Cancel(ctx, ledgerops.Of(e.led), durableTopic, "later")
	if err != nil || job.ID != "later" {
		t.Fatalf("cancel: %v %v", job, err)
	}
	if rows := e.scheduledRows(t, durableTopic); len(rows) != 0 {
		t.Fatalf("rows after cancel: %v", rows)
	}
	// ...and pushes it after the cancel: refused.
	row := page["later"]
	out, err := e.c.Restore(ctx, []dataplane.RestoreRow{{Topic: durableTopic, ID: "later", State: queue.StateWaiting, RunAt: row.RunAt, MaxAttempts: 1}},
		dataplane.RestoreOptions{SeenAt: seen})
	if err != nil || out[0] != dataplane.RestoreGone {
		t.Fatalf("restore after cancel: %v %v", out, err)
	}
	if _, err := e.c.Cancel(ctx, ledgerops.Of(e.led), durableTopic, "later"); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("second cancel: %v", err)
	}
}

func TestDurableEnqueueWithRedisDown(t *testing.T) {
	srv := testenv.StartRedis(t, testenv.RedisOptions{})
	e := newREnv(t)
	rdb := srv.Client(t)
	c, err := dataplane.New(rdb, queue.Config{
		Namespace:       e.ns,
		TopicDurability: map[string]queue.Durability{durableTopic: queue.DurabilityDurable},
		Store:           e.led,
		PushTimeout:     200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.c, e.rdb = c, rdb
	ctx := testenv.Context(t)
	srv.Stop(t)
	for i := range 50 {
		r, err := c.Enqueue(ctx, durableTopic, queue.NewJob{ID: fmt.Sprintf("j%d", i)})
		if err != nil || r.Duplicate {
			t.Fatalf("enqueue %d with Redis down: %+v %v", i, r, err)
		}
	}
	if rows := e.scheduledRows(t, durableTopic); len(rows) != 50 {
		t.Fatalf("%d rows", len(rows))
	}
	srv.Restart(t) // empty: no persistence
	rep := e.relayOnce(t, e.relay(t, recoverer.RelayConfig{}))
	if rep.Reloaded[durableTopic] != 50 {
		t.Fatalf("relay after Redis came back: %+v", rep)
	}
}

func TestDurableEnqueueWithSQLDownWritesNothing(t *testing.T) {
	e := newREnv(t)
	ctx := testenv.Context(t)
	proxy, led := cutLedger(t)
	c, err := dataplane.New(e.rdb, queue.Config{
		Namespace:       e.ns,
		TopicDurability: map[string]queue.Durability{durableTopic: queue.DurabilityDurable},
		Store:           led,
	})
	if err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	_, err = c.EnqueueBatch(ctx, durableTopic, []queue.NewJob{{ID: "a"}, {ID: "b"}})
	if !errors.Is(err, queue.ErrLedger) {
		t.Fatalf("enqueue with SQL cut: %v, want ErrLedger", err)
	}
	if keys := e.rdb.Keys(ctx, e.ns+":{"+durableTopic+"}:*").Val(); len(keys) != 0 {
		t.Fatalf("Redis keys after a failed durable enqueue: %v", keys)
	}
	// Nothing reached SQL (the proxy refuses every connection), and the
	// enqueuer knows it: no recheck is asked for.
	if n := e.rdb.ZCard(ctx, e.ns+":{relay}:recheck").Val(); n != 0 {
		t.Fatalf("%d rechecks asked for after an enqueue that never reached SQL, want none", n)
	}
}

// lostMidCall is a durable store whose connection is lost while its
// statement is in flight: the rows may or may not have committed.
type lostMidCall struct{ queue.DurableStore }

func (lostMidCall) Schedule(context.Context, string, []queue.NewJob) ([]queue.EnqueueResult, int64, error) {
	return nil, 0, fmt.Errorf("ledger: schedule: %w", gomysql.ErrInvalidConn)
}

// An enqueue whose connection was lost mid-statement cannot know whether
// its rows committed: it asks the relay for a full pass now and another
// queue.Config.UncertainRecheck later.
func TestDurableEnqueueOfUnknownOutcomeAsksForRechecks(t *testing.T) {
	e := newREnv(t)
	ctx := testenv.Context(t)
	c, err := dataplane.New(e.rdb, queue.Config{Namespace: e.ns, Store: lostMidCall{e.led},
		TopicDurability: map[string]queue.Durability{durableTopic: queue.DurabilityDurable}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnqueueBatch(ctx, durableTopic, []queue.NewJob{{ID: "a"}}); !errors.Is(err, queue.ErrLedger) {
		t.Fatalf("enqueue with its connection lost: %v, want ErrLedger", err)
	}
	if n := e.rdb.ZCard(ctx, e.ns+":{relay}:recheck").Val(); n != 2 {
		t.Fatalf("%d rechecks asked for after an enqueue of unknown outcome, want 2", n)
	}
}

// cutLedger returns a migrated ledger on a database of its own reached
// through a TCP proxy the test can cut.
func cutLedger(t testing.TB) (*tcpproxy.Proxy, *ledger.Ledger) {
	t.Helper()
	dsn := testenv.MySQLDSN(t)
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := tcpproxy.New(t, cfg.Addr)
	cfg.Addr = proxy.Addr()
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = time.Second, time.Second, time.Second
	_, led := openLedgerDB(t, cfg.FormatDSN())
	return proxy, led
}

// A transaction that commits after the relay's check window has passed its
// job's due time, and whose process dies before its push: the windows never
// see the row; the full pass (every FullEvery, and when a relay takes over)
// does.
func TestRelayFullPassFindsWhatTheWindowsMissed(t *testing.T) {
	e := newDurableEnv(t, time.Minute)
	ctx := testenv.Context(t)
	r := e.relay(t, recoverer.RelayConfig{FullEvery: time.Hour})
	e.relayOnce(t, r) // the first pass is a full one
	tx := e.led.DB().WithContext(ctx).Begin()
	staged, err := e.c.EnqueueTx(ctx, e.led.Tx(tx), durableTopic, queue.NewJob{ID: "late-commit"})
	if err != nil {
		t.Fatal(err)
	}
	runAt := staged.Results()[0].RunAt
	testenv.WaitFor(ctx, t, "the relay's check window passes the uncommitted job's due time", func() bool {
		e.relayOnce(t, r)
		m, ok, err := e.c.RelayMark(ctx, 0)
		return err == nil && ok && m.Checked > runAt
	})
	if err := tx.Commit().Error; err != nil {
		t.Fatal(err)
	}
	// No Push: the process died. The windows have moved on.
	for range 3 {
		if rep := e.relayOnce(t, r); rep.Pushed() != 0 {
			t.Fatalf("a windowed pass pushed %+v", rep)
		}
	}
	if _, ok := e.inRedis(t, durableTopic, "late-commit"); ok {
		t.Fatal("in Redis before the full pass")
	}
	// Another process takes the relay over: its first pass is a full one.
	rep := e.relayOnce(t, e.relay(t, recoverer.RelayConfig{FullEvery: time.Hour}))
	if !rep.Reload || rep.Lost || rep.Reloaded[durableTopic] != 1 {
		t.Fatalf("full pass: %+v", rep)
	}
	if due, ok := e.inRedis(t, durableTopic, "late-commit"); !ok || due != runAt {
		t.Fatalf("after the full pass: in Redis %v, due %d, want %d", ok, due, runAt)
	}
}

// Redis unreachable for a while, its data intact: jobs enqueued meanwhile
// (committed, their pushes failed) are pushed by the relay's first pass
// after the outage, a full one, well before they fall due; not only when
// the check window reaches them.
func TestRelayAfterAnOutagePushesAheadOfTime(t *testing.T) {
	e := newREnv(t)
	ctx := testenv.Context(t)
	proxy := tcpproxy.New(t, redisAddr(t, e.rdb))
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1, DialTimeout: 500 * time.Millisecond,
		ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	c, err := dataplane.New(rdb, queue.Config{Namespace: e.ns, Store: e.led, PushTimeout: 200 * time.Millisecond,
		TopicDurability: map[string]queue.Durability{durableTopic: queue.DurabilityDurable}})
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	r := e.relay(t, recoverer.RelayConfig{FullEvery: time.Hour})
	e.relayOnce(t, r)
	proxy.Cut()
	res, err := c.Enqueue(ctx, durableTopic, queue.NewJob{ID: "during", Delay: 30 * time.Second})
	if err != nil || res.Duplicate {
		t.Fatalf("enqueue with Redis cut off: %+v %v", res, err)
	}
	if _, ran, err := r.RunOnce(ctx); ran || err == nil {
		t.Fatalf("a relay pass with Redis cut off: ran %v, %v", ran, err)
	}
	proxy.Restore()
	rep := e.relayOnce(t, r)
	if !rep.Reload || rep.Lost || rep.Reloaded[durableTopic] != 1 {
		t.Fatalf("first pass after the outage: %+v", rep)
	}
	if due, ok := e.inRedis(t, durableTopic, "during"); !ok || due != res.RunAt {
		t.Fatalf("after the outage: in Redis %v due %d, want %d", ok, due, res.RunAt)
	}
}

// A process that starts after Redis lost everything (no layout of its own
// to remember) puts a paused partitioned topic's layout back from SQL
// before its pause, so that the pause reaches every partition before the
// reload pushes a job there; the raise survives too, though its count
// holds no job yet.
func TestRelayRestoresLayoutsBeforePauses(t *testing.T) {
	e := newDurableEnv(t, time.Minute)
	ctx := testenv.Context(t)
	if _, err := e.c.SetPartitions(ctx, durableTopic, 4); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Pause(ctx, e.led, durableTopic, "test"); err != nil {
		t.Fatal(err)
	}
	var jobs []queue.NewJob
	for i := range 40 {
		jobs = append(jobs, queue.NewJob{ID: fmt.Sprintf("j%02d", i)})
	}
	if _, err := e.c.EnqueueBatch(ctx, durableTopic, jobs); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.SetPartitions(ctx, durableTopic, 8); err != nil { // a count no job is in yet
		t.Fatal(err)
	}
	// Redis loses everything of the namespace.
	e.wipeNamespace(t)
	fresh, err := dataplane.New(e.rdb, e.c.Config())
	if err != nil {
		t.Fatal(err)
	}
	r, err := recoverer.NewRelay(fresh, ledgerops.Of(e.led), recoverer.RelayConfig{Logger: e.log, Grace: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if rep := e.relayOnce(t, r); !rep.Reload || rep.Reloaded[durableTopic] != len(jobs) {
		t.Fatalf("reload after the loss: %+v, want %d jobs reloaded", rep, len(jobs))
	}
	l, err := fresh.Layout(ctx, durableTopic)
	if err != nil || !slices.Equal(l.Counts, []int{1, 4, 8}) {
		t.Fatalf("layout after the reload: %v (%v), want 1, 4 and 8", l.Counts, err)
	}
	for _, p := range l.Names(durableTopic) {
		if n, err := e.rdb.Exists(ctx, e.ns+":{"+p+"}:paused").Result(); err != nil || n != 1 {
			t.Fatalf("%s not paused after the reload (%v)", p, err)
		}
	}
	if got := e.logged(logrus.WarnLevel, "partition layouts re-applied"); len(got) != 1 {
		t.Errorf("%d warnings of the layouts re-applied, want 1", len(got))
	}
}

// A raise below the count SQL keeps is refused, also while Redis has lost
// the higher one (before the relay writes it back); and a paused topic's
// count that SQL has and Redis lacks is paused as it is listed again.
func TestLayoutsInSQLGuardRaisesAndPauses(t *testing.T) {
	e := newDurableEnv(t, time.Minute)
	ctx := testenv.Context(t)
	if _, err := e.c.SetPartitions(ctx, durableTopic, 8); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Pause(ctx, e.led, durableTopic, "test"); err != nil {
		t.Fatal(err)
	}
	layoutKey := e.ns + ":{" + durableTopic + "}:layout"
	if err := e.rdb.Del(ctx, layoutKey).Err(); err != nil {
		t.Fatal(err)
	}
	fresh, err := dataplane.New(e.rdb, e.c.Config())
	if err != nil {
		t.Fatal(err)
	}
	_, err = fresh.SetPartitions(ctx, durableTopic, 4)
	var ve *dataplane.ValidationError
	if !errors.As(err, &ve) || ve.Field != "partitions" {
		t.Fatalf("a raise to 4 below SQL's 8: %v, want refused", err)
	}
	// The 8 partitions' pause keys gone too, as after a failed raise.
	for p := range 8 {
		if err := e.rdb.Del(ctx, e.ns+":{"+dataplane.PartitionName(durableTopic, 8, p)+"}:paused").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fresh.ApplyLayouts(ctx, map[string][]int{durableTopic: {1, 8}}); err != nil {
		t.Fatal(err)
	}
	for p := range 8 {
		if n, err := e.rdb.Exists(ctx, e.ns+":{"+dataplane.PartitionName(durableTopic, 8, p)+"}:paused").Result(); err != nil || n != 1 {
			t.Fatalf("partition %d listed again without its topic's pause (%v)", p, err)
		}
	}
}

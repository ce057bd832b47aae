package dataplane_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
)

func redisMs(t *testing.T, e env) int64 {
	t.Helper()
	tm, err := e.c.Time(testenv.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixMilli()
}

// mustReschedule reschedules and checks both stores agree with the answer:
// Redis's due entry and envelope, and the row when there is one.
func mustReschedule(t *testing.T, e wenv, topic, id string, to dataplane.When) *dataplane.Rescheduled {
	t.Helper()
	r, err := e.c.Reschedule(testenv.Context(t), ledgerops.Of(e.led), topic, id, to)
	if err != nil {
		t.Fatalf("reschedule %s %s: %v", id, to, err)
	}
	info := mustGet(t, e.env, topic, id)
	if info.State != r.State || info.Score != r.RunAt || info.Job.RunAt != r.RunAt || r.Job.RunAt != r.RunAt {
		t.Fatalf("reschedule %s %s = %+v; Redis has %s at %d (envelope %d)", id, to, r, info.State, info.Score, info.Job.RunAt)
	}
	if row, err := e.led.Row(testenv.Context(t), topic, id); err == nil && row.RunAt != r.RunAt {
		t.Fatalf("reschedule %s %s: the row's run_at is %d, Redis's %d", id, to, row.RunAt, r.RunAt)
	}
	return r
}

func TestReschedule(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	now := redisMs(t, e.env)
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "a", Payload: []byte("pa"), Delay: time.Hour})

	// Absolute, later then earlier.
	at := now + 2*3600_000
	r := mustReschedule(t, e, "t", "a", dataplane.RescheduleAt(at))
	if r.RunAt != at || r.OldRunAt < now+3600_000 || string(r.Job.Payload) != "pa" || r.Job.Attempt != 0 {
		t.Fatalf("at: %+v", r)
	}
	r = mustReschedule(t, e, "t", "a", dataplane.RescheduleAt(now+60_000))
	if r.RunAt != now+60_000 || r.OldRunAt != at {
		t.Fatalf("earlier: %+v", r)
	}
	// A shift, both ways, from the due time it has.
	r = mustReschedule(t, e, "t", "a", dataplane.RescheduleBy(30*time.Minute))
	if r.RunAt != now+60_000+1800_000 {
		t.Fatalf("by +30m: %+v", r)
	}
	r = mustReschedule(t, e, "t", "a", dataplane.RescheduleBy(-10*time.Minute))
	if r.RunAt != now+60_000+1200_000 {
		t.Fatalf("by -10m: %+v", r)
	}
	// From now, on Redis's clock.
	before := redisMs(t, e.env)
	r = mustReschedule(t, e, "t", "a", dataplane.RescheduleIn(5*time.Minute))
	if after := redisMs(t, e.env); r.RunAt < before+300_000 || r.RunAt > after+300_000 {
		t.Fatalf("in 5m: %d, want %d..%d", r.RunAt, before+300_000, after+300_000)
	}
	// A time in the past, or a shift before now, means now: it is claimed.
	mustReschedule(t, e, "t", "a", dataplane.RescheduleBy(-time.Hour))
	if c := mustClaim(t, e.env, "t", 10, time.Minute); len(c.Jobs) != 1 || c.Jobs[0].ID != "a" {
		t.Fatalf("claim after moving to now: %v", ids(c.Jobs))
	}

	// Refusals: in flight, dead, unknown; the job is left as it was.
	if _, err := e.c.Reschedule(ctx, ledgerops.Of(e.led), "t", "a", dataplane.RescheduleIn(time.Hour)); !errors.Is(err, dataplane.ErrInFlight) {
		t.Fatalf("in flight: %v", err)
	}
	info := mustGet(t, e.env, "t", "a")
	if _, _, err := e.c.Bury(ctx, []dataplane.DeadJob{{Job: info.Job, Error: "x"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Reschedule(ctx, ledgerops.Of(e.led), "t", "a", dataplane.RescheduleIn(time.Hour)); !errors.Is(err, dataplane.ErrDead) {
		t.Fatalf("dead: %v", err)
	}
	if _, err := e.c.Reschedule(ctx, ledgerops.Of(e.led), "t", "nope", dataplane.RescheduleIn(time.Hour)); !errors.Is(err, dataplane.ErrNotFound) {
		t.Fatalf("unknown: %v", err)
	}
}

// Bad times are refused naming the field, and nothing changes.
func TestRescheduleBadInput(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	r := mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "a", Delay: time.Hour})
	for _, c := range []struct {
		to    dataplane.When
		field string
	}{
		{dataplane.RescheduleAt(5), "run_at"},
		{dataplane.RescheduleAt(time.Now().Add(400 * 24 * time.Hour).UnixMilli()), "run_at"},
		{dataplane.RescheduleIn(-time.Second), "delay"},
		{dataplane.RescheduleIn(400 * 24 * time.Hour), "delay"},
		{dataplane.RescheduleBy(400 * 24 * time.Hour), "shift"},
		{dataplane.RescheduleBy(365*24*time.Hour - time.Minute), "shift"}, // within the range, but lands past now + MaxDelay
		{dataplane.When{}, "run_at"},
	} {
		_, err := e.c.Reschedule(ctx, ledgerops.Of(e.led), "t", "a", c.to)
		var ve *dataplane.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field || !errors.Is(err, dataplane.ErrInvalidRunAt) {
			t.Errorf("%s: %v, want a validation error of %s", c.to, err, c.field)
		}
	}
	if _, err := e.c.Reschedule(ctx, ledgerops.Of(e.led), "t", "a b", dataplane.RescheduleIn(0)); !errors.Is(err, dataplane.ErrInvalidID) {
		t.Errorf("bad id: %v", err)
	}
	if info := mustGet(t, e.env, "t", "a"); info.Score != r.RunAt {
		t.Errorf("due time moved to %d by bad input, was %d", info.Score, r.RunAt)
	}
}

// A job waiting for a retry has a row; its run_at and lease_until move with
// Redis, so neither the recoverer (stale scan) nor a Redis loss brings the
// old time back.
func TestRescheduleRetryMovesTheRow(t *testing.T) {
	e := newWEnv(t)
	now := redisMs(t, e.env)
	j := claimRecord(t, e, "t", "r")
	failRetry(t, e, j, now+60_000)
	r := mustReschedule(t, e, "t", "r", dataplane.RescheduleBy(time.Hour))
	if r.RunAt != now+60_000+3600_000 || r.Job.Attempt != 1 || r.Job.LastError != "x" {
		t.Fatalf("%+v", r)
	}
	row, err := e.led.Row(testenv.Context(t), "t", "r")
	if err != nil || row.State != dataplane.StateRetrying || row.LeaseUntil != r.RunAt+60_000 {
		t.Fatalf("row %+v, %v; want retrying, leased until %d", row, err, r.RunAt+60_000)
	}
	// Redis lost it: rescheduled from the row, and put back at the new time.
	if err := e.rdb.Del(testenv.Context(t), e.ns+":{t}:due", e.ns+":{t}:job").Err(); err != nil {
		t.Fatal(err)
	}
	r = mustReschedule(t, e, "t", "r", dataplane.RescheduleBy(-30*time.Minute))
	if r.RunAt != now+60_000+1800_000 || r.OldRunAt != now+60_000+3600_000 {
		t.Fatalf("from the row: %+v", r)
	}
}

// A worker asleep until a far head wakes at once for a job rescheduled to
// now: the handler runs (a signal, not a sleep), although the worker's idle
// safety net is an hour.
func TestRescheduleEarlierWakesTheWorker(t *testing.T) {
	e := newWEnv(t)
	ran := make(chan string, 4)
	w := newWorker(t, e, dataplane.WorkerConfig{MaxIdle: time.Hour})
	if err := w.Handle("t", dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		ran <- j.ID
		return nil
	}), dataplane.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "head", Delay: time.Hour})
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "far", Delay: 2 * time.Hour})
	startWorker(t, w)
	waitSubscribed(t, e.rdb, e.c.WakeChannel("t"))
	// The fetcher has claimed once and sleeps until the head, an hour off.
	if _, err := e.c.Reschedule(testenv.Context(t), ledgerops.Of(e.led), "t", "far", dataplane.RescheduleAt(longAgo)); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-ran:
		if id != "far" {
			t.Fatalf("%s ran, want far", id)
		}
	case <-testenv.Context(t).Done():
		t.Fatal("the job rescheduled to now never ran: the worker was not woken")
	}
}

// Only an earlier head publishes: a job moved later wakes nobody.
func TestRescheduleWakeMessages(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	sub := e.rdb.Subscribe(ctx, e.c.WakeChannel("t"))
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "a", Delay: time.Hour})
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "b", Delay: 2 * time.Hour})
	<-sub.Channel()                                                   // a's enqueue
	mustReschedule(t, e, "t", "b", dataplane.RescheduleBy(time.Hour)) // later: no message
	r := mustReschedule(t, e, "t", "b", dataplane.RescheduleIn(time.Minute))
	select {
	case m := <-sub.Channel():
		if m.Payload != strconv.FormatInt(r.RunAt, 10) {
			t.Fatalf("wake %q, want %d", m.Payload, r.RunAt)
		}
	case <-ctx.Done():
		t.Fatal("no wake for the new head")
	}
	select {
	case m := <-sub.Channel():
		t.Fatalf("a second wake %q: the later move published", m.Payload)
	default:
	}
}

// newHorizonWEnv is a durable-topic env whose client has a 1 minute
// horizon, so a job due later waits in SQL only.
func newHorizonWEnv(t *testing.T) wenv {
	t.Helper()
	e := newDurableWEnv(t)
	c, err := dataplane.New(e.rdb, dataplane.Config{Namespace: e.ns, Store: e.led, Horizon: time.Minute,
		TopicDurability: map[string]dataplane.Durability{durableT: dataplane.DurabilityDurable}})
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	return e
}

// Durable topic: both stores move; a job beyond the horizon (SQL only) is
// moved in its row and created in Redis at its new time, even when that is
// still beyond the horizon, so a pass that read the old row cannot put it
// back early.
func TestRescheduleDurable(t *testing.T) {
	e := newHorizonWEnv(t)
	ctx := testenv.Context(t)
	now := redisMs(t, e.env)
	mustEnqueue(t, e.env, durableT, dataplane.NewJob{ID: "near", Delay: 30 * time.Second})
	mustEnqueue(t, e.env, durableT, dataplane.NewJob{ID: "far", Delay: 2 * time.Hour})
	if info := mustGet(t, e.env, durableT, "far"); info.State != dataplane.StateUnknown {
		t.Fatalf("far is %s in Redis, want beyond the horizon", info.State)
	}
	mustReschedule(t, e, durableT, "near", dataplane.RescheduleAt(now+90_000))
	if row, _ := e.row(t, "near"); row.State != dataplane.StateWaiting || row.LeaseUntil != ledger.NeverStale {
		t.Fatalf("near's row: %+v", row)
	}
	oldRow, _ := e.row(t, "far")
	r := mustReschedule(t, e, durableT, "far", dataplane.RescheduleBy(time.Hour)) // still beyond the horizon
	if r.OldRunAt != oldRow.RunAt || r.RunAt != oldRow.RunAt+3600_000 {
		t.Fatalf("far: %+v, row was at %d", r, oldRow.RunAt)
	}
	// A relay pass that read the old row pushes it now: Redis has the job,
	// so nothing is written and the job stays at its new time.
	out, err := e.c.Restore(ctx, []dataplane.RestoreRow{{Topic: durableT, ID: "far", State: dataplane.StateWaiting, RunAt: oldRow.RunAt,
		MaxAttempts: oldRow.MaxAttempts, Payload: oldRow.Payload}}, dataplane.RestoreOptions{SeenAt: now})
	if err != nil || out[0] != dataplane.RestoreTracked {
		t.Fatalf("stale push: %v, %v; want tracked", out, err)
	}
	if info := mustGet(t, e.env, durableT, "far"); info.Score != r.RunAt {
		t.Fatalf("far at %d after the stale push, want %d", info.Score, r.RunAt)
	}
	// Claimed: refused, the row stays the claim's.
	mustReschedule(t, e, durableT, "near", dataplane.RescheduleAt(longAgo))
	cl := mustClaim(t, e.env, durableT, 1, time.Minute)
	if err := ledgerops.Of(e.led).Record(ctx, cl.Jobs, "w:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Reschedule(ctx, ledgerops.Of(e.led), durableT, "near", dataplane.RescheduleIn(time.Hour)); !errors.Is(err, dataplane.ErrInFlight) {
		t.Fatalf("claimed: %v", err)
	}
	if row, _ := e.row(t, "near"); row.State != dataplane.StateInFlight {
		t.Fatalf("near's row after the refusal: %+v", row)
	}
	// Held by a worker while Redis lost it: the row says in flight.
	if err := e.rdb.Del(ctx, e.ns+":{"+durableT+"}:lease", e.ns+":{"+durableT+"}:job").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Reschedule(ctx, ledgerops.Of(e.led), durableT, "near", dataplane.RescheduleIn(time.Hour)); !errors.Is(err, dataplane.ErrInFlight) {
		t.Fatalf("held, lost by Redis: %v", err)
	}
}

// The ledger failing: ErrLedger, and Redis untouched.
func TestRescheduleLedgerFails(t *testing.T) {
	e := newDurableWEnv(t)
	ctx := testenv.Context(t)
	r := mustEnqueue(t, e.env, durableT, dataplane.NewJob{ID: "a", Delay: time.Hour})
	sqlDB, err := e.db.DB()
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlDB.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Reschedule(ctx, ledgerops.Of(e.led), durableT, "a", dataplane.RescheduleBy(time.Hour)); !errors.Is(err, dataplane.ErrLedger) {
		t.Fatalf("ledger down: %v, want ErrLedger", err)
	}
	if info := mustGet(t, e.env, durableT, "a"); info.Score != r.RunAt {
		t.Fatalf("Redis moved to %d with the ledger down", info.Score)
	}
}

// longAgo is the earliest due time a reschedule takes (2001): "now".
const longAgo = 978307200000

// A durable job whose last claim's lease ran out is back in due (the next
// claim put it there) while its row still says in_progress: a worker is
// about to take it over, so the reschedule is refused, at once, and moves
// nothing.
func TestRescheduleRefusesAJobBeingTakenOver(t *testing.T) {
	e := newDurableWEnv(t)
	ctx := testenv.Context(t)
	mustEnqueue(t, e.env, durableT, dataplane.NewJob{ID: "a"})
	cl := mustClaim(t, e.env, durableT, 1, time.Minute)
	if err := ledgerops.Of(e.led).Record(ctx, cl.Jobs, "w:1"); err != nil {
		t.Fatal(err)
	}
	// What claim.lua does with an expired lease: back to due at its deadline.
	p := e.ns + ":{" + durableT + "}:"
	if err := e.rdb.ZRem(ctx, p+"lease", "a").Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.ZAdd(ctx, p+"due", redisZ(float64(cl.Jobs[0].LeaseUntil), "a")).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Reschedule(ctx, ledgerops.Of(e.led), durableT, "a", dataplane.RescheduleIn(time.Hour)); !errors.Is(err, dataplane.ErrInFlight) {
		t.Fatalf("%v, want ErrInFlight", err)
	}
	if info := mustGet(t, e.env, durableT, "a"); info.Score != cl.Jobs[0].LeaseUntil {
		t.Fatalf("moved to %d", info.Score)
	}
}

// Concurrent shifts of one durable job each apply once or fail with
// ErrContended, never silently: the job ends moved by the sum of the
// accepted shifts, in both stores, whether Redis has it (within the
// horizon) or only its row does (beyond it). A probe found 30 parallel
// +1 s shifts of one job move it 24 s, all answered 200.
func TestRescheduleConcurrentShiftsAllApply(t *testing.T) {
	e := newHorizonWEnv(t)
	ctx := testenv.Context(t)
	mustEnqueue(t, e.env, durableT, dataplane.NewJob{ID: "near", Delay: 30 * time.Second})
	mustEnqueue(t, e.env, durableT, dataplane.NewJob{ID: "far", Delay: 2 * time.Hour})
	for _, id := range []string{"near", "far"} {
		before, err := e.led.Row(ctx, durableT, id)
		if err != nil {
			t.Fatal(err)
		}
		const callers = 12
		errs := make(chan error, callers)
		for range callers {
			go func() {
				_, err := e.c.Reschedule(ctx, ledgerops.Of(e.led), durableT, id, dataplane.RescheduleBy(time.Second))
				errs <- err
			}()
		}
		ok := 0
		for range callers {
			switch err := <-errs; {
			case err == nil:
				ok++
			case !errors.Is(err, dataplane.ErrContended):
				t.Fatalf("%s: %v", id, err)
			}
		}
		row, err := e.led.Row(ctx, durableT, id)
		if err != nil {
			t.Fatal(err)
		}
		if want := before.RunAt + int64(ok)*1000; row.RunAt != want || ok == 0 {
			t.Fatalf("%s: %d of %d shifts of +1 s accepted; the row moved %d ms, want %d", id, ok, callers, row.RunAt-before.RunAt, want-before.RunAt)
		}
		// near is within the horizon: Redis must hold it; far may be in
		// Redis (a reschedule creates it there) or not yet.
		if info := mustGet(t, e.env, durableT, id); (id == "near" || info.State != dataplane.StateUnknown) && info.Score != row.RunAt {
			t.Fatalf("%s: Redis has it %s at %d, the row at %d", id, info.State, info.Score, row.RunAt)
		}
		t.Logf("%s: %d of %d concurrent shifts accepted, the rest ErrContended", id, ok, callers)
	}
}

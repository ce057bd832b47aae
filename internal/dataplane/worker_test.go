package dataplane_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
)

// 10,000 jobs, 50 handlers: each job handled exactly once, each with its
// ledger row present while its handler runs, and afterwards neither the
// ledger nor Redis holds any trace of them.
func TestWorkerHandlesEveryJobOnceWithLedgerRow(t *testing.T) {
	e := newWEnv(t)
	const total = 10_000
	enqueueMany(t, e.c, "orders", "o", total, nil)

	var mu sync.Mutex
	seen := make(map[string]int, total)
	var missingRow, handled atomic.Int64
	obs := &settled{}
	w := newWorker(t, e, dataplane.WorkerConfig{Observer: obs, Topic: dataplane.TopicConfig{Concurrency: 50}})
	err := w.Handle("orders", dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		row, err := e.led.Row(ctx, j.Topic, j.ID)
		if err != nil || row.Attempt != j.Attempt || row.Worker != w.ID() || row.State != dataplane.StateInFlight {
			missingRow.Add(1)
		}
		mu.Lock()
		seen[j.ID]++
		mu.Unlock()
		handled.Add(1)
		return nil
	}), dataplane.TopicConfig{})
	if err != nil {
		t.Fatal(err)
	}
	stop := startWorker(t, w)
	obs.completed.WaitAtLeast(testenv.ContextTimeout(t, 3*time.Minute), t, total, "every job completed")
	if n := handled.Load(); n != total {
		t.Fatalf("%d handler runs, want %d", n, total)
	}
	if n, err := e.led.Count(testenv.Context(t)); err != nil || n != 0 {
		t.Fatalf("ledger holds %d rows after every job completed (%v)", n, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := missingRow.Load(); n != 0 {
		t.Fatalf("%d handlers ran without their ledger row", n)
	}
	if len(seen) != total {
		t.Fatalf("%d distinct jobs handled, want %d", len(seen), total)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("job %s handled %d times", id, n)
		}
	}
	for _, k := range keysOf(t, e.env) {
		if k != e.ns+":topics" {
			if n, _ := e.rdb.Exists(testenv.Context(t), k).Result(); n > 0 {
				t.Fatalf("Redis still holds %s", k)
			}
		}
	}
}

func TestWorkerRetriesWithConfiguredBackoffThenBuries(t *testing.T) {
	e := newWEnv(t)
	var deadMu sync.Mutex
	var dead []string
	var died testenv.Event
	w := newWorker(t, e, dataplane.WorkerConfig{
		// OnDead runs once the death is settled in both stores.
		OnDead: func(ctx context.Context, j *dataplane.Job, err error) {
			deadMu.Lock()
			dead = append(dead, fmt.Sprintf("%s: %v", j.ID, err))
			deadMu.Unlock()
			died.Notify()
		},
	})
	backoff := dataplane.Backoff{Base: 40 * time.Millisecond, Cap: 100 * time.Millisecond, Jitter: -1}
	var mu sync.Mutex
	runAts := map[int]int64{} // attempt -> RunAt the handler saw
	err := w.Handle("t", dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		mu.Lock()
		runAts[j.Attempt] = j.RunAt
		mu.Unlock()
		if row, err := e.led.Row(ctx, j.Topic, j.ID); err != nil || row.Attempt != j.Attempt {
			return fmt.Errorf("ledger row missing: %v", err)
		}
		return fmt.Errorf("failure %d", j.Attempt)
	}), dataplane.TopicConfig{Backoff: backoff})
	if err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "always-fails", Payload: []byte("p"), MaxAttempts: 4})
	startWorker(t, w)
	died.Wait(testenv.Context(t), t, "the job to die", func() bool {
		deadMu.Lock()
		defer deadMu.Unlock()
		return len(dead) == 1
	})
	// Attempt k+1 was scheduled at least backoff(k) after attempt k was due:
	// 40, 80, then capped at 100 ms.
	want := []int64{40, 80, 100}
	for k := 1; k <= 3; k++ {
		if gap := runAts[k+1] - runAts[k]; gap < want[k-1] {
			t.Errorf("attempt %d ran %d ms after attempt %d was due, want at least %d", k+1, gap, k, want[k-1])
		}
	}
	if len(runAts) != 4 {
		t.Fatalf("ran attempts %v, want 1-4", runAts)
	}
	info := mustGet(t, e.env, "t", "always-fails")
	if info.State != dataplane.StateDead || info.Job.LastError != "failure 4" {
		t.Fatalf("Redis: %s, last error %q", info.State, info.Job.LastError)
	}
	letters, err := e.led.DeadLetters(testenv.Context(t), "t", 0, time.Now().Add(time.Hour).UnixMilli(), 10)
	if err != nil || len(letters) != 1 || letters[0].LastError != "failure 4" || string(letters[0].Payload) != "p" || letters[0].Attempts != 4 {
		t.Fatalf("archive: %+v, %v", letters, err)
	}
	if n, _ := e.led.Count(testenv.Context(t)); n != 0 {
		t.Fatalf("ledger holds %d rows after the job died", n)
	}
	if dead[0] != "always-fails: failure 4" {
		t.Fatalf("OnDead got %q", dead[0])
	}
}

func TestWorkerSkipRetryRetryAfterAndPanic(t *testing.T) {
	e := newWEnv(t)
	var deadCount testenv.Counter
	obs := &settled{}
	w := newWorker(t, e, dataplane.WorkerConfig{
		Observer: obs,
		OnDead: func(ctx context.Context, j *dataplane.Job, err error) {
			if j.ID == "permanent" && errors.Is(err, dataplane.ErrSkipRetry) {
				deadCount.Add(1)
			}
		},
	})
	var mu sync.Mutex
	runs := map[string][]*dataplane.Job{}
	err := w.Handle("t", dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		mu.Lock()
		runs[j.ID] = append(runs[j.ID], j)
		mu.Unlock()
		switch {
		case j.ID == "permanent":
			return dataplane.SkipRetry(errors.New("order does not exist"))
		case j.ID == "rate-limited" && j.Attempt == 1:
			return dataplane.RetryAfter(errors.New("429"), 300*time.Millisecond)
		case j.ID == "panics" && j.Attempt == 1:
			panic("nil map")
		}
		return nil
	}), dataplane.TopicConfig{Backoff: dataplane.Backoff{Base: 10 * time.Millisecond, Jitter: -1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"permanent", "rate-limited", "panics"} {
		mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: id, MaxAttempts: 5})
	}
	startWorker(t, w)
	// rate-limited and panics complete on their second attempt; permanent
	// dies (OnDead runs once the death is settled in both stores).
	obs.completed.WaitAtLeast(testenv.Context(t), t, 2, "two jobs completed")
	deadCount.WaitAtLeast(testenv.Context(t), t, 1, "the permanent failure to die")
	if st, err := e.c.Stats(testenv.Context(t), "t"); err != nil || st.Due != 0 || st.InFlight != 0 || deadCount.Load() != 1 {
		t.Fatalf("settled: stats %+v (%v), %d deaths by SkipRetry", st, err, deadCount.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	if n := len(runs["permanent"]); n != 1 {
		t.Fatalf("permanent failure ran %d times, want 1", n)
	}
	if info := mustGet(t, e.env, "t", "permanent"); info.State != dataplane.StateDead || info.Job.Attempt != 1 {
		t.Fatalf("permanent: %+v", info)
	}
	rl := runs["rate-limited"]
	if len(rl) != 2 || rl[1].RunAt-rl[0].RunAt < 300 || rl[1].LastError != "429" {
		t.Fatalf("rate-limited runs %+v; want a second run at least 300 ms later", rl)
	}
	p := runs["panics"]
	if len(p) != 2 || p[1].Attempt != 2 || p[1].LastError != "handler panic: nil map" {
		t.Fatalf("panicking job runs %+v", p)
	}
	if n, _ := e.led.Count(testenv.Context(t)); n != 0 {
		t.Fatalf("ledger holds %d rows", n)
	}
}

// A topic's MaxAttempts below a job's is the job's from its claim on: the
// handler (an HTTP target's Delayq-Max-Attempts header) and the ledger row
// see it, and the job dies after that many attempts.
func TestTopicMaxAttemptsIsTheJobsFromItsClaim(t *testing.T) {
	e := newWEnv(t)
	var died testenv.Event
	w := newWorker(t, e, dataplane.WorkerConfig{
		OnDead: func(context.Context, *dataplane.Job, error) { died.Notify() },
	})
	var mu sync.Mutex
	var seen []string // attempt/max as the handler saw it, and the row's max
	err := w.Handle("t", dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		row, err := e.led.Row(ctx, j.Topic, j.ID)
		if err != nil {
			return err
		}
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%d/%d row %d", j.Attempt, j.MaxAttempts, row.MaxAttempts))
		mu.Unlock()
		return errors.New("fails")
	}), dataplane.TopicConfig{MaxAttempts: 3, Backoff: dataplane.Backoff{Base: time.Millisecond, Cap: time.Millisecond, Jitter: -1}})
	if err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "j"}) // the queue's default attempts (25)
	startWorker(t, w)
	died.Wait(testenv.Context(t), t, "the job to die", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 3
	})
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(seen, ", "); got != "1/3 row 3, 2/3 row 3, 3/3 row 3" {
		t.Errorf("the handler saw %s", got)
	}
}

// A real worker's settlements leave the history: a success after a retry
// (its first claim's time kept, the worker named), and a death; the ledger
// rows are gone.
func TestWorkerLeavesHistory(t *testing.T) {
	e := newWEnv(t)
	var finished testenv.Counter
	w := newWorker(t, e, dataplane.WorkerConfig{ID: "hist-worker",
		OnDead: func(context.Context, *dataplane.Job, error) { finished.Add(1) }})
	err := w.Handle("t", dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		switch {
		case j.ID == "flaky" && j.Attempt == 1:
			return errors.New("smtp 451")
		case j.ID == "poison":
			return dataplane.SkipRetry(errors.New("no such order"))
		}
		finished.Add(1)
		return nil
	}), dataplane.TopicConfig{Backoff: dataplane.Backoff{Base: 50 * time.Millisecond, Jitter: -1}})
	if err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "flaky"})
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "poison"})
	startWorker(t, w)
	ctx := testenv.Context(t)
	finished.WaitAtLeast(ctx, t, 2, "both jobs to finish")
	want := map[string]string{"flaky": "succeeded 2", "poison": "dead 1"}
	testenv.WaitFor(ctx, t, "their history rows", func() bool {
		for id := range want {
			rows, _, err := e.led.History(ctx, ledger.HistoryFilter{Topic: "t", ID: id, Limit: 5})
			if err != nil || len(rows) != 1 {
				return false
			}
		}
		return true
	})
	for id, w := range want {
		rows, _, _ := e.led.History(ctx, ledger.HistoryFilter{Topic: "t", ID: id, Limit: 5})
		h := rows[0]
		if got := fmt.Sprintf("%s %d", h.Outcome, h.Attempts); got != w || !strings.Contains(h.Worker, "hist-worker") ||
			h.FirstClaimedAt == 0 || h.ClaimedAt < h.FirstClaimedAt || h.FinishedAt < h.ClaimedAt {
			t.Errorf("%s: %+v, want %s by hist-worker", id, h, w)
		}
		if id == "flaky" && (h.ClaimedAt-h.FirstClaimedAt < 40 || h.LastError != "smtp 451") {
			t.Errorf("flaky: first claimed %d, last %d, last error %q: want the retry's claim 50 ms later, and its error", h.FirstClaimedAt, h.ClaimedAt, h.LastError)
		}
	}
	if n, err := e.led.Count(ctx); err != nil || n != 0 {
		t.Errorf("%d ledger rows left (%v)", n, err)
	}
}

// A job whose death reached the ledger but not Redis (its worker lost
// Redis right after the ledger's burial) comes round again when its lease
// runs out: the next worker's record finds its history dead, does not run
// it, and buries it again in Redis, so the dead set shows it (before, it
// was forgotten as if it had succeeded).
func TestWorkerBuriesAgainAJobWhoseHistorySaysDead(t *testing.T) {
	e := newWEnv(t)
	ctx := testenv.Context(t)
	mustEnqueue(t, e.env, "t", dataplane.NewJob{ID: "x", MaxAttempts: 5})
	cl := mustClaim(t, e.env, "t", 1, 50*time.Millisecond)
	if len(cl.Jobs) != 1 {
		t.Fatalf("claimed %v", ids(cl.Jobs))
	}
	led := ledgerops.Of(e.led)
	if err := led.Record(ctx, cl.Jobs, "gone-worker:1"); err != nil {
		t.Fatal(err)
	}
	if err := led.Bury(ctx, []dataplane.DeadJob{{Job: cl.Jobs[0], Error: "boom"}}); err != nil {
		t.Fatal(err)
	}
	var ran testenv.Counter
	w := newWorker(t, e, dataplane.WorkerConfig{})
	if err := w.Handle("t", dataplane.HandlerFunc(func(context.Context, *dataplane.Job) error {
		ran.Add(1)
		return nil
	}), dataplane.TopicConfig{Lease: time.Second}); err != nil {
		t.Fatal(err)
	}
	stop := startWorker(t, w)
	testenv.WaitFor(ctx, t, "x settled by the worker", func() bool {
		st := mustGet(t, e.env, "t", "x").State
		return st == dataplane.StateDead || st == dataplane.StateUnknown // buried again, or forgotten
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	info := mustGet(t, e.env, "t", "x")
	if info.State != dataplane.StateDead || ran.Load() != 0 || !strings.Contains(info.Job.LastError, "died already") {
		t.Fatalf("x is %s (ran %d times), want dead again, unrun, with the reason", info.State, ran.Load())
	}
}

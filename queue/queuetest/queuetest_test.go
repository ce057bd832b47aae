package queuetest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/queue/queuetest"
)

func newRecorder(t *testing.T, cfg queue.Config) *queuetest.Recorder {
	t.Helper()
	rec, err := queuetest.NewRecorder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.Close)
	return rec
}

// NewJob's job is a first attempt with the queue's defaults.
func TestNewJobHasTheQueuesDefaults(t *testing.T) {

	j := queuetest.NewJob("emails", "welcome:1", []byte("x"))
	def, err := queue.Config{}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if want := def.DefaultMaxAttempts; j.MaxAttempts != want {
		t.Errorf("MaxAttempts %d, want the queue's default %d", j.MaxAttempts, want)
	}
	if j.Attempt != 1 || j.Topic != "emails" || j.ID != "welcome:1" || string(j.Payload) != "x" {
		t.Errorf("job %+v", j)
	}
	if lease := j.LeaseUntil - j.RunAt; lease != (30 * time.Second).Milliseconds() {
		t.Errorf("lease %d ms, want 30 s", lease)
	}
	if j.Ref() != (queue.Ref{Topic: "emails", ID: "welcome:1", Attempt: 1}) {
		t.Errorf("ref %+v", j.Ref())
	}
}

// Run hands the handler the job, returns its error, and turns a panic
// into a *queue.PanicError as the worker does.
func TestRun(t *testing.T) {
	ctx := context.Background()
	j := queuetest.NewJob("t", "a", nil)
	var got *queue.Job
	err := queuetest.Run(ctx, queue.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
		got = job
		return queue.SkipRetry(errors.New("bad payload"))
	}), j)
	if got != j || !errors.Is(err, queue.ErrSkipRetry) {
		t.Fatalf("handler got %v, Run returned %v", got, err)
	}

	err = queuetest.Run(ctx, queue.HandlerFunc(func(context.Context, *queue.Job) error { panic("boom") }), j)
	var pe *queue.PanicError
	if !errors.As(err, &pe) || pe.Value != "boom" || len(pe.Stack) == 0 {
		t.Fatalf("panic became %v, want a *queue.PanicError", err)
	}
}

// The handler's context ends at the job's lease deadline, with the cause
// the worker gives it.
func TestRunEndsContextAtLease(t *testing.T) {
	j := queuetest.NewJob("t", "a", nil)
	j.LeaseUntil = time.Now().Add(-time.Second).UnixMilli() // already over
	err := queuetest.Run(context.Background(), queue.HandlerFunc(func(ctx context.Context, _ *queue.Job) error {
		<-ctx.Done()
		return context.Cause(ctx)
	}), j)
	if !errors.Is(err, queue.ErrLeaseExpired) {
		t.Fatalf("context ended with %v, want ErrLeaseExpired", err)
	}

	j.LeaseUntil = 0 // no lease: no deadline
	err = queuetest.Run(context.Background(), queue.HandlerFunc(func(ctx context.Context, _ *queue.Job) error {
		if _, ok := ctx.Deadline(); ok {
			return errors.New("deadline set")
		}
		return nil
	}), j)
	if err != nil {
		t.Fatal(err)
	}
}

// The Recorder records created jobs only, with the due time the queue
// gives them, and answers duplicates and bad input as the client does.
func TestRecorderEnqueue(t *testing.T) {
	ctx := context.Background()
	rec := newRecorder(t, queue.Config{})
	noon := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	rec.SetTime(noon)

	r, err := rec.Enqueue(ctx, "reminders", queue.NewJob{ID: "r:1", Payload: []byte("p"), Delay: time.Hour})
	if err != nil || r.Duplicate || r.RunAt != noon.Add(time.Hour).UnixMilli() {
		t.Fatalf("enqueue: %+v, %v", r, err)
	}
	if r, err := rec.Enqueue(ctx, "reminders", queue.NewJob{ID: "r:1"}); err != nil || !r.Duplicate {
		t.Fatalf("second enqueue of r:1: %+v, %v; want a duplicate", r, err)
	}
	var ve *queue.ValidationError
	if _, err := rec.Enqueue(ctx, "reminders", queue.NewJob{ID: "bad id"}); !errors.As(err, &ve) || ve.Field != "id" {
		t.Fatalf("bad id: %v, want a *queue.ValidationError on id", err)
	}
	if _, err := rec.Enqueue(ctx, "bad topic", queue.NewJob{ID: "x"}); !errors.As(err, &ve) || ve.Field != "topic" {
		t.Fatalf("bad topic: %v, want a *queue.ValidationError on topic", err)
	}

	got := rec.Jobs("reminders")
	if len(got) != 1 || got[0].ID != "r:1" || string(got[0].Payload) != "p" || got[0].Delay != time.Hour ||
		got[0].RunAt != noon.Add(time.Hour).UnixMilli() {
		t.Fatalf("recorded %+v", got)
	}
	if len(rec.All()) != 1 || len(rec.Jobs("other")) != 0 {
		t.Fatalf("all %+v", rec.All())
	}
	// The job really waits in the recorder's Redis.
	info, err := rec.Get(ctx, "reminders", "r:1")
	if err != nil || info.State != queue.StateWaiting {
		t.Fatalf("get: %+v, %v", info, err)
	}
}

func TestRecorderEnqueueBatch(t *testing.T) {
	ctx := context.Background()
	rec := newRecorder(t, queue.Config{MaxPayloadBytes: 4})
	res, err := rec.EnqueueBatch(ctx, "t", []queue.NewJob{
		{ID: "a"}, {ID: "b", Payload: []byte("too long")}, {ID: "a"}, {ID: "c"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []queue.BatchStatus{queue.BatchCreated, queue.BatchInvalid, queue.BatchDuplicate, queue.BatchCreated}
	for i, r := range res {
		if r.Status != want[i] {
			t.Errorf("job %d: %s, want %s", i, r.Status, want[i])
		}
	}
	got := rec.All()
	if len(got) != 2 || got[0].ID != "a" || got[1].ID != "c" {
		t.Fatalf("recorded %+v, want a and c", got)
	}
}

// FailWith makes enqueues fail and record nothing; Reset forgets
// everything, so an id can be enqueued again.
func TestRecorderFailWithAndReset(t *testing.T) {
	ctx := context.Background()
	rec := newRecorder(t, queue.Config{})
	down := errors.New("redis down")
	rec.FailWith(down)
	if _, err := rec.Enqueue(ctx, "t", queue.NewJob{ID: "a"}); !errors.Is(err, down) {
		t.Fatalf("Enqueue: %v, want %v", err, down)
	}
	if _, err := rec.EnqueueBatch(ctx, "t", []queue.NewJob{{ID: "a"}}); !errors.Is(err, down) {
		t.Fatalf("EnqueueBatch: %v, want %v", err, down)
	}
	if len(rec.All()) != 0 {
		t.Fatalf("recorded %+v while failing", rec.All())
	}
	rec.FailWith(nil)
	if _, err := rec.Enqueue(ctx, "t", queue.NewJob{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	rec.Reset()
	if len(rec.All()) != 0 {
		t.Fatalf("recorded %+v after Reset", rec.All())
	}
	if r, err := rec.Enqueue(ctx, "t", queue.NewJob{ID: "a"}); err != nil || r.Duplicate {
		t.Fatalf("enqueue after Reset: %+v, %v", r, err)
	}
}

// Close stops the in-process Redis: later calls fail.
func TestRecorderClose(t *testing.T) {
	rec, err := queuetest.NewRecorder(queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rec.Close()
	if _, err := rec.Enqueue(context.Background(), "t", queue.NewJob{ID: "a"}); !errors.Is(err, redis.ErrClosed) {
		t.Fatalf("Enqueue after Close: %v, want redis.ErrClosed", err)
	}
}

// A bad configuration is refused.
func TestNewRecorderRefusesBadConfig(t *testing.T) {
	if _, err := queuetest.NewRecorder(queue.Config{MaxPayloadBytes: -1}); err == nil {
		t.Fatal("NewRecorder accepted MaxPayloadBytes -1")
	}
}

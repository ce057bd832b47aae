package dataplane

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/delayq/delayq/internal/testenv"
)

// memLedger is an in-memory Ledger for tests of the runtime's plumbing.
type memLedger struct {
	mu   sync.Mutex
	rows map[string]int // topic/id -> attempt
}

func (m *memLedger) Record(ctx context.Context, jobs []*Job, worker string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, j := range jobs {
		m.rows[j.Topic+"/"+j.ID] = j.Attempt
	}
	return nil
}

// CancelRows deletes like Complete; the memory keeps no history.
func (m *memLedger) CancelRows(ctx context.Context, refs []Ref) error { return m.Complete(ctx, refs) }

func (m *memLedger) Cancelled(context.Context, []*Job) error { return nil }

// CompleteResults deletes like Complete; the memory keeps no history.
func (m *memLedger) CompleteResults(ctx context.Context, refs []Ref, _ [][]byte) error {
	return m.Complete(ctx, refs)
}

func (m *memLedger) Complete(ctx context.Context, refs []Ref) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range refs {
		if m.rows[r.Topic+"/"+r.ID] == r.Attempt {
			delete(m.rows, r.Topic+"/"+r.ID)
		}
	}
	return nil
}

// DropRows deletes like Complete; the memory keeps no history.
func (m *memLedger) DropRows(ctx context.Context, refs []Ref) error { return m.Complete(ctx, refs) }

// DropClaim deletes a row at the claim's attempt (memLedger keeps no
// worker or state).
func (m *memLedger) DropClaim(ctx context.Context, r Ref, worker string) error {
	return m.Complete(ctx, []Ref{r})
}

// Unclaim hands rows back as the ledger does: attempt one less, fenced.
func (m *memLedger) Unclaim(ctx context.Context, refs []Ref) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range refs {
		if a, ok := m.rows[r.Topic+"/"+r.ID]; ok && a == r.Attempt {
			m.rows[r.Topic+"/"+r.ID] = a - 1
		}
	}
	return nil
}

func (m *memLedger) Extend(context.Context, []Ref, int64) error         { return nil }
func (m *memLedger) MarkRetrying(context.Context, []RetryRequest) error { return nil }
func (m *memLedger) Bury(context.Context, []DeadJob) error              { return nil }
func (m *memLedger) Lookup(context.Context, string, string) (*RestoreRow, error) {
	return nil, nil
}

// Jobs claimed and recorded but not started when shutdown begins go back to
// due at once, attempt unspent, and their ledger rows go.
func TestShutdownReleasesClaimedButUnstartedJobs(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	c, err := New(rdb, Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	led := &memLedger{rows: map[string]int{}}
	log := testenv.QuietLogger()
	w, err := NewWorker(c, led, WorkerConfig{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("t", HandlerFunc(func(context.Context, *Job) error { return nil }), TopicConfig{Concurrency: 5}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 8; i++ {
		if _, err := c.Enqueue(ctx, "t", NewJob{ID: fmt.Sprint("j", i)}); err != nil {
			t.Fatal(err)
		}
	}
	tr := w.topics["t"]
	tr.tokens <- struct{}{}                               // as fetchLoop does
	if _, _, err := tr.testFetch(ctx, 5, 5); err != nil { // no handler goroutines: they stay queued
		t.Fatal(err)
	}
	for i := 0; i < RecordPipeline; i++ { // all tokens back: the record goroutine is done
		tr.tokens <- struct{}{}
	}
	if len(tr.work) != 5 || len(led.rows) != 5 || tr.busy.Load() != 5 {
		t.Fatalf("queued %d, rows %d, busy %d; want 5 each", len(tr.work), len(led.rows), tr.busy.Load())
	}
	tr.releaseQueued(ctx)
	st, err := c.Stats(ctx, "t")
	if err != nil || st.InFlight != 0 || st.DueNow != 8 {
		t.Fatalf("after release: %+v, %v; want all 8 due", st, err)
	}
	if len(led.rows) != 0 || tr.busy.Load() != 0 || len(tr.work) != 0 {
		t.Fatalf("rows %d, busy %d, queued %d left", len(led.rows), tr.busy.Load(), len(tr.work))
	}
	for i := 0; i < 8; i++ {
		info, _ := c.Get(ctx, "t", fmt.Sprint("j", i))
		if info.Job.Attempt != 0 {
			t.Fatalf("j%d attempt %d, want 0", i, info.Job.Attempt)
		}
	}
}

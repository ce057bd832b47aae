package ledger

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// RecordClaimed turns scheduled rows into the claim's in-progress rows with
// one UPDATE, keeps what the claim does not change (payload, enqueued_at,
// run_at), and falls back to Record's upsert when a row is missing.
func TestRecordClaimed(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		l, log := newLedger(t, db, Options{})
		ctx := testenv.Context(t)
		res, _, err := l.Schedule(ctx, "t", []queue.NewJob{{ID: "a", Payload: []byte("pa"), MaxAttempts: 3}, {ID: "b", MaxAttempts: 3}})
		if err != nil {
			t.Fatal(err)
		}
		before, err := l.Row(ctx, "t", "a")
		if err != nil {
			t.Fatal(err)
		}
		a, b := job("t", "a", 1), job("t", "b", 1)
		a.LastError = "earlier"
		log.Take()
		if err := l.RecordClaimed(ctx, []*queue.Job{a, b}, "w:1"); err != nil {
			t.Fatal(err)
		}
		if v := verbs(log.Take()); len(v) != 1 || v[0] != "UPDATE" {
			t.Fatalf("statements %v, want one UPDATE", v)
		}
		r, err := l.Row(ctx, "t", "a")
		if err != nil {
			t.Fatal(err)
		}
		if r.State != StateInProgress || r.Attempt != 1 || r.LeaseUntil != a.LeaseUntil || r.Worker != "w:1" ||
			r.ClaimedAt != fixedNow.UnixMilli() || r.LastError != "earlier" || string(r.Payload) != "pa" ||
			r.EnqueuedAt != before.EnqueuedAt || r.RunAt != res[0].RunAt || r.ID != before.ID {
			t.Fatalf("row after the claim: %+v (before %+v)", r, before)
		}
		// A claim whose row is gone (cancelled meanwhile) gets one, as
		// Record gives it.
		c := job("t", "c", 1)
		log.Take()
		if err := l.RecordClaimed(ctx, []*queue.Job{job("t", "a", 2), c}, "w:2"); err != nil {
			t.Fatal(err)
		}
		if v := verbs(log.Take()); len(v) != 2 || v[0] != "UPDATE" || v[1] != "INSERT" {
			t.Fatalf("statements %v, want the UPDATE then the upsert", v)
		}
		for id, att := range map[string]int{"a": 2, "c": 1} {
			r, err := l.Row(ctx, "t", id)
			if err != nil || r.State != StateInProgress || r.Attempt != att || r.Worker != "w:2" {
				t.Fatalf("%s: %+v %v", id, r, err)
			}
		}
	})
}

// BenchmarkClaimDurable compares the two ways of writing the claims of
// scheduled rows, each step: Schedule 100 jobs (not timed), record their
// claims, complete them.
//
//	go test -run '^$' -bench ClaimDurable -benchtime 3s ./ledger/
func BenchmarkClaimDurable(b *testing.B) {
	const batch = 100
	for _, how := range []string{"upsert", "update"} {
		b.Run("mariadb/"+how, func(b *testing.B) {
			l, err := New(testenv.MySQL(b), Options{})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if err := l.Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			var seq atomic.Int64
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				n := seq.Add(1)
				nj := make([]queue.NewJob, batch)
				js := make([]*queue.Job, batch)
				for i := range nj {
					id := fmt.Sprintf("order_close:%d-%d", n, i)
					nj[i] = queue.NewJob{ID: id, Payload: []byte(`{"order_no":"x"}`), MaxAttempts: 5}
					js[i] = job("bench", id, 1)
				}
				if _, _, err := l.Schedule(ctx, "bench", nj); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if how == "upsert" {
					err = l.Record(ctx, js, "bench:1")
				} else {
					err = l.RecordClaimed(ctx, js, "bench:1")
				}
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Complete(ctx, refsOf(js)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}

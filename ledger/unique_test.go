package ledger

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/delayq/delayq/queue"
)

// Schedule on a topic with a uniqueness window answers an id whose job
// finished within it as a duplicate, with the outcome and the window's end
// from its history row, on every backend; a job that finished longer ago,
// a topic without a window and a partition's own window behave as stated.
func TestScheduleUniqueWindow(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		windows := map[string]time.Duration{"u": time.Hour, "p": time.Hour}
		l, _ := newLedger(t, db, Options{UniqueFor: windows, Now: time.Now})
		// A second ledger on the same tables whose clock is two hours
		// behind: what it finishes is outside the window.
		old, _ := newLedger(t, db, Options{UniqueFor: windows, Now: func() time.Time { return time.Now().Add(-2 * time.Hour) }})
		finish := func(l *Ledger, topic, id string) {
			t.Helper()
			mustSchedule(t, l, topic, queue.NewJob{ID: id, MaxAttempts: 1})
			j := job(topic, id, 1)
			mustRecord(t, l, "w:1", j)
			if err := opsOf(l).Complete(ctx, []queue.Ref{j.Ref()}); err != nil {
				t.Fatal(err)
			}
		}
		from := time.Now().Add(time.Hour).UnixMilli()
		finish(l, "u", "a")
		finish(old, "u", "b")
		finish(l, "free", "a")
		finish(l, "p~4.1~7", "a")
		to := time.Now().Add(time.Hour).UnixMilli()

		out, _ := mustSchedule(t, l, "u", queue.NewJob{ID: "a", MaxAttempts: 1}, queue.NewJob{ID: "b", MaxAttempts: 1},
			queue.NewJob{ID: "a", MaxAttempts: 1})
		for _, i := range []int{0, 2} {
			f := out[i].Finished
			if !out[i].Duplicate || f == nil || f.Outcome != OutcomeSucceeded || f.TakenUntil < from || f.TakenUntil > to {
				t.Fatalf("a again (job %d): %+v %+v, want a duplicate succeeded taken until %d..%d", i, out[i], f, from, to)
			}
		}
		if out[1].Duplicate || out[1].Finished != nil {
			t.Fatalf("b, finished two hours ago: %+v", out[1])
		}
		if _, err := l.Row(ctx, "u", "a"); err == nil {
			t.Fatal("the duplicate wrote a row")
		}
		if out, _ := mustSchedule(t, l, "free", queue.NewJob{ID: "a", MaxAttempts: 1}); out[0].Duplicate {
			t.Fatalf("a topic without a window: %+v", out[0])
		}
		out, _ = mustSchedule(t, l, "p~4.1~7", queue.NewJob{ID: "a", MaxAttempts: 1}, queue.NewJob{ID: "z", MaxAttempts: 1})
		if out[0].Finished == nil || out[1].Duplicate {
			t.Fatalf("a partition has its topic's window: %+v", out)
		}
		// A live job's row wins over a history row of the same id.
		finish(l, "u", "live")
		if err := old.db.Exec("DELETE FROM `" + l.historyTable + "` WHERE job_id = 'live'").Error; err != nil {
			t.Fatal(err)
		}
		mustSchedule(t, l, "u", queue.NewJob{ID: "live", MaxAttempts: 1, Delay: time.Hour})
		if err := l.db.Exec("INSERT INTO `"+l.historyTable+"` (topic, job_id, outcome, attempts, max_attempts, enqueued_at, due_at,"+
			" first_claimed_at, claimed_at, finished_at, worker, last_error) VALUES ('u', 'live', 'dead', 1, 1, 0, 0, 0, 0, ?, '', '')",
			time.Now().UnixMilli()).Error; err != nil {
			t.Fatal(err)
		}
		if out, _ := mustSchedule(t, l, "u", queue.NewJob{ID: "live", MaxAttempts: 1}); !out[0].Duplicate || out[0].Finished != nil || out[0].RunAt == 0 {
			t.Fatalf("a waiting job's id: %+v, want a duplicate of the waiting job", out[0])
		}
	})
}

func TestUniqueForNeedsHistory(t *testing.T) {
	_, err := (Options{UniqueFor: map[string]time.Duration{"u": time.Hour}, NoHistory: []string{"u"}}).withDefaults()
	if err == nil || !strings.Contains(err.Error(), "NoHistory") {
		t.Fatalf("a window on a topic without history: %v", err)
	}
	if _, err := (Options{UniqueFor: map[string]time.Duration{"u": -time.Second}}).withDefaults(); err == nil {
		t.Fatal("a negative window was accepted")
	}
}

// A Schedule that loses the race for an id reads the ids again, the
// finished ones' history included, and a batch over several statements
// reads every statement's: each id gets the answer a lone call would.
func TestScheduleUniqueWindowRereadAndSplit(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		windows := map[string]time.Duration{"u": time.Hour}
		l, _ := newLedger(t, db, Options{UniqueFor: windows, Now: time.Now})
		finished := func(id string) {
			t.Helper()
			mustSchedule(t, l, "u", queue.NewJob{ID: id, MaxAttempts: 1})
			j := job("u", id, 1)
			mustRecord(t, l, "w:1", j)
			if err := opsOf(l).Complete(ctx, []queue.Ref{j.Ref()}); err != nil {
				t.Fatal(err)
			}
		}
		finished("f")
		fired := raceInsert(t, db, l, "u", "b")
		out, _ := mustSchedule(t, l, "u", queue.NewJob{ID: "a", MaxAttempts: 1}, queue.NewJob{ID: "b", MaxAttempts: 1},
			queue.NewJob{ID: "f", MaxAttempts: 1})
		if fired.Load() != 1 {
			t.Fatal("the race did not happen")
		}
		if out[0].Duplicate || !out[1].Duplicate || out[1].Finished != nil || out[2].Finished == nil {
			t.Fatalf("after the lost race: %+v", out)
		}

		small, _ := newLedger(t, db, Options{UniqueFor: windows, Now: time.Now, MaxPlaceholders: 11})
		var js []queue.NewJob
		for i := range 25 {
			id := fmt.Sprintf("s%02d", i)
			if i%4 == 0 {
				finished(id)
			}
			js = append(js, queue.NewJob{ID: id, MaxAttempts: 1})
		}
		js = append(js, queue.NewJob{ID: "f", MaxAttempts: 1})
		out, _ = mustSchedule(t, small, "u", js...)
		for i, r := range out[:25] {
			if (i%4 == 0) != (r.Finished != nil) || (i%4 == 0) != r.Duplicate {
				t.Fatalf("job %d over several statements: %+v", i, r)
			}
		}
		if out[25].Finished == nil {
			t.Fatalf("f over several statements: %+v", out[25])
		}
	})
}

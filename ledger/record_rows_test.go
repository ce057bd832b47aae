package ledger

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/queue"
)

// claimOf returns the claim of a scheduled row as Claim hands it out: the
// row's payload, due time and enqueue time, attempt 1, Durable.
func claimOf(t *testing.T, l *Ledger, topic, id string) *queue.Job {
	t.Helper()
	r := mustRow(t, l, topic, id)
	return &queue.Job{Topic: topic, ID: id, Payload: r.Payload, Attempt: r.Attempt + 1, MaxAttempts: r.MaxAttempts,
		EnqueuedAt: r.EnqueuedAt, RunAt: r.RunAt, LastError: r.LastError, LeaseUntil: fixedNow.UnixMilli() + 30_000,
		Durable: true}
}

// The claim of a durable topic's scheduled row is one UPDATE: the row
// becomes in_progress with the claim's attempt, lease, worker and time, and
// keeps its id, payload, due time, enqueue time and error.
func TestRecordDurableUpdatesTheScheduledRow(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		l, log := newLedger(t, db, Options{})
		mustSchedule(t, l, "t",
			queue.NewJob{ID: "a", Payload: []byte("pa"), MaxAttempts: 3},
			queue.NewJob{ID: "b", Payload: []byte("pb"), MaxAttempts: 3})
		before := map[string]Entry{"a": mustRow(t, l, "t", "a"), "b": mustRow(t, l, "t", "b")}
		a, b := claimOf(t, l, "t", "a"), claimOf(t, l, "t", "b")
		log.Take()
		mustRecord(t, l, "w:1", b, a)
		if v := verbs(log.Take()); fmt.Sprint(v) != "[UPDATE]" {
			t.Fatalf("Record of two scheduled rows ran %v, want one UPDATE", v)
		}
		for id, old := range before {
			want := old
			want.State, want.Attempt, want.Worker = queue.StateInFlight, 1, "w:1"
			want.ClaimedAt, want.UpdatedAt, want.LeaseUntil = fixedNow.UnixMilli(), fixedNow.UnixMilli(), a.LeaseUntil
			want.FirstClaimedAt = fixedNow.UnixMilli() // the first claim of a waiting row
			if got := mustRow(t, l, "t", id); !equalEntry(got, want) {
				t.Errorf("%s claimed:\n got %+v\nwant %+v", id, got, want)
			}
		}
	})
}

// A retrying row's next claim is the UPDATE too: the attempt grows by one,
// the error and the retry's due time stay.
func TestRecordDurableUpdatesTheRetryingRow(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, log := newLedger(t, db, Options{})
		mustSchedule(t, l, "t", queue.NewJob{ID: "a", Payload: []byte("pa"), MaxAttempts: 3})
		mustRecord(t, l, "w:1", claimOf(t, l, "t", "a"))
		retryAt := fixedNow.UnixMilli() + 5_000
		err := opsOf(l).MarkRetrying(ctx, []dataplane.RetryRequest{{Ref: queue.Ref{Topic: "t", ID: "a", Attempt: 1},
			RunAt: retryAt, LeaseUntil: retryAt + 30_000, Error: "boom"}})
		if err != nil {
			t.Fatal(err)
		}
		old := mustRow(t, l, "t", "a")
		j := claimOf(t, l, "t", "a")
		log.Take()
		mustRecord(t, l, "w:2", j)
		if v := verbs(log.Take()); fmt.Sprint(v) != "[UPDATE]" {
			t.Fatalf("Record of a retrying row ran %v, want one UPDATE", v)
		}
		got := mustRow(t, l, "t", "a")
		if got.State != queue.StateInFlight || got.Attempt != 2 || got.Worker != "w:2" || got.LastError != "boom" ||
			got.RunAt != retryAt || got.LeaseUntil != j.LeaseUntil || got.ID != old.ID || got.EnqueuedAt != old.EnqueuedAt {
			t.Errorf("retrying row claimed again: %+v (was %+v)", got, old)
		}
	})
}

// A durable job without a row at its first claim (its topic became
// durable after it was enqueued) gets one: the UPDATE finds nothing, the
// look for the missing row and then its history finds none, and the
// upsert inserts it, exactly as for a redis topic's job.
func TestRecordDurableInsertsAMissingRow(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		l, log := newLedger(t, db, Options{})
		j := job("t", "gone", 1)
		j.Durable = true
		mustRecord(t, l, "w:1", j)
		if v := verbs(log.Take()); fmt.Sprint(v) != "[UPDATE SELECT SELECT INSERT]" {
			t.Fatalf("Record of a durable job without a row ran %v, want the UPDATE, the look for the missing rows and their history, then the upsert", v)
		}
		got := mustRow(t, l, "t", "gone")
		want := Entry{ID: got.ID, Topic: "t", JobID: "gone", Payload: j.Payload, Attempt: 1, MaxAttempts: 5, RunAt: j.RunAt,
			ClaimedAt: fixedNow.UnixMilli(), LeaseUntil: j.LeaseUntil, Worker: "w:1", State: queue.StateInFlight,
			UpdatedAt: fixedNow.UnixMilli(), EnqueuedAt: j.EnqueuedAt, FirstClaimedAt: fixedNow.UnixMilli()}
		if !equalEntry(got, want) {
			t.Errorf("row:\n got %+v\nwant %+v", got, want)
		}
	})
}

// A durable job claimed again after its row was deleted (it finished: a
// worker committed its completion, then could not tell Redis) is not
// written back, so it does not run twice: Record names it in a
// *queue.GoneError and records the rest of the batch. A row deleted
// without a finish (a release, a cancel that lost its race to the claim),
// or of a topic without history, is written back as before.
func TestRecordDurableForgetsAFinishedJob(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		// The real clock: a finish is compared with the enqueue's time.
		l, _ := newLedger(t, db, Options{Now: time.Now, NoHistory: []string{"quiet"}})
		for _, topic := range []string{"t", "quiet"} {
			mustSchedule(t, l, topic,
				queue.NewJob{ID: "done", Payload: []byte("pa"), MaxAttempts: 3},
				queue.NewJob{ID: "next", Payload: []byte("pb"), MaxAttempts: 3},
				queue.NewJob{ID: "dropped", Payload: []byte("pc"), MaxAttempts: 3})
		}
		claimed := map[string]*queue.Job{}
		for _, topic := range []string{"t", "quiet"} {
			for _, id := range []string{"done", "dropped"} {
				j := claimOf(t, l, topic, id)
				mustRecord(t, l, "w:1", j)
				claimed[topic+"/"+id] = j
			}
			if err := opsOf(l).Complete(ctx, []queue.Ref{claimed[topic+"/done"].Ref()}); err != nil {
				t.Fatal(err)
			}
			// Deleted without a finish, as a redis topic's release does.
			if err := db.Exec("DELETE FROM "+l.LedgerTable()+" WHERE topic = ? AND job_id = 'dropped'", topic).Error; err != nil {
				t.Fatal(err)
			}
		}
		again := func(topic, id string) *queue.Job {
			j := *claimed[topic+"/"+id]
			j.Attempt = 2 // Redis's lease ran out and another worker claimed it
			return &j
		}
		batch := []*queue.Job{again("t", "done"), claimOf(t, l, "t", "next"), again("t", "dropped"), again("quiet", "done")}
		err := opsOf(l).Record(ctx, batch, "w:2")
		var gone *queue.GoneError
		if !errors.As(err, &gone) || len(gone.Refs) != 1 || gone.Refs[0] != batch[0].Ref() {
			t.Fatalf("Record of a finished job claimed again: %v, want a GoneError naming %v alone", err, batch[0].Ref())
		}
		if _, err := l.Row(ctx, "t", "done"); !errors.Is(err, ErrNotFound) {
			t.Errorf("the finished job's row: %v, want it still gone", err)
		}
		for _, j := range batch[1:] {
			if r := mustRow(t, l, j.Topic, j.ID); r.Attempt != j.Attempt || r.Worker != "w:2" || r.State != queue.StateInFlight {
				t.Errorf("%s/%s: %+v, want recorded at attempt %d", j.Topic, j.ID, r, j.Attempt)
			}
		}
	})
}

// A durable job that a Redis failover gave back as never claimed (the
// writes of its claim and of its ack lost with the master) is claimed
// again at attempt 1 after it finished: it is gone too, not run again.
func TestRecordDurableForgetsAFinishedJobAtItsFirstAttempt(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{Now: time.Now})
		mustSchedule(t, l, "t", queue.NewJob{ID: "lost", Payload: []byte("p"), MaxAttempts: 3})
		first := claimOf(t, l, "t", "lost")
		mustRecord(t, l, "w:1", first)
		if err := opsOf(l).Complete(ctx, []queue.Ref{first.Ref()}); err != nil {
			t.Fatal(err)
		}
		again := *first // the same claim, made again by the promoted replica's state
		err := opsOf(l).Record(ctx, []*queue.Job{&again}, "w:2")
		var gone *queue.GoneError
		if !errors.As(err, &gone) || len(gone.Refs) != 1 || gone.Refs[0] != again.Ref() {
			t.Fatalf("Record of a finished job claimed again at attempt 1: %v, want a GoneError naming it", err)
		}
		if _, err := l.Row(ctx, "t", "lost"); !errors.Is(err, ErrNotFound) {
			t.Errorf("the finished job's row: %v, want it still gone", err)
		}
	})
}

// A redis topic's job redelivered after its completion committed (its ack
// lost) is refused the same way; a retry's claim and a released job's
// (row deleted, no finish in its history) are written.
func TestRecordRedisTopicForgetsAFinishedJob(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{Now: time.Now})
		done, retried, released := job("r", "done", 1), job("r", "retried", 1), job("r", "released", 1)
		died, purged := job("r", "died", 1), job("r", "purged", 1)
		for _, j := range []*queue.Job{done, retried, released, died, purged} {
			j.EnqueuedAt = time.Now().UnixMilli() - 1000
		}
		mustRecord(t, l, "w:1", done, retried, released, died, purged)
		if err := opsOf(l).Complete(ctx, []queue.Ref{done.Ref()}); err != nil {
			t.Fatal(err)
		}
		if err := opsOf(l).Bury(ctx, []queue.DeadJob{{Job: died, Error: "boom"}, {Job: purged, Error: "boom"}}); err != nil {
			t.Fatal(err)
		}
		// Purged by an operator since its death: finished, forgotten.
		if n, err := l.MarkPurgedID(ctx, "r", "purged"); err != nil || n != 1 {
			t.Fatalf("mark purged: %d, %v", n, err)
		}
		err := opsOf(l).MarkRetrying(ctx, []dataplane.RetryRequest{{Ref: retried.Ref(),
			RunAt: time.Now().UnixMilli(), LeaseUntil: time.Now().UnixMilli() + 30_000, Error: "boom"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Exec("DELETE FROM " + l.LedgerTable() + " WHERE job_id = 'released'").Error; err != nil {
			t.Fatal(err)
		}
		batch := make([]*queue.Job, 0, 5)
		for _, j := range []*queue.Job{done, retried, released, died, purged} {
			again := *j
			again.Attempt = 2
			batch = append(batch, &again)
		}
		err = opsOf(l).Record(ctx, batch, "w:2")
		var gone *queue.GoneError
		// The dead one is named apart: the worker buries it again in Redis
		// instead of forgetting it as done.
		if !errors.As(err, &gone) || len(gone.Refs) != 3 || gone.Refs[0] != batch[3].Ref() || gone.Refs[1] != batch[0].Ref() ||
			gone.Refs[2] != batch[4].Ref() || len(gone.Dead) != 1 || gone.Dead[0] != batch[3].Ref() {
			t.Fatalf("Record: %v (%+v), want a GoneError naming died, done and purged, died alone dead", err, gone)
		}
		for _, j := range batch[1:3] {
			if r := mustRow(t, l, "r", j.ID); r.Attempt != 2 || r.Worker != "w:2" {
				t.Errorf("%s: %+v, want recorded at attempt 2", j.ID, r)
			}
		}
	})
}

// One batch with every case: scheduled rows of a durable topic, a durable
// job whose row is missing, one whose row is at another attempt than the
// claim expects, a redis topic's new job, a redis job claimed again, and a
// durable job with a lease of its own. Each row ends as the claim says.
func TestRecordMixedBatch(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		l, log := newLedger(t, db, Options{})
		mustSchedule(t, l, "d",
			queue.NewJob{ID: "s1", Payload: []byte("p1"), MaxAttempts: 3},
			queue.NewJob{ID: "s2", Payload: []byte("p2"), MaxAttempts: 3},
			queue.NewJob{ID: "other-attempt", Payload: []byte("p3"), MaxAttempts: 3},
			queue.NewJob{ID: "own-lease", Payload: []byte("p4"), MaxAttempts: 3})
		ids := map[string]int64{}
		for _, id := range []string{"s1", "s2", "other-attempt", "own-lease"} {
			ids[id] = mustRow(t, l, "d", id).ID
		}
		mustRecord(t, l, "w:0", job("r", "again", 1))
		s1, s2 := claimOf(t, l, "d", "s1"), claimOf(t, l, "d", "s2")
		other := claimOf(t, l, "d", "other-attempt")
		other.Attempt = 3 // the row says 0: not the attempt before this claim
		own := claimOf(t, l, "d", "own-lease")
		own.LeaseUntil += 1_000
		missing := job("d", "missing", 1)
		missing.Durable = true
		fresh, again := job("r", "fresh", 1), job("r", "again", 2)
		log.Take()
		mustRecord(t, l, "w:1", fresh, s2, other, missing, again, own, s1)
		if v := verbs(log.Take()); fmt.Sprint(v) != "[UPDATE SELECT SELECT INSERT]" {
			t.Fatalf("mixed Record ran %v, want the UPDATE, the look for the missing rows and their history, then the upsert", v)
		}
		for _, j := range []*queue.Job{fresh, s2, other, missing, again, own, s1} {
			got := mustRow(t, l, j.Topic, j.ID)
			if got.State != queue.StateInFlight || got.Attempt != j.Attempt || got.Worker != "w:1" ||
				got.LeaseUntil != j.LeaseUntil || got.ClaimedAt != fixedNow.UnixMilli() || string(got.Payload) != string(j.Payload) {
				t.Errorf("%s/%s: %+v, want the claim %+v", j.Topic, j.ID, got, j)
			}
			if id, ok := ids[j.ID]; ok && got.ID != id {
				t.Errorf("%s: id %d, was %d", j.ID, got.ID, id)
			}
		}
		if n := count(t, l); n != 7 {
			t.Errorf("%d rows, want 7", n)
		}
	})
}

// The same durable job twice in one batch: the last claim wins, as with
// the upsert.
func TestRecordDurableLastClaimWins(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		l, _ := newLedger(t, db, Options{})
		mustSchedule(t, l, "t", queue.NewJob{ID: "a", Payload: []byte("pa"), MaxAttempts: 3})
		first, last := claimOf(t, l, "t", "a"), claimOf(t, l, "t", "a")
		last.LeaseUntil += 7_000
		mustRecord(t, l, "w:1", first, last)
		if got := mustRow(t, l, "t", "a"); got.Attempt != 1 || got.LeaseUntil != last.LeaseUntil {
			t.Errorf("row %+v, want attempt 1 leased until %d", got, last.LeaseUntil)
		}
	})
}

// Split at the placeholder limit, each part's UPDATE takes its own rows.
func TestRecordDurableSplit(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		l, log := newLedger(t, db, Options{MaxPlaceholders: 65}) // 5 rows per part
		var nj []queue.NewJob
		for i := 0; i < 12; i++ {
			nj = append(nj, queue.NewJob{ID: fmt.Sprintf("j%02d", i), MaxAttempts: 3})
		}
		mustSchedule(t, l, "t", nj...)
		var js []*queue.Job
		for _, n := range nj {
			js = append(js, claimOf(t, l, "t", n.ID))
		}
		log.Take()
		mustRecord(t, l, "w:1", js...)
		if v := verbs(log.Take()); fmt.Sprint(v) != "[UPDATE UPDATE UPDATE]" {
			t.Errorf("split Record ran %v, want three UPDATEs", v)
		}
		for _, n := range nj {
			if got := mustRow(t, l, "t", n.ID); got.State != queue.StateInFlight || got.Attempt != 1 {
				t.Errorf("%s: %+v", n.ID, got)
			}
		}
	})
}

// A late record of an older claim (its worker stalled between claim and
// Record while another worker claimed the job again) leaves the newer
// claim's row as it is, for a redis topic's upsert and a durable row's
// UPDATE alike; a newer claim still rewrites it.
func TestRecordKeepsTheNewerClaim(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		l, _ := newLedger(t, db, Options{})
		claim := func(id string, attempt int, lease int64, durable bool) *queue.Job {
			return &queue.Job{Topic: "t", ID: id, Payload: []byte("p"), Attempt: attempt, MaxAttempts: 5,
				RunAt: fixedNow.UnixMilli(), LeaseUntil: lease, Durable: durable}
		}
		mustSchedule(t, l, "t", queue.NewJob{ID: "d", Payload: []byte("p"), MaxAttempts: 5})
		for _, c := range []struct {
			id      string
			durable bool
		}{{"r", false}, {"d", true}} {
			mustRecord(t, l, "w:new", claim(c.id, 2, 2_000, c.durable))
			mustRecord(t, l, "w:old", claim(c.id, 1, 1_000, c.durable))
			if got := mustRow(t, l, "t", c.id); got.Attempt != 2 || got.Worker != "w:new" || got.LeaseUntil != 2_000 {
				t.Errorf("%s after the older claim's late record: attempt %d worker %s lease %d, want 2 w:new 2000",
					c.id, got.Attempt, got.Worker, got.LeaseUntil)
			}
			mustRecord(t, l, "w:next", claim(c.id, 3, 3_000, c.durable))
			if got := mustRow(t, l, "t", c.id); got.Attempt != 3 || got.Worker != "w:next" || got.LeaseUntil != 3_000 {
				t.Errorf("%s after a newer claim: attempt %d worker %s lease %d, want 3 w:next 3000",
					c.id, got.Attempt, got.Worker, got.LeaseUntil)
			}
		}
	})
}

// DropClaim deletes a claim's row only while it is that claim's: in
// progress, at its attempt, by its worker.
func TestDropClaimIsFencedOnTheClaim(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		claim := func(id string) *queue.Job {
			return &queue.Job{Topic: "t", ID: id, Payload: []byte("p"), Attempt: 2, MaxAttempts: 5,
				RunAt: fixedNow.UnixMilli(), LeaseUntil: fixedNow.UnixMilli() + 1_000}
		}
		mustRecord(t, l, "w:a", claim("mine"), claim("other-attempt"), claim("retrying"))
		mustRecord(t, l, "w:b", claim("other-worker"))
		if err := opsOf(l).MarkRetrying(ctx, []dataplane.RetryRequest{{Ref: queue.Ref{Topic: "t", ID: "retrying", Attempt: 2},
			RunAt: fixedNow.UnixMilli(), LeaseUntil: fixedNow.UnixMilli() + 1_000, Error: "boom"}}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			id      string
			attempt int
			gone    bool
		}{{"mine", 2, true}, {"other-attempt", 1, false}, {"other-worker", 2, false}, {"retrying", 2, false}} {
			if err := opsOf(l).DropClaim(ctx, queue.Ref{Topic: "t", ID: c.id, Attempt: c.attempt}, "w:a"); err != nil {
				t.Fatal(err)
			}
			_, err := l.Row(ctx, "t", c.id)
			if gone := errors.Is(err, ErrNotFound); gone != c.gone {
				t.Errorf("%s: row dropped %v (%v), want %v", c.id, gone, err, c.gone)
			}
		}
	})
}

// A redis topic's claim released (at a shutdown, say) leaves no history:
// its next claim, at the same attempt (a release gives it back), is
// recorded and runs. Released with Complete, as it was, the history said
// "succeeded" and a job released at attempt 2 was forgotten unrun
// (found by review).
func TestReleasedRowLeavesNoHistory(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{Now: time.Now})
		j := job("r", "released", 2)
		j.EnqueuedAt = time.Now().UnixMilli() - 1000
		mustRecord(t, l, "w:1", j)
		if err := opsOf(l).DropRows(ctx, []queue.Ref{j.Ref()}); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Row(ctx, "r", "released"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the released row: %v, want it deleted", err)
		}
		if h := historyCount(t, l, OutcomeSucceeded); h != 0 {
			t.Fatalf("%d history rows after a release, want none", h)
		}
		if err := opsOf(l).Record(ctx, []*queue.Job{j}, "w:2"); err != nil {
			t.Fatalf("the claim after the release: %v, want it recorded", err)
		}
		if r := mustRow(t, l, "r", "released"); r.Worker != "w:2" || r.Attempt != 2 {
			t.Fatalf("row %+v, want w:2's claim at attempt 2", r)
		}
	})
}

package ledger

import (
	"context"
	"strings"
	"sync"
	"testing"

	"gorm.io/gorm"
)

// TestSetPaused: a pause and a resume are rows with who and when; setting
// the state a topic is in changes nothing (the first pause's who and when
// stay); changed_at grows with every change.
func TestSetPaused(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		if st, err := l.TopicState(ctx, "t"); err != nil || st.Paused || st.At != 0 || st.Topic != "t" {
			t.Fatalf("never paused: %+v, %v", st, err)
		}
		// A resume of a topic never paused (a typo, say) changes nothing
		// and leaves no row behind.
		if st, changed, err := l.SetPaused(ctx, "typo", false, "cli:ops@host"); err != nil || changed || st.Paused || st.At != 0 || st.Topic != "typo" {
			t.Fatalf("resume never paused: %+v %v %v", st, changed, err)
		}
		if all, err := l.TopicStates(ctx); err != nil || len(all) != 0 {
			t.Fatalf("a resume of a topic never paused left %+v, %v", all, err)
		}
		p, changed, err := l.SetPaused(ctx, "t", true, "cli:ops@host")
		if err != nil || !changed || !p.Paused || p.At == 0 || p.By != "cli:ops@host" {
			t.Fatalf("pause: %+v %v %v", p, changed, err)
		}
		again, changed, err := l.SetPaused(ctx, "t", true, "token:12345678")
		if err != nil || changed || again != p {
			t.Fatalf("pause again: %+v %v %v, want %+v unchanged", again, changed, err, p)
		}
		r, changed, err := l.SetPaused(ctx, "t", false, "anonymous")
		if err != nil || !changed || r.Paused || r.At <= p.At || r.By != "anonymous" {
			t.Fatalf("resume: %+v %v %v (pause %+v)", r, changed, err, p)
		}
		if _, _, err := l.SetPaused(ctx, "u", true, strings.Repeat("é", 300)); err != nil {
			t.Fatalf("long actor: %v", err)
		}
		all, err := l.TopicStates(ctx)
		if err != nil || len(all) != 2 || all[0].Topic != "t" || all[0].Paused || all[1].Topic != "u" || !all[1].Paused {
			t.Fatalf("TopicStates: %+v, %v", all, err)
		}
		if got := []rune(all[1].By); len(got) != maxActorLen {
			t.Errorf("actor cut to %d characters, want %d", len(got), maxActorLen)
		}
		if _, _, err := l.SetPaused(ctx, strings.Repeat("x", 65), true, "a"); err == nil {
			t.Error("an overlong topic was accepted")
		}
	})
}

// TestTopicStatesWithoutTheTable: a ledger not migrated to the topic state
// table has no pauses, and says so without an error (the relay reads it every
// pass).
func TestTopicStatesWithoutTheTable(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		if err := db.Migrator().DropTable(l.TopicStateTable()); err != nil {
			t.Fatal(err)
		}
		if st, err := l.TopicStates(ctx); err != nil || len(st) != 0 {
			t.Fatalf("TopicStates without the table: %+v, %v", st, err)
		}
		if _, _, err := l.SetPaused(ctx, "t", true, "x"); err == nil {
			t.Fatal("SetPaused without the table succeeded")
		}
	})
}

// TestSetPausedRace: first pauses racing on one topic all succeed, and one
// row results.
func TestSetPausedRace(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, _, err := l.SetPaused(ctx, "race", true, "x"); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("racing pause: %v", err)
		}
		if all, err := l.TopicStates(ctx); err != nil || len(all) != 1 || !all[0].Paused {
			t.Fatalf("after the race: %+v, %v", all, err)
		}
	})
}

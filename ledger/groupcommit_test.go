package ledger

import (
	"context"
	"errors"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// holdingWrite is a write that blocks inside its commit until released:
// it keeps a commit in flight, so the writes that come meanwhile queue up.
func holdingWrite(started chan<- struct{}, release <-chan struct{}) write {
	return write{urgent: true, run: func(db *gorm.DB) error {
		started <- struct{}{}
		<-release
		return nil
	}}
}

// holdCommit starts a commit that blocks until release is closed, waits
// until it is in flight, and returns where its result comes.
func holdCommit(ctx context.Context, t *testing.T, l *Ledger, release <-chan struct{}) <-chan error {
	t.Helper()
	started, held := make(chan struct{}, 1), make(chan error, 1)
	go func() { held <- l.commit(ctx, holdingWrite(started, release)) }()
	testenv.Receive(ctx, t, started, "the held commit")
	return held
}

// inParallel starts each write in a goroutine of its own; wait fails the
// test on the first error (or when ctx ends first).
func inParallel(writes ...func() error) (wait func(ctx context.Context, t *testing.T)) {
	errs := make(chan error, len(writes))
	for _, w := range writes {
		go func() { errs <- w() }()
	}
	return func(ctx context.Context, t *testing.T) {
		t.Helper()
		for range writes {
			if err := testenv.Receive(ctx, t, errs, "a write"); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestWritesArrivingDuringACommitShareTheNext(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := testenv.Context(t)
		l, _ := newLedger(t, db, Options{GroupCommitDepth: 1})
		release := make(chan struct{})
		held := holdCommit(ctx, t, l, release)

		before := l.WriteStats()
		wait := inParallel(
			func() error { return opsOf(l).Record(ctx, []*queue.Job{job("gc", "a", 1), job("gc", "b", 1)}, "w1") },
			func() error { return opsOf(l).Record(ctx, []*queue.Job{job("gc", "c", 1)}, "w1") },
			func() error { return opsOf(l).Extend(ctx, []queue.Ref{{Topic: "gc", ID: "a", Attempt: 1}}, 1) },
		)
		testenv.WaitFor(ctx, t, "3 writes waiting", func() bool { return l.group.Waiting() == 3 }, nil)
		close(release)
		if err := testenv.Receive(ctx, t, held, "held commit"); err != nil {
			t.Fatal(err)
		}
		wait(ctx, t)
		after := l.WriteStats()
		if got := after.Commits - before.Commits; got != 2 {
			t.Fatalf("commits = %d, want 2: the held one and one for the three writes that waited", got)
		}
		if n, err := l.Count(ctx); err != nil || n != 3 {
			t.Fatalf("rows = %d, %v; want 3", n, err)
		}
	})
}

// SQLite has one writer: its ledger keeps one commit in flight whatever
// the options say, so that its writes wait their turn in the batcher and
// never on the busy timeout (which a loaded host can run out:
// SQLITE_BUSY).
func TestSQLiteKeepsOneCommitInFlight(t *testing.T) {
	for _, depth := range []int{0, 4} {
		l, _ := newLedger(t, testenv.SQLite(t), Options{GroupCommitDepth: depth})
		if l.opts.GroupCommitDepth != 1 {
			t.Errorf("SQLite with GroupCommitDepth %d: %d commits in flight, want 1", depth, l.opts.GroupCommitDepth)
		}
	}
}

// With two commits in flight (the default, MySQL), a record that arrives
// while one commit waits for the disk goes at once instead of waiting for
// it; what arrives while both are in flight shares the next.
func TestASecondCommitGoesWhileTheFirstIsInFlight(t *testing.T) {
	t.Run("mariadb", func(t *testing.T) {
		db := testenv.MySQL(t)
		ctx := testenv.Context(t)
		l, _ := newLedger(t, db, Options{})
		if l.opts.GroupCommitDepth != DefaultGroupCommitDepth || DefaultGroupCommitDepth != 2 {
			t.Fatalf("depth %d, default %d; this test is about 2", l.opts.GroupCommitDepth, DefaultGroupCommitDepth)
		}
		release := make(chan struct{})
		first := holdCommit(ctx, t, l, release)
		// The first commit is held: a record still commits, on its own.
		if err := opsOf(l).Record(ctx, []*queue.Job{job("gc", "a", 1)}, "w1"); err != nil {
			t.Fatal(err)
		}
		// Now hold both places: the writes that come wait, then share one.
		second := holdCommit(ctx, t, l, release)
		before := l.WriteStats()
		wait := inParallel(
			func() error { return opsOf(l).Record(ctx, []*queue.Job{job("gc", "b", 1)}, "w1") },
			func() error { return opsOf(l).Record(ctx, []*queue.Job{job("gc", "c", 1)}, "w1") },
		)
		testenv.WaitFor(ctx, t, "2 writes waiting", func() bool { return l.group.Waiting() == 2 }, nil)
		close(release)
		for _, held := range []<-chan error{first, second} {
			if err := testenv.Receive(ctx, t, held, "held commit"); err != nil {
				t.Fatal(err)
			}
		}
		wait(ctx, t)
		if got := l.WriteStats().Commits - before.Commits; got != 3 {
			t.Fatalf("commits = %d, want 3: the two held ones and one for the two writes that waited", got)
		}
		if n, err := l.Count(ctx); err != nil || n != 3 {
			t.Fatalf("rows = %d, %v; want 3", n, err)
		}
	})
}

func TestAFailingWriteInAGroupFailsOnlyItsCaller(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := testenv.Context(t)
		l, _ := newLedger(t, db, Options{GroupCommitDepth: 1})
		release := make(chan struct{})
		holdCommit(ctx, t, l, release)

		refused := errors.New("refused by the database")
		bad := make(chan error, 1)
		good := make(chan error, 1)
		go func() {
			bad <- l.commit(ctx, write{urgent: true, run: func(db *gorm.DB) error {
				// A real statement first, so that the group's transaction
				// has something to roll back.
				if err := db.Exec("DELETE FROM "+l.ledgerTable+" WHERE topic = ?", "none").Error; err != nil {
					return err
				}
				return refused
			}})
		}()
		testenv.WaitFor(ctx, t, "the bad write waiting", func() bool { return l.group.Waiting() == 1 }, nil)
		go func() { good <- opsOf(l).Record(ctx, []*queue.Job{job("gc", "a", 1)}, "w1") }()
		testenv.WaitFor(ctx, t, "both waiting", func() bool { return l.group.Waiting() == 2 }, nil)
		close(release)
		if err := testenv.Receive(ctx, t, bad, "bad write"); !errors.Is(err, refused) {
			t.Fatalf("bad write: %v, want its own error", err)
		}
		if err := testenv.Receive(ctx, t, good, "good write"); err != nil {
			t.Fatalf("good write failed with the bad one: %v", err)
		}
		if n, err := l.Count(ctx); err != nil || n != 1 {
			t.Fatalf("rows = %d, %v; want the good write's 1", n, err)
		}
	})
}

func TestSettlementsRideWithTheNextRecordWhileRecordsFlow(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := testenv.Context(t)
		// A linger far longer than the test: only the next record ends it.
		l, _ := newLedger(t, db, Options{GroupLinger: time.Hour})
		if err := opsOf(l).Record(ctx, []*queue.Job{job("gc", "a", 1)}, "w1"); err != nil {
			t.Fatal(err)
		}
		before := l.WriteStats()
		done := make(chan error, 1)
		go func() { done <- opsOf(l).Complete(ctx, []queue.Ref{{Topic: "gc", ID: "a", Attempt: 1}}) }()
		testenv.WaitFor(ctx, t, "the settlement lingering", func() bool { return l.group.Waiting() == 1 }, nil)
		if err := opsOf(l).Record(ctx, []*queue.Job{job("gc", "b", 1)}, "w1"); err != nil {
			t.Fatal(err)
		}
		if err := testenv.Receive(ctx, t, done, "settlement"); err != nil {
			t.Fatal(err)
		}
		if got := l.WriteStats().Commits - before.Commits; got != 1 {
			t.Fatalf("commits = %d, want 1: the settlement rides with the record", got)
		}
		if _, err := l.Row(ctx, "gc", "a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("row a: %v, want it deleted", err)
		}
	})
}

func TestSettlementsGoAtOnceWhenNoRecordsFlow(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := testenv.Context(t)
		l, _ := newLedger(t, db, Options{GroupLinger: time.Hour})
		// No record came: a settlement must not wait for one.
		if err := opsOf(l).Complete(ctx, []queue.Ref{{Topic: "gc", ID: "a", Attempt: 1}}); err != nil {
			t.Fatal(err)
		}
		if got := l.WriteStats().Commits; got != 1 {
			t.Fatalf("commits = %d, want 1", got)
		}
	})
}

func TestGroupCommitOff(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := testenv.Context(t)
		l, _ := newLedger(t, db, Options{GroupCommit: -1})
		if l.group != nil {
			t.Fatal("GroupCommit -1 still groups")
		}
		if err := opsOf(l).Record(ctx, []*queue.Job{job("gc", "a", 1)}, "w1"); err != nil {
			t.Fatal(err)
		}
		if err := opsOf(l).Complete(ctx, []queue.Ref{{Topic: "gc", ID: "a", Attempt: 1}}); err != nil {
			t.Fatal(err)
		}
		if s := l.WriteStats(); s.Commits != 2 || s.Writes != 2 {
			t.Fatalf("stats = %+v, want 2 commits for 2 writes", s)
		}
	})
}

func TestGroupCommitOptionIsValidated(t *testing.T) {
	if _, err := (Options{GroupCommit: -2}).withDefaults(); err == nil {
		t.Fatal("GroupCommit -2 accepted")
	}
	for _, d := range []int{-1, 17} {
		if _, err := (Options{GroupCommitDepth: d}).withDefaults(); err == nil {
			t.Fatalf("GroupCommitDepth %d accepted", d)
		}
	}
	o, err := (Options{}).withDefaults()
	if err != nil || o.GroupCommit != DefaultGroupCommit || o.GroupLinger != DefaultGroupLinger || o.GroupCommitDepth != DefaultGroupCommitDepth {
		t.Fatalf("defaults = %+v, %v", o, err)
	}
}

package ledger

import (
	"testing"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// Two of the ledger's commits that lock two rows in opposite orders
// deadlock on MariaDB: the victim runs again and succeeds, and
// WriteStats counts the deadlock and both commits.
func TestWriteStatsCountsADeadlockAndItsRetry(t *testing.T) {
	ctx := testenv.Context(t)
	l, _ := newLedger(t, testenv.MySQL(t), Options{})
	if err := opsOf(l).Record(ctx, []*queue.Job{job("dl", "a", 1), job("dl", "b", 1)}, "w1"); err != nil {
		t.Fatal(err)
	}
	before := l.WriteStats()
	lock := func(tx *gorm.DB, id string) error {
		return tx.Exec("UPDATE "+l.ledgerTable+" SET worker = ? WHERE topic = 'dl' AND job_id = ?", "w-"+id, id).Error
	}
	// Each transaction locks its first row, then waits until the other
	// holds its own before reaching for it; only the first try of each
	// waits, so the victim's retry goes straight through.
	firstHeld := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	tries := [2]int{}
	order := [2][2]string{{"a", "b"}, {"b", "a"}}
	errs := make(chan error, 2)
	for i := range 2 {
		go func() {
			errs <- l.transaction(ctx, func(tx *gorm.DB) error {
				tries[i]++
				if err := lock(tx, order[i][0]); err != nil {
					return err
				}
				if tries[i] == 1 {
					close(firstHeld[i])
					select {
					case <-firstHeld[1-i]:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				return lock(tx, order[i][1])
			})
		}()
	}
	for range 2 {
		if err := testenv.Receive(ctx, t, errs, "a transaction"); err != nil {
			t.Fatalf("a transaction failed: %v (the deadlock victim should run again)", err)
		}
	}
	s := l.WriteStats()
	if d := s.Deadlocks - before.Deadlocks; d != 1 {
		t.Fatalf("deadlocks counted %d, want 1", d)
	}
	if c := s.Commits - before.Commits; c != 2 {
		t.Fatalf("commits counted %d, want 2 (the victim's retry counts once)", c)
	}
}

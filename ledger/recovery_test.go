package ledger

import (
	"context"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/queue"
)

// The recoverer's queries: rows per topic, and claims read again by id,
// rows gone left out.
func TestTopicCountsAndClaims(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		a, b, c := job("t1", "a", 2), job("t1", "b", 1), job("t2", "c", 1)
		mustRecord(t, l, "h:1", a, b, c)
		if err := opsOf(l).MarkRetrying(ctx, []dataplane.RetryRequest{{Ref: b.Ref(), RunAt: 5, LeaseUntil: 6, Error: "e"}}); err != nil {
			t.Fatal(err)
		}
		counts, err := l.TopicCounts(ctx)
		if err != nil || len(counts) != 2 || counts["t1"] != 2 || counts["t2"] != 1 {
			t.Fatalf("TopicCounts = %v, %v", counts, err)
		}
		ea, eb := mustRow(t, l, "t1", "a"), mustRow(t, l, "t1", "b")
		if err := opsOf(l).Complete(ctx, []queue.Ref{c.Ref()}); err != nil {
			t.Fatal(err)
		}
		ec := int64(1 << 40) // no such row
		claims, err := opsOf(l).Claims(ctx, []int64{ea.ID, eb.ID, ec})
		if err != nil || len(claims) != 2 {
			t.Fatalf("Claims = %v, %v", claims, err)
		}
		if got := claims[ea.ID]; got.Attempt != 2 || got.ClaimedAt != ea.ClaimedAt || got.State != queue.StateInFlight {
			t.Errorf("claim of a: %+v", got)
		}
		if got := claims[eb.ID]; got.State != queue.StateRetrying || got.RunAt != 5 || got.LeaseUntil != 6 || got.LastError != "e" {
			t.Errorf("claim of b: %+v", got)
		}
	})
}

func TestPingAndDrop(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{TablePrefix: "sandbox_"})
		if err := l.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Drop(ctx); err != nil {
			t.Fatal(err)
		}
		// Every table Migrate made goes: none with the prefix is left.
		tables, err := db.Migrator().GetTables()
		if err != nil {
			t.Fatal(err)
		}
		for _, table := range tables {
			if strings.HasPrefix(table, "sandbox_") {
				t.Errorf("%s still there after Drop", table)
			}
		}
	})
}

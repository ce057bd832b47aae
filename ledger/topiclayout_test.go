package ledger

import (
	"context"
	"slices"
	"sync"
	"testing"

	"gorm.io/gorm"
)

// AddLayouts keeps the union of every count added, also when raises race;
// Layouts lists every partitioned topic; a row written for its layouts is
// no pause (TopicStates leaves it out), and a pause keeps its layouts.
func TestAddLayouts(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		if got, err := l.AddLayouts(ctx, "t", []int{1, 4}); err != nil || !slices.Equal(got, []int{1, 4}) {
			t.Fatalf("first add: %v, %v", got, err)
		}
		var wg sync.WaitGroup
		for _, k := range []int{8, 16, 8, 32} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := l.AddLayouts(ctx, "t", []int{1, 4, k}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if _, err := l.AddLayouts(ctx, "u", []int{1, 2}); err != nil {
			t.Fatal(err)
		}
		got, err := l.Layouts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got["t"], []int{1, 4, 8, 16, 32}) || !slices.Equal(got["u"], []int{1, 2}) || len(got) != 2 {
			t.Fatalf("layouts %v, want t 1,4,8,16,32 and u 1,2", got)
		}
		if states, err := l.TopicStates(ctx); err != nil || len(states) != 0 {
			t.Fatalf("pause states %+v (%v), want none: no topic was paused", states, err)
		}
		if _, _, err := l.SetPaused(ctx, "u", true, "test"); err != nil {
			t.Fatal(err)
		}
		if states, err := l.TopicStates(ctx); err != nil || len(states) != 1 || !states[0].Paused || states[0].Topic != "u" {
			t.Fatalf("pause states %+v (%v), want u paused", states, err)
		}
		if got, _ := l.Layouts(ctx); !slices.Equal(got["u"], []int{1, 2}) {
			t.Fatalf("u's layouts after its pause: %v", got["u"])
		}
		for _, bad := range [][]int{{0}, {257}, {-1}} {
			if _, err := l.AddLayouts(ctx, "t", bad); err == nil {
				t.Errorf("AddLayouts(%v) accepted", bad)
			}
		}
	})
}

package dataplane_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
)

// Eight claimers racing over 10,000 due jobs: every job is handed out
// exactly once.
func TestConcurrentClaimHandsOutEachJobOnce(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		const total, claimers = 10_000, 8
		for start := 0; start < total; start += 1000 {
			batch := make([]dataplane.NewJob, 1000)
			for i := range batch {
				batch[i] = dataplane.NewJob{ID: fmt.Sprintf("j%05d", start+i)}
			}
			if _, err := e.c.EnqueueBatch(testenv.Context(t), "t", batch); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		seen := make(map[string]int, total)
		var wg sync.WaitGroup
		errs := make(chan error, claimers)
		for w := 0; w < claimers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					c, err := e.c.Claim(testenv.Context(t), "t", 37, time.Minute)
					if err != nil {
						errs <- err
						return
					}
					if len(c.Jobs) == 0 {
						return
					}
					mu.Lock()
					for _, j := range c.Jobs {
						seen[j.ID]++
					}
					mu.Unlock()
					if _, err := e.c.Ack(testenv.Context(t), refs(c.Jobs)); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if len(seen) != total {
			t.Fatalf("%d distinct jobs claimed, want %d", len(seen), total)
		}
		for id, n := range seen {
			if n != 1 {
				t.Fatalf("job %s claimed %d times", id, n)
			}
		}
		if st, _ := e.c.Stats(testenv.Context(t), "t"); st.Due != 0 || st.InFlight != 0 {
			t.Fatalf("left over: %+v", st)
		}
	})
}

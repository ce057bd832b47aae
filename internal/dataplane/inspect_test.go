package dataplane_test

import (
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
)

func TestGetUnknown(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		if info := mustGet(t, e, "t", "nope"); info.State != dataplane.StateUnknown || info.Job != nil {
			t.Fatalf("unknown job: %+v", info)
		}
	})
}

func TestStats(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		st, err := e.c.Stats(ctx, "empty")
		if err != nil || st.Due != 0 || st.NextDue != 0 || st.OldestOverdueMs != 0 {
			t.Fatalf("empty topic stats %+v, %v", st, err)
		}
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "a"})
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "b"})
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "c", Delay: time.Hour})
		if c := mustClaim(t, e, "t", 1, time.Minute); len(c.Jobs) != 1 || c.Jobs[0].ID != "a" {
			t.Fatalf("claimed %v", c.Jobs)
		}
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "d"})
		next := mustGet(t, e, "t", "b").Score
		waitRedisPast(t, e, next+5)
		st, err = e.c.Stats(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		if st.Due != 3 || st.DueNow != 2 || st.InFlight != 1 || st.Dead != 0 {
			t.Fatalf("stats %+v", st)
		}
		if st.OldestOverdueMs < 5 || st.OldestOverdueMs != st.Now-st.NextDue {
			t.Fatalf("oldest overdue %d ms (now %d, next due %d)", st.OldestOverdueMs, st.Now, st.NextDue)
		}
	})
}

// Ping, Time and Lock are what the recoverer, the sweeper and the readiness
// probe need of Redis, so none of them takes the raw client.
func TestPingTimeLock(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		if err := e.c.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		now, err := e.c.Time(ctx)
		if err != nil || now.Sub(time.Now()).Abs() > time.Minute {
			t.Fatalf("Time = %s, %v", now, err)
		}
		a, b := e.c.Lock(e.ns+":lock", time.Minute), e.c.Lock(e.ns+":lock", time.Minute)
		if ok, err := a.TryAcquire(ctx); !ok || err != nil {
			t.Fatalf("first acquire: %v, %v", ok, err)
		}
		if ok, err := b.TryAcquire(ctx); ok || err != nil {
			t.Fatalf("second acquire: %v, %v; want held", ok, err)
		}
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

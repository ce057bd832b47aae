package dataplane_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
)

// buryN enqueues, claims and buries n jobs of topic.
func buryN(t *testing.T, e env, topic string, n int) {
	t.Helper()
	for start := 0; start < n; start += 1000 {
		jobs := make([]dataplane.NewJob, 0, 1000)
		for i := start; i < min(n, start+1000); i++ {
			jobs = append(jobs, dataplane.NewJob{ID: fmt.Sprintf("d%d", i), MaxAttempts: 2})
		}
		if _, err := e.c.EnqueueBatch(testenv.Context(t), topic, jobs); err != nil {
			t.Fatal(err)
		}
	}
	for {
		c := mustClaim(t, e, topic, 1000, time.Minute)
		if len(c.Jobs) == 0 {
			return
		}
		reqs := make([]dataplane.DeadJob, len(c.Jobs))
		for i, j := range c.Jobs {
			reqs[i] = dataplane.DeadJob{Job: j, Error: "boom"}
		}
		if _, _, err := e.c.Bury(testenv.Context(t), reqs); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRequeueDeadOne(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		buryN(t, e, "t", 2)
		if err := e.c.RequeueDead(testenv.Context(t), "t", "d0"); err != nil {
			t.Fatal(err)
		}
		if err := e.c.RequeueDead(testenv.Context(t), "t", "d0"); !errors.Is(err, dataplane.ErrNotFound) {
			t.Fatalf("second requeue: %v, want ErrNotFound", err)
		}
		info := mustGet(t, e, "t", "d0")
		if info.State != dataplane.StateWaiting || info.Job.Attempt != 0 || info.Job.LastError != "boom" {
			t.Fatalf("requeued job %s %+v", info.State, info.Job)
		}
		c := mustClaim(t, e, "t", 10, time.Minute)
		if len(c.Jobs) != 1 || c.Jobs[0].ID != "d0" || c.Jobs[0].Attempt != 1 {
			t.Fatalf("claimed %+v after requeue", c.Jobs)
		}
		if info := mustGet(t, e, "t", "d1"); info.State != dataplane.StateDead {
			t.Fatalf("d1 %s, want still dead", info.State)
		}
	})
}

func TestRequeueAllDeadInChunks(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		buryN(t, e, "t", 1234) // more than one chunk
		n, err := e.c.RequeueAllDead(testenv.Context(t), "t")
		if err != nil || n != 1234 {
			t.Fatalf("requeue all = %d, %v", n, err)
		}
		st, _ := e.c.Stats(testenv.Context(t), "t")
		if st.Dead != 0 || st.DueNow != 1234 {
			t.Fatalf("stats %+v", st)
		}
	})
}

func TestPurgeDeadOlderThan(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		buryN(t, e, "t", 600)
		cut := redisNow(t, e)
		waitRedisPast(t, e, cut)
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "young"})
		y := mustClaim(t, e, "t", 1, time.Minute)
		if _, _, err := e.c.Bury(testenv.Context(t), []dataplane.DeadJob{{Job: y.Jobs[0], Error: "r"}}); err != nil {
			t.Fatal(err)
		}
		n, err := e.c.PurgeDead(testenv.Context(t), "t", cut)
		if err != nil || n != 600 {
			t.Fatalf("purge = %d, %v; want the 600 that died before the cut", n, err)
		}
		if info := mustGet(t, e, "t", "d3"); info.State != dataplane.StateUnknown {
			t.Fatalf("purged job still %s", info.State)
		}
		if info := mustGet(t, e, "t", "young"); info.State != dataplane.StateDead {
			t.Fatalf("young dead job %s, want kept", info.State)
		}
	})
}

func TestDeleteDeadOne(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		buryN(t, e, "t", 2)
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "alive", Delay: time.Hour})
		if err := e.c.DeleteDead(testenv.Context(t), "t", "d0"); err != nil {
			t.Fatal(err)
		}
		if info := mustGet(t, e, "t", "d0"); info.State != dataplane.StateUnknown {
			t.Fatalf("deleted dead job is %s", info.State)
		}
		if err := e.c.DeleteDead(testenv.Context(t), "t", "d0"); !errors.Is(err, dataplane.ErrNotFound) {
			t.Fatalf("second delete: %v, want ErrNotFound", err)
		}
		// A waiting job is not dead: refused, left alone.
		if err := e.c.DeleteDead(testenv.Context(t), "t", "alive"); !errors.Is(err, dataplane.ErrNotFound) {
			t.Fatalf("delete of a waiting job: %v, want ErrNotFound", err)
		}
		if info := mustGet(t, e, "t", "alive"); info.State != dataplane.StateWaiting {
			t.Fatalf("waiting job after a refused delete: %s", info.State)
		}
		if info := mustGet(t, e, "t", "d1"); info.State != dataplane.StateDead {
			t.Fatalf("d1 %s, want still dead", info.State)
		}
		if err := e.c.DeleteDead(testenv.Context(t), "t", ""); err == nil {
			t.Fatal("an empty id was accepted")
		}
	})
}

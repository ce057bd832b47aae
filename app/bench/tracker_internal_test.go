package bench

import (
	"context"
	"testing"
	"time"

	"github.com/delayq/delayq/queue"
)

// The tracker counts from what its handler saw: a second run is a
// duplicate, a job never run is missing, a run before the due time is early,
// an id it never accepted is stray.
func TestTrackerCounts(t *testing.T) {
	tr := newTracker(5, false, true, 0)
	for _, k := range []int{0, 1, 2, 3} {
		tr.accept(k)
	}
	tr.seal()
	now := time.Now().UnixMilli()
	run := func(id string, runAt int64) {
		if err := tr.Handle(context.Background(), &queue.Job{ID: id, RunAt: runAt}); err != nil {
			t.Fatal(err)
		}
	}
	run("j0", now-5)
	run("j0", now-5)      // duplicate
	run("j1", now+60_000) // early
	run("j2", now)
	run("j4", now)  // not accepted: stray
	run("bogus", 0) // not ours: stray
	run("j99", now) // out of range: stray
	var r Result
	tr.tally(&r)
	want := Result{Jobs: 4, Handled: 3, Duplicates: 1, Missing: 1, Early: 1, Stray: 3}
	if r.Jobs != want.Jobs || r.Handled != want.Handled || r.Duplicates != want.Duplicates ||
		r.Missing != want.Missing || r.Early != want.Early || r.Stray != want.Stray {
		t.Errorf("tally = %+v, want %+v", r, want)
	}
	if got := len(tr.lateness()); got != 3 {
		t.Errorf("lateness of %d jobs, want 3", got)
	}
	select {
	case <-tr.all:
		t.Error("all closed with a job missing")
	default:
	}
	run("j3", now)
	select {
	case <-tr.all:
	default:
		t.Error("all not closed once every accepted job ran")
	}
}

// wait gives up after a stall, but not before quietUntil.
func TestTrackerWaitStall(t *testing.T) {
	tr := newTracker(1, true, false, 0)
	start := time.Now()
	all, err := tr.wait(context.Background(), start.Add(300*time.Millisecond), 200*time.Millisecond)
	if err != nil || all {
		t.Fatalf("wait = %v, %v; want a stall", all, err)
	}
	if took := time.Since(start); took < 500*time.Millisecond {
		t.Errorf("gave up after %s, before quietUntil + stall", took)
	}
}

func TestLatencyOf(t *testing.T) {
	us := make([]int64, 0, 1000)
	for i := 1000; i >= 1; i-- {
		us = append(us, int64(i)*1000) // 1..1000 ms, reversed
	}
	l := latencyOf(us)
	if l.P50 < 499 || l.P50 > 501 || l.P99 < 989 || l.P99 > 991 || l.Max != 1000 || l.Min != 1 || l.N != 1000 {
		t.Errorf("latencyOf = %+v", l)
	}
	if latencyOf(nil) != nil {
		t.Error("latencyOf(nil) != nil")
	}
}

func TestThousands(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 18234.4: "18,234", 1234567: "1,234,567", -1500: "-1,500"} {
		if got := thousands(v); got != want {
			t.Errorf("thousands(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestJobIndex(t *testing.T) {
	for id, want := range map[string]int{"j0": 0, "j123": 123} {
		if k, ok := jobIndex(id); !ok || k != want {
			t.Errorf("jobIndex(%q) = %d, %v", id, k, ok)
		}
	}
	for _, id := range []string{"", "j", "x1", "j-1", "jx"} {
		if _, ok := jobIndex(id); ok {
			t.Errorf("jobIndex(%q) accepted", id)
		}
	}
	if jobID(42) != "j42" {
		t.Errorf("jobID(42) = %q", jobID(42))
	}
}

package main

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// Bad flags are usage errors (exit 2), before any connection.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"enqueue"},
		{"drain", "-n", "0"},
		{"drain", "-c", "-1"},
		{"lateness", "--window", "0s"},
		{"drain", "extra"},
		{"drain", "--no-such-flag"},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errOut.String())
		}
	}
}

// The tracker counts each task once, its duplicates and the missing ones,
// and the lateness of its first run.
func TestTracker(t *testing.T) {
	tr := newTracker(3)
	base := time.UnixMilli(1_000_000)
	tr.due = func(k int) int64 { return base.UnixMilli() + int64(k)*1000 }
	tr.handle("j0", base.Add(2*time.Millisecond))
	tr.handle("j0", base.Add(5*time.Millisecond))
	tr.handle("j2", base.Add(1999*time.Millisecond)) // 1 ms early
	tr.handle("x", base)
	var r result
	tr.tally(&r)
	if r.Handled != 2 || r.Duplicates != 1 || r.Missing != 1 || r.Early != 1 || len(r.Notes) != 1 {
		t.Errorf("tally %+v: want 2 handled, 1 duplicate, 1 missing, 1 early, a note on the stray run", r)
	}
	if l := latencyOf(tr.lateness()); l == nil || l.N != 2 || l.Min != -1 || l.Max != 2 {
		t.Errorf("lateness %+v: want -1 and 2 ms", l)
	}
}

// Costs are deltas per task; the probes' own INFO is not counted.
func TestCosts(t *testing.T) {
	now := time.Now()
	a := probe{at: now, cpu: time.Second, redisCPU: 1, calls: map[string]int64{"evalsha": 5, "info": 2}}
	b := probe{at: now.Add(time.Second), cpu: 2 * time.Second, redisCPU: 1.5, calls: map[string]int64{"evalsha": 205, "info": 4, "zadd": 100}}
	c := costsBetween(a, b, 100)
	if *c.RedisCommands != 300 || *c.RedisScriptCalls != 200 || *c.RedisCommandsPerJob != 3 || *c.RedisScriptCallsPerJob != 2 ||
		c.ProcessCPUUsPerJob != 10_000 || *c.RedisCPUUsPerJob != 5000 {
		t.Errorf("costs %+v", c)
	}
}

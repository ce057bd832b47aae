package recoverer_test

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// memSampler reads the resident memory (VmRSS) of the soak's processes
// every interval, so the report can give each one's peak and tell a
// process whose memory keeps growing.
type memSampler struct {
	mu    sync.Mutex
	procs map[string]*memTrack
}

// memTrack is one process's samples.
type memTrack struct {
	pid     int
	samples []memSample
}

type memSample struct {
	at  time.Time
	rss int64 // bytes
}

func newMemSampler() *memSampler { return &memSampler{procs: map[string]*memTrack{}} }

// watch adds a process under name.
func (m *memSampler) watch(name string, pid int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.procs[name] = &memTrack{pid: pid}
}

// run samples every interval until ctx ends.
func (m *memSampler) run(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		m.sample()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (m *memSampler) sample() {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for _, p := range m.procs {
		if rss, ok := readRSS(p.pid); ok {
			p.samples = append(p.samples, memSample{at: now, rss: rss})
		}
	}
}

// readRSS returns a process's VmRSS from /proc; false once it is gone.
func readRSS(pid int) (int64, bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// memReport is one process's figures.
type memReport struct {
	name      string
	peak      int64
	early     int64 // the highest sample in the second quarter of the run
	late      int64 // the highest sample in the last quarter
	wholeRun  bool  // sampled in both quarters
	growthBad bool
}

// report sums up each process over the run [from, to]: a process that was
// there for the second and the last quarter fails the growth check when
// its late peak is over twice its early peak plus 64 MiB (a leak keeps
// growing; a warm heap and the race detector's shadow memory level off).
// "There" means running since the first quarter: one restarted during the
// second (after a fault) is sampled there before it warmed up, and its
// first megabytes are not a baseline (CI saw 9 MiB, then the 101 MiB every
// other worker had all along).
func (m *memSampler) report(from, to time.Time) []memReport {
	m.mu.Lock()
	defer m.mu.Unlock()
	span := to.Sub(from)
	q1, q2, q3 := from.Add(span/4), from.Add(span/2), from.Add(span*3/4)
	var out []memReport
	for name, p := range m.procs {
		r := memReport{name: name}
		var inEarly, inLate bool
		for _, s := range p.samples {
			r.peak = max(r.peak, s.rss)
			if !s.at.Before(q1) && s.at.Before(q2) {
				r.early, inEarly = max(r.early, s.rss), true
			}
			if !s.at.Before(q3) {
				r.late, inLate = max(r.late, s.rss), true
			}
		}
		r.wholeRun = inEarly && inLate && len(p.samples) > 0 && p.samples[0].at.Before(q1)
		r.growthBad = r.wholeRun && r.late > 2*r.early+64<<20
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// The growth check: a process running from the start whose memory keeps
// growing fails it; one restarted during the second quarter, sampled there
// before it warmed up, does not.
func TestSoakMemoryGrowthCheck(t *testing.T) {
	from := time.Unix(1_000_000, 0)
	at := func(s int) time.Time { return from.Add(time.Duration(s) * time.Second) }
	const mib = 1 << 20
	m := newMemSampler()
	m.procs["leaking"] = &memTrack{samples: []memSample{{at(5), 20 * mib}, {at(30), 20 * mib}, {at(90), 200 * mib}}}
	m.procs["restarted"] = &memTrack{samples: []memSample{{at(45), 9 * mib}, {at(90), 101 * mib}}}
	m.procs["steady"] = &memTrack{samples: []memSample{{at(5), 90 * mib}, {at(30), 95 * mib}, {at(90), 101 * mib}}}
	bad := map[string]bool{}
	for _, r := range m.report(from, at(100)) {
		bad[r.name] = r.growthBad
	}
	if want := map[string]bool{"leaking": true, "restarted": false, "steady": false}; !maps.Equal(bad, want) {
		t.Fatalf("growth flagged %v, want %v", bad, want)
	}
}

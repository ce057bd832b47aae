package recovery_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
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
		r.wholeRun = inEarly && inLate
		r.growthBad = r.wholeRun && r.late > 2*r.early+64<<20
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

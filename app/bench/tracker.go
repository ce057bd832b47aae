package bench

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq/queue"
)

// jobID names the k-th job of a run; jobIndex reads k back.
func jobID(k int) string { return "j" + strconv.Itoa(k) }

func jobIndex(id string) (int, bool) {
	if len(id) < 2 || id[0] != 'j' {
		return 0, false
	}
	k, err := strconv.Atoi(id[1:])
	return k, err == nil && k >= 0
}

// tracker counts what the handlers saw of a run's jobs: how often each job
// ran, whether it started early, and (when recording) how late its first
// run started. Its handler is cheap: a few atomic operations per job.
type tracker struct {
	counts   []atomic.Uint32
	accepted []bool  // nil: every job counts; else only these (set before any handler runs)
	late     []int64 // µs, first run's start minus due time; nil unless recording
	offset   int64   // Redis's clock minus the local one, µs
	want     int64   // accepted jobs

	distinct, early, stray atomic.Int64
	all                    chan struct{} // closed when every accepted job ran once
	allOnce                sync.Once
}

// newTracker tracks n jobs. With all set, every one of them counts as
// accepted from the start (the handlers may run while jobs are still being
// enqueued); otherwise mark them with accept and call seal before any
// handler runs.
func newTracker(n int, all, recordLateness bool, offset int64) *tracker {
	t := &tracker{counts: make([]atomic.Uint32, n), offset: offset, all: make(chan struct{})}
	if all {
		t.want = int64(n)
	} else {
		t.accepted = make([]bool, n)
	}
	if recordLateness {
		t.late = make([]int64, n)
	}
	return t
}

// accept marks job k as accepted (enqueued). Distinct goroutines may mark
// distinct jobs at once.
func (t *tracker) accept(k int) { t.accepted[k] = true }

// seal counts the accepted jobs; call it after the last accept and before
// the handlers start.
func (t *tracker) seal() {
	if t.accepted != nil {
		t.want = 0
		for _, ok := range t.accepted {
			if ok {
				t.want++
			}
		}
	}
	if t.want == 0 {
		t.allOnce.Do(func() { close(t.all) })
	}
}

func (t *tracker) isAccepted(k int) bool { return t.accepted == nil || t.accepted[k] }

// Handle is the handler of every scenario: it notes the job and returns
// nil.
func (t *tracker) Handle(_ context.Context, j *queue.Job) error {
	lateUs := time.Now().UnixMicro() + t.offset - j.RunAt*1000
	k, ok := jobIndex(j.ID)
	if !ok || k >= len(t.counts) || !t.isAccepted(k) {
		t.stray.Add(1)
		return nil
	}
	if lateUs < 0 {
		t.early.Add(1)
	}
	if t.counts[k].Add(1) != 1 {
		return nil
	}
	if t.late != nil {
		t.late[k] = lateUs
	}
	if t.distinct.Add(1) == t.want {
		t.allOnce.Do(func() { close(t.all) })
	}
	return nil
}

// handled is how many accepted jobs ran at least once.
func (t *tracker) handled() int64 { return t.distinct.Load() }

// wait returns when every accepted job ran, when ctx ends, or when no new
// job ran for stall after quietUntil (before it, gaps are expected: jobs
// not due yet). It reports whether every job ran.
func (t *tracker) wait(ctx context.Context, quietUntil time.Time, stall time.Duration) (bool, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last, lastChange := t.handled(), time.Now()
	for {
		select {
		case <-t.all:
			return true, nil
		case <-ctx.Done():
			return false, ctx.Err()
		case now := <-tick.C:
			if n := t.handled(); n != last {
				last, lastChange = n, now
			}
			if since := lastChange; now.After(quietUntil) {
				if quietUntil.After(since) {
					since = quietUntil
				}
				if now.Sub(since) > stall {
					return false, nil
				}
			}
		}
	}
}

// tally writes the counts into r. Call it once the handlers stopped.
func (t *tracker) tally(r *Result) {
	r.Jobs = int(t.want)
	r.Handled = int(t.handled())
	r.Early = int(t.early.Load())
	r.Stray = int(t.stray.Load())
	r.Duplicates, r.Missing = 0, 0
	for k := range t.counts {
		if !t.isAccepted(k) {
			continue
		}
		switch c := t.counts[k].Load(); {
		case c == 0:
			r.Missing++
		case c > 1:
			r.Duplicates += int(c - 1)
		}
	}
}

// lateness returns the recorded lateness of the jobs that ran, in µs.
func (t *tracker) lateness() []int64 {
	out := make([]int64, 0, len(t.late))
	for k, v := range t.late {
		if t.isAccepted(k) && t.counts[k].Load() > 0 {
			out = append(out, v)
		}
	}
	return out
}

package recoverer_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// soakQuiet reports whether the soak has settled: every accepted job ran or
// died, the ledger is empty, and Redis holds nothing due or in flight.
func soakQuiet(t *testing.T, fdb faultDB, q *dataplane.Client, topics []string, accepted map[string]soakJob) bool {
	dies := 0
	for _, j := range accepted {
		if j.die {
			dies++
		}
	}
	if fdb.ledgerRows(t) != 0 ||
		fdb.count(t, "SELECT COUNT(DISTINCT job_id) FROM runs") < int64(len(accepted)-dies) ||
		fdb.count(t, "SELECT COUNT(*) FROM "+fdb.led.DeadLetterTable()) < int64(dies) {
		return false
	}
	for _, topic := range topics {
		st, err := q.Stats(testenv.Context(t), topic)
		if err != nil || st.Due != 0 || st.InFlight != 0 {
			return false
		}
	}
	return true
}

// soakState says what keeps a soak from quiescence: the ledger rows left
// (the first few, with their state and worker) and each topic's counts in
// Redis, with the jobs in flight.
func soakState(t *testing.T, fdb faultDB, q *dataplane.Client, topics []string) string {
	ctx := testenv.Context(t)
	var rows []struct {
		Topic, JobID, State, Worker  string
		Attempt                      int
		RunAt, ClaimedAt, LeaseUntil int64
	}
	err := fdb.db.WithContext(ctx).Raw("SELECT topic, job_id, state, worker, attempt, run_at, claimed_at, lease_until FROM " +
		fdb.led.LedgerTable() + " ORDER BY run_at LIMIT 5").Scan(&rows).Error
	s := fmt.Sprintf("%d ledger rows (%v), first: %+v", fdb.ledgerRows(t), err, rows)
	for _, topic := range topics {
		st, err := q.Stats(ctx, topic)
		if err != nil {
			s += fmt.Sprintf("; %s: %v", topic, err)
			continue
		}
		s += fmt.Sprintf("; %s: due %d, in flight %d", topic, st.Due, st.InFlight)
		if st.InFlight > 0 {
			if page, err := q.List(ctx, topic, queue.StateInFlight, 0, 5); err == nil {
				for _, j := range page.Jobs {
					s += fmt.Sprintf(" [%s attempt %d run_at %d lease %d]", j.Job.ID, j.Job.Attempt, j.Job.RunAt, j.Score)
				}
			}
		}
	}
	return s
}

// soakResult is what the database says about a soak run.
type soakResult struct {
	jobs, dies  int
	missing     []string
	duplicates  int // jobs that ran more than once
	extraRuns   int
	unexplained []string
	late        lateness // every job's first run
	lateCalm    lateness // jobs due while no fault was in effect
}

// lateness sums up how late first runs started after their due time.
type lateness struct {
	n             int
	p50, p99, max time.Duration
}

func latenessOf(late []time.Duration) lateness {
	slices.Sort(late)
	n := len(late)
	if n == 0 {
		return lateness{}
	}
	return lateness{n: n, p50: late[n/2], p99: late[min(n-1, n*99/100)], max: late[n-1]}
}

func (l lateness) String() string { return fmt.Sprintf("%s / %s / %s", l.p50, l.p99, l.max) }

type runRow struct {
	JobID      string
	Worker     string
	Attempt    int
	StartedMs  int64
	RunAt      int64
	Unrecorded int
}

// checkSoak compares the runs and dead letters with the accepted jobs and
// fails the test on any missing job, unexplained duplicate, run without a
// ledger row, wrong dead letter or leftover ledger row. A duplicate is
// explained by a fault in effect between two of the job's runs that began
// at most slack ms after the earlier one.
func checkSoak(t *testing.T, fdb faultDB, accepted map[string]soakJob, faults []faultEvent, slack int64) soakResult {
	var rows []runRow
	if err := fdb.db.WithContext(testenv.Context(t)).Raw("SELECT job_id, worker, attempt, started_ms, run_at, unrecorded FROM runs ORDER BY job_id, started_ms").
		Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	runs := map[string][]runRow{}
	for _, r := range rows {
		runs[r.JobID] = append(runs[r.JobID], r)
	}
	for id, rs := range runs {
		for _, r := range rs {
			if r.Unrecorded != 0 {
				t.Errorf("%s: a run started within its lease without its ledger row; the job's runs: %+v; faults: %+v", id, rs, faults)
				break
			}
		}
	}
	dead := fdb.ids(t, "SELECT job_id FROM "+fdb.led.DeadLetterTable())
	res := soakResult{jobs: len(accepted)}
	var late, calm []time.Duration
	for id, j := range accepted {
		rs := runs[id]
		if j.die {
			res.dies++
			if len(rs) != 0 {
				t.Errorf("%s was designed to die but ran", id)
			}
			if !dead[id] {
				t.Errorf("%s was designed to die but is no dead letter", id)
			}
			continue
		}
		if dead[id] {
			t.Errorf("%s is a dead letter but was not designed to die", id)
		}
		if len(rs) == 0 {
			res.missing = append(res.missing, id)
			continue
		}
		if first := rs[0]; first.Attempt == 1 {
			d := time.Duration(first.StartedMs-first.RunAt) * time.Millisecond
			late = append(late, d)
			// A fault delays the jobs due shortly before it (claimed by a
			// worker that then died), during it, and for a lease or so
			// after (a dead worker's claims wait out their lease).
			if !slices.ContainsFunc(faults, func(f faultEvent) bool {
				return first.RunAt >= f.start-slack && first.RunAt <= f.end+slack
			}) {
				calm = append(calm, d)
			}
		}
		if len(rs) > 1 {
			res.duplicates++
			res.extraRuns += len(rs) - 1
		}
		for i := 1; i < len(rs); i++ {
			if !slices.ContainsFunc(faults, func(f faultEvent) bool { return f.explains(rs[i-1].StartedMs, rs[i].StartedMs, slack) }) {
				res.unexplained = append(res.unexplained, fmt.Sprintf("%s ran at %d and %d", id, rs[i-1].StartedMs, rs[i].StartedMs))
			}
		}
	}
	for id := range runs {
		if _, ok := accepted[id]; !ok {
			t.Errorf("%s ran but the API never accepted it", id)
		}
	}
	if n := fdb.ledgerRows(t); n != 0 {
		t.Errorf("%d ledger rows left", n)
	}
	if len(res.missing) != 0 {
		slices.Sort(res.missing)
		t.Errorf("%d jobs missing, e.g. %v", len(res.missing), res.missing[:min(5, len(res.missing))])
	}
	if len(res.unexplained) != 0 {
		t.Errorf("%d duplicate runs no fault explains, e.g. %v", len(res.unexplained), res.unexplained[:min(5, len(res.unexplained))])
	}
	res.late, res.lateCalm = latenessOf(late), latenessOf(calm)
	return res
}

// printTable logs the soak's figures and fails the test on a process whose
// memory grew without bound.
func (r soakResult) printTable(t *testing.T, cfg soakConfig, faults []faultEvent, mem []memReport, load, settle time.Duration) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nsoak: %s of load at %d jobs/s, %d workers, seed %d; settled %s after the load\n",
		load.Round(time.Second), cfg.rate, cfg.workers, cfg.seed, settle.Round(time.Second))
	fmt.Fprintf(&b, "%-34s %10s\n", "jobs accepted", fmt.Sprint(r.jobs))
	fmt.Fprintf(&b, "%-34s %10s\n", "  designed to die (dead letters)", fmt.Sprint(r.dies))
	for _, k := range faultKinds {
		n := 0
		for _, f := range faults {
			if f.kind == k {
				n++
			}
		}
		fmt.Fprintf(&b, "%-34s %10d\n", "fault: "+string(k), n)
	}
	fmt.Fprintf(&b, "%-34s %10d\n", "missing", len(r.missing))
	fmt.Fprintf(&b, "%-34s %10s\n", "duplicates (jobs / extra runs)", fmt.Sprintf("%d / %d", r.duplicates, r.extraRuns))
	fmt.Fprintf(&b, "%-34s %10d\n", "duplicates no fault explains", len(r.unexplained))
	fmt.Fprintf(&b, "%-34s %10s\n", "lateness p50 / p99 / max", r.late)
	fmt.Fprintf(&b, "%-34s %10s\n", fmt.Sprintf("  of the %d jobs due off faults", r.lateCalm.n), r.lateCalm)
	fmt.Fprintf(&b, "%-34s %10s %10s %10s\n", "process", "peak RSS", "2nd qtr", "last qtr")
	for _, m := range mem {
		flag := ""
		if m.growthBad {
			flag = "  GROWING"
			t.Errorf("%s: memory grew from %d MiB to %d MiB", m.name, m.early>>20, m.late>>20)
		}
		early, late := "-", "-"
		if m.wholeRun {
			early, late = fmt.Sprintf("%d MiB", m.early>>20), fmt.Sprintf("%d MiB", m.late>>20)
		}
		fmt.Fprintf(&b, "%-34s %10s %10s %10s%s\n", m.name, fmt.Sprintf("%d MiB", m.peak>>20), early, late, flag)
	}
	t.Log(b.String())
}

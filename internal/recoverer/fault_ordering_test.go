package recoverer_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// orderedRun is one run of the durable fault handler's log.
type orderedRun struct {
	Job      string
	Attempt  int
	Start    int64
	End      *int64
	Worker   string
	Due, Seq int64
}

// TestFaultOrderingKeys (docs/design.md §4.24): jobs of a durable topic
// over ordering keys, enqueued in a shuffled order, run by worker
// processes; a third of the way through one worker is SIGKILLed and then
// Redis is killed and restarted empty. Every job has one effect; for every
// key no two runs of different jobs overlap (a run ends when its effect
// commits, or when its process was killed) and its jobs first start in due
// order; the first job of one key fails every run until it dies, which
// holds its key alone: the key's next job starts after its death, and
// other keys run meanwhile. With DELAYQ_CHAOS=long (make chaos) the
// issue's size: 20,000 jobs over 200 keys, four processes of 50 handlers.
func TestFaultOrderingKeys(t *testing.T) {
	n, keys := scale(2000, 20000), scale(40, 200)
	procs, concurrency := scale(2, 4), scale(20, 50)
	perKey := n / keys
	srv := testenv.StartRedis(t, testenv.RedisOptions{})
	rdb := srv.Client(t)
	ddb := newDurableDB(t)
	q, err := durableClient(rdb, "dq", durableFaultTopic, ddb.led, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	workers := durableWorkers(t, procs, durableWorkerSpec{
		RedisAddr: srv.Addr, Namespace: "dq", DSN: ddb.dsn, Topic: durableFaultTopic, Horizon: time.Hour,
		Concurrency: concurrency, Lease: 3 * time.Second, Schedule: "@every 1s", Grace: 3 * time.Second, MaxConns: 12,
	})

	// Job i of key k is due at base + i ms: a key's jobs in due order are
	// its jobs by index, and all of them wait to be due until every one is
	// enqueued. key0's job 0 fails every run (three attempts).
	lead := time.Duration(scale(3000, 15000)) * time.Millisecond
	base := redisMillis(t, rdb) + lead.Milliseconds()
	jobs := make([]queue.NewJob, 0, n)
	due := map[string]int64{}
	keyOf := map[string]int{}
	var all []string
	const failing = "o0-0"
	for k := range keys {
		for i := range perKey {
			id := fmt.Sprintf("o%d-%d", k, i)
			p, _ := json.Marshal(durablePayload{Due: base + int64(i), Fail: id == failing, Sleep: 2})
			j := queue.NewJob{ID: id, Payload: p, RunAt: base + int64(i), MaxAttempts: 10, OrderingKey: fmt.Sprintf("key%d", k)}
			if id == failing {
				j.MaxAttempts = 3
			} else {
				all = append(all, id)
			}
			jobs = append(jobs, j)
			due[id], keyOf[id] = base+int64(i), k
		}
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(jobs), func(a, b int) { jobs[a], jobs[b] = jobs[b], jobs[a] })
	began := time.Now()
	enqueueDurable(t, q, jobs)
	if k := redisMillis(t, rdb); k >= base {
		t.Fatalf("the enqueues (%s) ended %d ms after the first due time", time.Since(began), k-base)
	}

	// A third of the way: SIGKILL one worker, then Redis dies and comes
	// back empty.
	ctx := testenv.Context(t)
	testenv.WaitFor(ctx, t, "a third of the jobs done", func() bool { return ddb.effects(t) >= int64(n/3) })
	workers[0].kill(t)
	killedAt := redisMillis(t, rdb)
	srv.Kill(t)
	testenv.WaitFor(ctx, t, "half a second of outage", func() bool { return time.Now().UnixMilli() >= killedAt+500 })
	restartAt := time.Now().UnixMilli() // the same host's clock as Redis's
	srv.Restart(t)
	t.Logf("%s SIGKILLed and Redis restarted empty %d ms after the first due time, %d effects", workers[0].name, killedAt-base, ddb.effects(t))

	limit := time.Duration(scale(120, 900)) * time.Second
	testenv.WaitFor(testenv.ContextTimeout(t, limit), t, fmt.Sprintf("%d effects and the ledger empty", len(all)), func() bool {
		return ddb.effects(t) >= int64(len(all)) && ddb.ledgerRows(t) == 0
	}, func() string { return fmt.Sprintf("%d effects, %d ledger rows", ddb.effects(t), ddb.ledgerRows(t)) })
	for _, w := range workers[1:] {
		w.stop(t, 30*time.Second)
		w.checkNoRace(t)
	}
	var rows []struct {
		JobID, Worker string
		Attempt       int
		StartMs       int64
		EndMs         *int64
	}
	if err := ddb.db.WithContext(ctx).Raw("SELECT job_id, worker, attempt, start_ms, end_ms FROM durable_runs").Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	byKey := make([][]orderedRun, keys)
	first, last := int64(0), int64(0)
	bad := 0
	fail := func(format string, args ...any) {
		if bad++; bad <= 10 {
			t.Errorf(format, args...)
		}
	}
	for _, r := range rows {
		run := orderedRun{Job: r.JobID, Attempt: r.Attempt, Start: r.StartMs, End: r.EndMs, Worker: r.Worker, Due: due[r.JobID]}
		if run.End == nil {
			if r.Worker != workers[0].name {
				fail("%s's run %d on %s never ended", r.JobID, r.Attempt, r.Worker)
				continue
			}
			run.End = &killedAt // cut by the SIGKILL
		}
		byKey[keyOf[r.JobID]] = append(byKey[keyOf[r.JobID]], run)
		first, last = cmp.Or(min(first, run.Start), run.Start), max(last, *run.End)
	}
	// Jobs in flight at a fault may run again; none other.
	mayRepeat := map[string]bool{}
	for _, runs := range byKey {
		for _, r := range runs {
			if r.Start <= restartAt && *r.End >= killedAt {
				mayRepeat[r.Job] = true
			}
		}
	}
	got := ddb.jobs(t)
	delete(got, failing) // it died: three runs, no effect (checked below)
	t.Logf("%d extra runs of %d jobs in flight at a fault", checkOnce(t, got, all, mayRepeat), len(mayRepeat))
	for k, runs := range byKey {
		slices.SortFunc(runs, func(a, b orderedRun) int { return cmp.Compare(a.Start, b.Start) })
		var maxEnd int64
		var maxJob string
		seen := map[string]bool{}
		var prevDue int64 = -1
		for _, r := range runs {
			if r.Start < maxEnd && r.Job != maxJob {
				fail("key%d: %s (attempt %d) started at %d while %s ran until %d", k, r.Job, r.Attempt, r.Start, maxJob, maxEnd)
			}
			if *r.End > maxEnd {
				maxEnd, maxJob = *r.End, r.Job
			}
			if !seen[r.Job] {
				seen[r.Job] = true
				if r.Due < prevDue {
					fail("key%d: %s (due %d) first started after a job due %d; the key's runs (ms after the first due time; SIGKILL at %d, Redis back at %d): %s",
						k, r.Job, r.Due-base, prevDue-base, killedAt-base, restartAt-base, runsText(runs, base))
				}
				prevDue = r.Due
			}
		}
	}
	// The failing job held its key alone, until it died.
	var failRuns []orderedRun
	for _, r := range byKey[0] {
		if r.Job == failing {
			failRuns = append(failRuns, r)
		}
	}
	if len(failRuns) != 3 {
		t.Errorf("%s ran %d times, want 3 (its max attempts)", failing, len(failRuns))
	} else {
		from, to := failRuns[0].Start, *failRuns[2].End
		others := 0
		for k := 1; k < keys; k++ {
			for _, r := range byKey[k] {
				if r.Start > from && r.Start < to {
					others++
				}
			}
		}
		if others == 0 {
			t.Errorf("no other key's job started while %s failed (%d to %d)", failing, from, to)
		}
		t.Logf("%s failed from %d to %d ms; %d runs of other keys started meanwhile", failing, from-base, to-base, others)
	}
	if bad > 10 {
		t.Errorf("... %d faults in all", bad)
	}
	t.Logf("%d jobs over %d keys, %d processes of %d handlers: %d runs from %d to %d ms after the first due time (%.0f jobs/s, faults included)",
		n, keys, procs, concurrency, len(rows), first-base, last-base, float64(n)*1000/float64(max(last-first, 1)))
}

// runsText lists runs as job/attempt@start-end(worker), times from base.
func runsText(runs []orderedRun, base int64) string {
	var b strings.Builder
	for _, r := range runs {
		fmt.Fprintf(&b, "%s/%d@%d-%d(%s) ", r.Job, r.Attempt, r.Start-base, *r.End-base, r.Worker)
	}
	return b.String()
}

package recoverer_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/internal/tcpproxy"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// The fault tests prove rows of docs/design.md's failure table (§6) with
// real processes: a worker (the test binary re-executed, see
// fault_child_test.go) drains a few thousand jobs whose handler writes one
// row per job into MariaDB, so missing and duplicate jobs are counted from
// the database. Each worker process also runs a recoverer, as the app does. With DELAYQ_CHAOS=long
// (make chaos) they drain more jobs.

const faultTopic = "fault"

// drainSpec is the worker configuration the drains share: eight handlers,
// a short lease so a dead worker's jobs come back quickly, a recoverer
// ticking every second.
func drainSpec(redisAddr, namespace, dsn string) workerSpec {
	return workerSpec{
		RedisAddr: redisAddr, Namespace: namespace, DSN: dsn, Topic: faultTopic,
		Concurrency: 8, Lease: 1500 * time.Millisecond, HandlerSleep: 3 * time.Millisecond,
		Schedule: "@every 1s", Grace: time.Second,
	}
}

// waitDrained waits until every one of n jobs is handled, the ledger is
// empty and Redis holds nothing due or in flight.
func waitDrained(t *testing.T, fdb faultDB, q *dataplane.Client, n int, limit time.Duration) {
	t.Helper()
	testenv.WaitFor(testenv.ContextTimeout(t, limit), t, fmt.Sprintf("all %d jobs handled", n), func() bool { return fdb.handled(t) >= int64(n) })
	testenv.WaitFor(testenv.Context(t), t, "the ledger empty and Redis drained", func() bool {
		st, err := q.Stats(testenv.Context(t), faultTopic)
		return err == nil && st.Due == 0 && st.InFlight == 0 && fdb.ledgerRows(t) == 0
	})
}

// 1. A worker SIGKILLed three times mid-drain and started again: no job is
// lost, and only jobs the dead workers held (their leases at the kill) run
// twice.
func TestFaultWorkerKilledThreeTimes(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	fdb := newFaultDB(t)
	n := scale(3000, 20000)
	enqueueJobs(t, q, faultTopic, n)
	spec := drainSpec(redisAddr(t, rdb), ns, fdb.dsn)

	inFlight := map[string]bool{}
	var workers []*child
	for kill := 1; kill <= 3; kill++ {
		spec.WorkerID = fmt.Sprintf("fault-w%d", kill)
		w := startChild(t, spec.WorkerID, "worker", spec)
		workers = append(workers, w)
		target := fdb.handled(t) + int64(n/6)
		testenv.WaitFor(testenv.Context(t), t, fmt.Sprintf("worker %d to handle %d more jobs", kill, n/6),
			func() bool { return fdb.handled(t) >= target })
		w.kill(t)
		// No worker runs now: the lease set holds what the dead ones held.
		held, err := rdb.ZRange(testenv.Context(t), ns+":{"+faultTopic+"}:lease", 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range held {
			inFlight[id] = true
		}
		t.Logf("kill %d (pid %d) with %d jobs handled: %d leased at the kill", kill, w.pid(), fdb.handled(t), len(held))
	}
	spec.WorkerID = "fault-w4"
	last := startChild(t, spec.WorkerID, "worker", spec)
	workers = append(workers, last)
	waitDrained(t, fdb, q, n, 3*time.Minute)
	last.stop(t, 30*time.Second)

	o := fdb.outcome(t, n)
	if len(o.missing) != 0 {
		t.Errorf("%d jobs never handled, e.g. %v", len(o.missing), o.missing[:min(5, len(o.missing))])
	}
	for id, runs := range o.duplicates {
		if !inFlight[id] {
			t.Errorf("%s ran %d times but no dead worker held it", id, runs)
		}
	}
	if o.extraRuns() > len(inFlight) {
		t.Errorf("%d duplicate runs, more than the %d jobs in flight at the kills", o.extraRuns(), len(inFlight))
	}
	t.Logf("%d jobs, 3 kills: 0 missing, %d duplicate runs (bound: %d in flight at the kills)", n, o.extraRuns(), len(inFlight))
	for _, w := range workers {
		w.checkNoRace(t)
	}
}

// 2. The worker's Redis, without persistence, SIGKILLed and restarted empty
// mid-drain: the recoverer notices the loss (the epoch marker is gone while
// the ledger holds rows Redis has no trace of), logs it, and every job some
// worker had claimed (recorded in the ledger) before the crash is handled.
// The jobs never claimed are lost, as docs/design.md §6 says they are
// without AOF.
func TestFaultRedisRestartedEmpty(t *testing.T) {
	o, claimed := redisCrashDrain(t, testenv.RedisOptions{}, true)
	n := scale(3000, 20000)
	lost := n - claimed
	t.Logf("%d jobs: %d claimed before the crash, all handled (%d duplicate runs); %d never claimed: lost with Redis",
		n, claimed, o.extraRuns(), lost)
	if lost == 0 {
		t.Error("nothing was lost: the crash came after every job was claimed")
	}
}

// 3. The same crash with the AOF and appendfsync always: nothing is lost.
func TestFaultRedisRestartedAOFAlways(t *testing.T) {
	o, _ := redisCrashDrain(t, testenv.RedisOptions{AOF: true, Fsync: "always"}, false)
	if len(o.missing) != 0 {
		t.Errorf("%d jobs lost with appendfsync always, e.g. %v", len(o.missing), o.missing[:min(5, len(o.missing))])
	}
	t.Logf("0 missing, %d duplicate runs", o.extraRuns())
}

// redisCrashDrain drains jobs from a redis-server of the test's own that it
// SIGKILLs and restarts a third of the way through. Every fifth job fails
// its first attempt, so ledger rows wait in the retrying state when Redis
// dies. It returns the outcome and how many jobs were claimed (recorded)
// in all; with wantLoss the claimed ones must all be handled, the loss
// logged, and no unclaimed job handled; otherwise every job must be.
func redisCrashDrain(t *testing.T, opts testenv.RedisOptions, wantLoss bool) (outcome, int) {
	srv := testenv.StartRedis(t, opts)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	q, err := dataplane.New(rdb, queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	fdb := newFaultDB(t)
	n := scale(3000, 20000)
	enqueueJobs(t, q, faultTopic, n)
	spec := drainSpec(srv.Addr, "dq", fdb.dsn)
	spec.WorkerID = "fault-w1"
	spec.FailEvery, spec.RetryAfter = 5, 300*time.Millisecond
	w := startChild(t, spec.WorkerID, "worker", spec)

	testenv.WaitFor(testenv.Context(t), t, "the recoverer's epoch marker", func() bool {
		missing, err := q.EpochMissing(testenv.Context(t), []string{faultTopic})
		return err == nil && len(missing) == 0
	})
	testenv.WaitFor(testenv.Context(t), t, "a third of the jobs handled", func() bool { return fdb.handled(t) >= int64(n/3) })
	srv.Kill(t)
	t.Logf("Redis killed with %d jobs handled, %d ledger rows", fdb.handled(t), fdb.ledgerRows(t))
	srv.Restart(t)

	if !wantLoss {
		waitDrained(t, fdb, q, n, 3*time.Minute)
		w.stop(t, 30*time.Second)
		if lines := w.logLines(`"msg":"Redis lost data`); len(lines) != 0 {
			t.Errorf("a loss was reported though Redis kept everything: %s", lines[0])
		}
		w.checkNoRace(t)
		return fdb.outcome(t, n), n
	}

	testenv.WaitFor(testenv.Context(t), t, "the data loss logged", func() bool {
		return len(w.logLines(`"level":"error"`, `"msg":"Redis lost data`, `"topic":"fault"`, `"rows":`)) > 0
	})
	unhandledClaims := "SELECT COUNT(*) FROM claims c LEFT JOIN handled h ON h.job_id = c.job_id WHERE h.job_id IS NULL"
	testenv.WaitFor(testenv.Context(t), t, "every claimed job handled and the ledger empty", func() bool {
		return fdb.ledgerRows(t) == 0 && fdb.count(t, unhandledClaims) == 0
	})
	w.stop(t, 30*time.Second)
	w.checkNoRace(t)
	claims := fdb.ids(t, "SELECT job_id FROM claims")
	for id := range fdb.ids(t, "SELECT job_id FROM handled") {
		if !claims[id] {
			t.Errorf("%s was handled but never claimed", id)
		}
	}
	t.Logf("loss report: %s", w.logLines(`"msg":"Redis lost data`)[0])
	// The worker's reconnect hook checked the markers (it or the scheduled
	// run, whichever came first, found the loss).
	hook := w.logLines(`"msg":"Redis reconnected`)
	if len(hook) == 0 {
		t.Error("the worker's reconnect hook never checked the epoch markers")
	}
	for _, line := range hook {
		t.Logf("reconnect hook: %s", line)
	}
	return fdb.outcome(t, n), len(claims)
}

// 4. MariaDB cut off mid-drain (a TCP proxy between the worker process's
// ledger, recoverer included, and the database): no handler runs
// unrecorded, claims go back with their attempt unspent, and the drain
// resumes by itself when the link is back. The handlers write their business
// rows over a link of their own, so they keep running, and the worker keeps
// claiming, through the cut.
func TestFaultMariaDBCut(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	fdb := newFaultDB(t)
	cfg, err := gomysql.ParseDSN(fdb.dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := tcpproxy.New(t, cfg.Addr)
	cfg.Addr = proxy.Addr()
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = time.Second, 2*time.Second, 2*time.Second
	n := scale(3000, 20000)
	enqueueJobs(t, q, faultTopic, n)
	spec := drainSpec(redisAddr(t, rdb), ns, cfg.FormatDSN())
	spec.BusinessDSN = fdb.dsn
	spec.WorkerID = "fault-w1"
	// Leases outlast the cut: a handler that finished during it must not be
	// taken over while its completion waits for the database.
	spec.Lease, spec.Grace = 10*time.Second, 5*time.Second
	w := startChild(t, spec.WorkerID, "worker", spec)

	testenv.WaitFor(testenv.Context(t), t, "a third of the jobs handled", func() bool { return fdb.handled(t) >= int64(n/3) })
	proxy.Cut()
	atCut := fdb.handled(t)
	testenv.WaitFor(testenv.Context(t), t, "claims refused while MariaDB is cut off", func() bool {
		return len(w.logLines(`"msg":"fetch failed"`, "ledger record")) >= 3
	})
	proxy.Restore()
	t.Logf("cut at %d handled, restored at %d", atCut, fdb.handled(t))
	waitDrained(t, fdb, q, n, 3*time.Minute)
	w.stop(t, 30*time.Second)
	w.checkNoRace(t)

	o := fdb.outcome(t, n)
	if len(o.missing) != 0 {
		t.Errorf("%d jobs never handled, e.g. %v", len(o.missing), o.missing[:min(5, len(o.missing))])
	}
	if o.maxAttempt != 1 {
		t.Errorf("a job ran with attempt %d: the outage spent attempts", o.maxAttempt)
	}
	if len(o.duplicates) != 0 {
		t.Errorf("%d jobs ran more than once", len(o.duplicates))
	}
	t.Logf("%d jobs: 0 missing, no attempt spent, %d record failures logged", n,
		len(w.logLines(`"msg":"fetch failed"`, "ledger record")))
}

// 5. Two recoverer processes started at the same moment over 1,000 stale
// rows whose jobs Redis lost: each job is re-enqueued exactly once. In
// every other round the two take different locks, so they really run at
// once and only the restore script's atomic check-and-write keeps one copy.
func TestFaultTwoRecoverersAtOnce(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	fdb := newFaultDB(t)
	const rows = 1000
	now, err := rdb.Time(testenv.Context(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	seedStale(t, fdb, rows, now.UnixMilli())
	attempts := make(map[string]int, rows)
	for i := 0; i < rows; i++ {
		attempts[jobID(i)] = 1 + i%3
	}
	addr := redisAddr(t, rdb)
	for round := 0; round < scale(2, 10); round++ {
		p := ns + ":{" + faultTopic + "}:"
		if err := rdb.Del(testenv.Context(t), p+"due", p+"job", p+"lease").Err(); err != nil { // Redis lost the jobs again
			t.Fatal(err)
		}
		if _, err := q.EnsureEpoch(testenv.Context(t), []string{faultTopic}, "test"); err != nil {
			t.Fatal(err)
		}
		separate := round%2 == 1
		procs := make([]*child, 2)
		for i := range procs {
			spec := recovererSpec{RedisAddr: addr, Namespace: ns, DSN: fdb.dsn, PageSize: 50, Chunk: 10}
			if separate {
				spec.LockKey = fmt.Sprintf("%s:lock-%d", ns, i)
			}
			procs[i] = startChild(t, fmt.Sprintf("recoverer-%d-%d", round, i), "recoverer", spec)
		}
		for _, p := range procs {
			if line := p.readLine(t, time.Minute); line != "ready" {
				t.Fatalf("%s said %q", p.name, line)
			}
		}
		for _, p := range procs {
			if _, err := fmt.Fprintln(p.stdin, "go"); err != nil {
				t.Fatal(err)
			}
		}
		var reps [2]recoverer.Report
		total := 0
		for i, p := range procs {
			if err := json.Unmarshal([]byte(p.readLine(t, time.Minute)), &reps[i]); err != nil {
				t.Fatalf("%s: report: %v", p.name, err)
			}
			total += reps[i].Reenqueued
			p.checkNoRace(t)
		}
		how := []string{}
		for i, r := range reps {
			how = append(how, fmt.Sprintf("recoverer %d: skipped=%v reenqueued=%d still_tracked=%d", i, r.Skipped, r.Reenqueued, r.StillTracked))
		}
		t.Logf("round %d (separate locks: %v): %s", round, separate, strings.Join(how, "; "))
		if total != rows {
			t.Fatalf("round %d: the recoverers re-enqueued %d jobs in all, want %d", round, total, rows)
		}
		if !separate && !reps[0].Skipped && !reps[1].Skipped && reps[0].Reenqueued != 0 && reps[1].Reenqueued != 0 {
			t.Fatalf("round %d: both recoverers ran under one lock", round)
		}
		st, err := q.Stats(testenv.Context(t), faultTopic)
		if err != nil || st.Due != rows || st.InFlight != 0 {
			t.Fatalf("round %d: stats %+v, %v", round, st, err)
		}
		if nJobs, err := rdb.HLen(testenv.Context(t), p+"job").Result(); err != nil || nJobs != rows {
			t.Fatalf("round %d: %d envelopes, %v", round, nJobs, err)
		}
		for i := 0; i < rows; i += 97 {
			info, err := q.Get(testenv.Context(t), faultTopic, jobID(i))
			if err != nil || info.State != queue.StateRetrying || info.Job.Attempt != attempts[jobID(i)] {
				t.Fatalf("round %d: %s: %+v, %v", round, jobID(i), info, err)
			}
		}
	}
}

// seedStale writes n ledger rows of faultTopic whose lease ran out an hour
// ago, every other one retrying, with attempts 1-3.
func seedStale(t *testing.T, fdb faultDB, n int, now int64) {
	t.Helper()
	jobs := make([]*queue.Job, n)
	var marks []dataplane.RetryRequest
	for i := range jobs {
		jobs[i] = &queue.Job{Topic: faultTopic, ID: jobID(i), Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)),
			Attempt: 1 + i%3, MaxAttempts: 10, RunAt: now - 7_200_000, LeaseUntil: now - 3_600_000}
		if i%2 == 1 {
			marks = append(marks, dataplane.RetryRequest{Ref: jobs[i].Ref(), RunAt: now - 7_200_000, LeaseUntil: now - 3_600_000, Error: "failed"})
		}
	}
	if err := ledgerops.Of(fdb.led).Record(testenv.Context(t), jobs, "dead-worker:1"); err != nil {
		t.Fatal(err)
	}
	if err := ledgerops.Of(fdb.led).MarkRetrying(testenv.Context(t), marks); err != nil {
		t.Fatal(err)
	}
}

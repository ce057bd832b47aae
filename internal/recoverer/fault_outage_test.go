package recoverer_test

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/delayq/delayq/internal/tcpproxy"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// outageCut is one outage of the fault schedule: the link of every worker
// to one store cut for length, from from on.
type outageCut struct {
	store        string // "redis" or "ledger", as the workers' logs name it
	proxy        *tcpproxy.Proxy
	from, length time.Duration // on the schedule's clock
	at, back     int64         // Unix ns: cut, and restored (taken just before Restore)
}

// TestFaultOutagesSettleFinishedJobs: two worker processes (the test
// binary re-executed, as the app runs a worker: recoverer and relay beside
// it, the library's default error backoff) handle a redis topic and a
// durable topic whose jobs fall due steadily, with leases of 3 s, while
// their links to Redis and to MariaDB are cut (TCP proxies) for 3.5 to 5 s
// each, twice each: Redis alone, MariaDB alone, then MariaDB and Redis one
// after the other with half a second of overlap (DELAYQ_CHAOS=long: three
// such rounds). Every job runs and is settled; a job runs again only if a
// run of it was in flight at a cut (running at it, or finished at most
// cutSlack before it, its outcome not settled yet) and ended before its
// store came back: a job whose handler returned after the store came back
// is never run again, since the heartbeat renews the leases of finished
// jobs until they are settled and the completer settles them as soon as
// the store answers (docs/design.md §4.4, §4.5, §6). A MariaDB cut while
// Redis answers makes no job run again at all: the leases of the jobs in
// flight at it, finished ones included, are renewed until it ends. Each
// worker logs each outage's start and end once.
//
// Before that fix the jobs that finished during a MariaDB cut ran again
// once it ended (their leases ran out during it), and now and then the
// overlapping pair ran again jobs claimed and finished right after Redis
// came back: the completer's pause, grown to 5 s through both outages,
// outlasted their leases.
func TestFaultOutagesSettleFinishedJobs(t *testing.T) {
	const (
		lease      = 3 * time.Second
		perSecond  = 25 // jobs falling due per second per topic
		cutSlack   = time.Second
		redisTopic = "outage"
		durable    = "outage_durable"
	)
	rdb, ns := testenv.Redis(t)
	dsn := testenv.MySQLDSN(t)
	_, led := openLedgerDB(t, dsn)
	q, err := durableClient(rdb, ns, durable, led, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	redisProxy := tcpproxy.New(t, redisAddr(t, rdb))
	sqlCfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	sqlProxy := tcpproxy.New(t, sqlCfg.Addr)
	sqlCfg.Addr = sqlProxy.Addr()
	sqlCfg.Timeout, sqlCfg.ReadTimeout, sqlCfg.WriteTimeout = time.Second, 2*time.Second, 2*time.Second

	// The schedule, per round: Redis alone, MariaDB alone, then MariaDB
	// and Redis, the Redis cut beginning half a second before MariaDB is
	// back (the settlements the first outage held up meet the second).
	var cuts []*outageCut
	length := func() time.Duration { return 3500*time.Millisecond + rand.N(1500*time.Millisecond) }
	gap := func() time.Duration { return lease + time.Second + rand.N(time.Second) }
	span := 3 * time.Second // before the first cut
	add := func(store string, from time.Duration) *outageCut {
		c := &outageCut{store: store, proxy: redisProxy, from: from, length: length()}
		if store == "ledger" {
			c.proxy = sqlProxy
		}
		cuts = append(cuts, c)
		return c
	}
	for range scale(1, 3) {
		r := add("redis", span)
		m := add("ledger", r.from+r.length+gap())
		m2 := add("ledger", m.from+m.length+gap())
		r2 := add("redis", m2.from+m2.length-500*time.Millisecond)
		span = r2.from + r2.length + gap()
	}
	span += 2 * time.Second

	dir := t.TempDir()
	var workers []*child
	runLogs := []string{}
	for i := range 2 {
		spec := outageWorkerSpec{
			RedisAddr: redisProxy.Addr(), Namespace: ns, DSN: sqlCfg.FormatDSN(), WorkerID: fmt.Sprintf("outage-w%d", i+1),
			RedisTopic: redisTopic, DurableTopic: durable, Concurrency: 16, Lease: lease,
			HandlerMin: 100 * time.Millisecond, HandlerMax: 400 * time.Millisecond,
			RunLog: filepath.Join(dir, fmt.Sprintf("runs-%d.jsonl", i+1)), MaxConns: 10,
		}
		runLogs = append(runLogs, spec.RunLog)
		workers = append(workers, startChild(t, spec.WorkerID, "outageworker", spec))
	}
	for _, w := range workers {
		testenv.WaitFor(testenv.Context(t), t, w.name+" ready", func() bool { return len(w.logLines(`"msg":"outage worker ready"`)) > 0 })
	}

	// Jobs fall due steadily over the whole schedule, on both topics.
	n := int(span.Seconds() * perSecond)
	now, err := rdb.Time(testenv.Context(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{redisTopic, durable} {
		jobs := make([]queue.NewJob, n)
		for i := range jobs {
			jobs[i] = queue.NewJob{ID: fmt.Sprintf("%s-%d", topic, i), MaxAttempts: 20,
				RunAt: now.Add(time.Duration(i) * span / time.Duration(n)).UnixMilli()}
		}
		for from := 0; from < n; from += 500 {
			res, err := q.EnqueueBatch(testenv.Context(t), topic, jobs[from:min(n, from+500)])
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if r.Status != queue.BatchCreated {
					t.Fatalf("enqueue %s: %s", r.ID, r.Status)
				}
			}
		}
	}
	began := time.Now()

	// The cuts, on the schedule's clock: each cut and each restore in
	// time order.
	type event struct {
		at  time.Duration
		c   *outageCut
		cut bool
	}
	var events []event
	for _, c := range cuts {
		events = append(events, event{c.from, c, true}, event{c.from + c.length, c, false})
	}
	slices.SortStableFunc(events, func(a, b event) int { return cmp.Compare(a.at, b.at) })
	ctx := testenv.ContextTimeout(t, span+time.Minute)
	for _, e := range events {
		due := began.Add(e.at)
		if !e.cut { // a cut lasts its length from when it took effect
			due = time.Unix(0, e.c.at).Add(e.c.length)
		}
		testenv.WaitFor(ctx, t, "the next cut or restore", func() bool { return !time.Now().Before(due) })
		if e.cut {
			e.c.proxy.Cut()
			e.c.at = time.Now().UnixNano()
			continue
		}
		e.c.back = time.Now().UnixNano()
		e.c.proxy.Restore()
		t.Logf("%s cut at %s for %s", e.c.store, e.c.from.Round(time.Millisecond), time.Duration(e.c.back-e.c.at).Round(time.Millisecond))
	}

	// Every job done: a successful run of each, nothing left in Redis or the
	// ledger.
	var runs []outageRun
	done := func() bool {
		for _, topic := range []string{redisTopic, durable} {
			st, err := q.Stats(testenv.Context(t), topic)
			if err != nil || st.Due != 0 || st.InFlight != 0 {
				return false
			}
		}
		var rows int64
		if err := led.DB().WithContext(testenv.Context(t)).Table(led.LedgerTable()).Count(&rows).Error; err != nil || rows != 0 {
			return false
		}
		runs = readOutageRuns(t, runLogs)
		ok := map[string]bool{}
		for _, r := range runs {
			if r.Err == "" {
				ok[r.ID] = true
			}
		}
		return len(ok) == 2*n
	}
	testenv.WaitFor(testenv.ContextTimeout(t, 2*time.Minute), t, "every job run and settled", done, func() string {
		return fmt.Sprintf("%d runs logged for %d jobs", len(runs), 2*n)
	})
	took := time.Since(began)
	for _, w := range workers {
		w.stop(t, 30*time.Second)
		w.checkNoRace(t)
	}
	runs = readOutageRuns(t, runLogs)
	for _, topic := range []string{redisTopic, durable} {
		if st, err := q.Stats(testenv.Context(t), topic); err != nil || st.Dead != 0 {
			t.Errorf("%s: stats %+v, %v; want no dead job", topic, st, err)
		}
	}

	// Each run of a job but its last must have been in flight at a cut and
	// ended before its store came back: it started before then, and ended
	// at most cutSlack before the link was cut (its outcome not settled
	// yet). A run that ended after the store came back was settled then,
	// or its lease renewed until it was: it must be its job's last.
	inFlight := func(r outageRun, c *outageCut) bool {
		return r.Start < c.back && r.End >= c.at-cutSlack.Nanoseconds()
	}
	byJob := map[string][]outageRun{}
	for _, r := range runs {
		byJob[r.ID] = append(byJob[r.ID], r)
	}
	again := make([]int, len(cuts))    // jobs run again, per cut that explains it
	atStake := make([]int, len(cuts))  // runs that ended within a lease after the cut's end
	atTheCut := make([]int, len(cuts)) // runs in flight at it
	for _, r := range runs {
		for k, c := range cuts {
			if r.End > c.back && r.End <= c.back+lease.Nanoseconds() {
				atStake[k]++
			}
			if inFlight(r, c) {
				atTheCut[k]++
			}
		}
	}
	for id, rs := range byJob {
		slices.SortFunc(rs, func(a, b outageRun) int { return cmp.Compare(a.Start, b.Start) })
		last := rs[len(rs)-1]
		if last.Err != "" {
			t.Errorf("%s: its last run (attempt %d) failed: %s", id, last.Attempt, last.Err)
		}
		for i, r := range rs[:len(rs)-1] {
			if next := rs[i+1]; next.Attempt <= r.Attempt {
				t.Errorf("%s: attempt %d ran after attempt %d", id, next.Attempt, r.Attempt)
			}
			if k := slices.IndexFunc(cuts, func(c *outageCut) bool { return inFlight(r, c) && r.End <= c.back }); k >= 0 {
				again[k]++
				continue
			}
			what := "in flight at no cut"
			if k := slices.IndexFunc(cuts, func(c *outageCut) bool { return inFlight(r, c) }); k >= 0 {
				what = fmt.Sprintf("finished after %s came back at %s", cuts[k].store, clock(cuts[k].back))
			}
			t.Errorf("%s: run again after attempt %d (%s, ran %s to %s), %s",
				id, r.Attempt, r.Worker, clock(r.Start), clock(r.End), what)
		}
	}
	for k, c := range cuts {
		t.Logf("cut %d (%s at %s, %s): %d runs in flight at it, %d of their jobs run again; %d runs ended within a lease after it",
			k+1, c.store, c.from.Round(time.Millisecond), time.Duration(c.back-c.at).Round(time.Millisecond), atTheCut[k], again[k], atStake[k])
		// Unless another cut held the claims back then.
		overlapped := slices.ContainsFunc(cuts, func(o *outageCut) bool { return o != c && o.at < c.back && c.back < o.back })
		if atStake[k] == 0 && !overlapped {
			t.Errorf("cut %d (%s): no run ended within a lease after it: it proved nothing", k+1, c.store)
		}
		// MariaDB cut while Redis answers: the heartbeat renews the lease
		// of every job in flight at the cut, finished ones included, until
		// the cut ends and they are settled. None runs again.
		alone := !slices.ContainsFunc(cuts, func(o *outageCut) bool {
			return o != c && o.at < c.back+lease.Nanoseconds() && c.at-lease.Nanoseconds() < o.back
		})
		if c.store == "ledger" && alone && atTheCut[k] == 0 {
			t.Errorf("cut %d (ledger alone): no run in flight at it: it proved nothing", k+1)
		}
		if c.store == "ledger" && alone && again[k] != 0 {
			t.Errorf("cut %d (ledger alone, Redis answering): %d jobs in flight at it ran again; their leases should have been renewed until they were settled", k+1, again[k])
		}
	}

	// Each worker logged each outage's start and end once.
	for _, w := range workers {
		for _, store := range []string{"redis", "ledger"} {
			nCuts := 0
			for _, c := range cuts {
				if c.store == store {
					nCuts++
				}
			}
			starts := len(w.logLines(`"msg":"`+store+` not answering`, `"store":"`+store+`"`))
			ends := len(w.logLines(`"msg":"`+store+` answers again`, `"store":"`+store+`"`))
			if starts < 1 || starts > nCuts || ends != starts {
				t.Errorf("%s: %d outage starts and %d ends of %s logged for %d cuts; want one of each per cut", w.name, starts, ends, store, nCuts)
			}
		}
	}
	t.Logf("%d jobs on 2 topics, %d runs, %d cuts, all done %s after the first fell due", 2*n, len(runs), len(cuts), took.Round(time.Millisecond))
}

// readOutageRuns reads the workers' run logs (a line being written is left
// for the next read).
func readOutageRuns(t *testing.T, paths []string) []outageRun {
	t.Helper()
	var out []outageRun
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r outageRun
			if line := sc.Text(); strings.HasSuffix(line, "}") && json.Unmarshal([]byte(line), &r) == nil {
				out = append(out, r)
			}
		}
		f.Close()
	}
	return out
}

// clock formats a Unix ns time of day for the logs.
func clock(ns int64) string { return time.Unix(0, ns).Format("15:04:05.000") }

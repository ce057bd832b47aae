package recoverer_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
)

// durableDB is a durable fault test's MariaDB database: the ledger, the
// run log its workers' handler writes (durable_runs: one row per run, with
// the job's due time and the run's start on Redis's clock) and the effect
// table (durable_effect: one row per committed effect, no unique key, so a
// second effect of a job would show).
type durableDB struct {
	dsn string
	db  *gorm.DB
	led *ledger.Ledger
}

func newDurableDB(t testing.TB) durableDB {
	t.Helper()
	dsn := testenv.MySQLDSN(t)
	db, led := openLedgerDB(t, dsn,
		"CREATE TABLE durable_runs (token VARCHAR(32) NOT NULL PRIMARY KEY, job_id VARCHAR(64) NOT NULL, attempt INT NOT NULL, "+
			"due_ms BIGINT NOT NULL, start_ms BIGINT NOT NULL, end_ms BIGINT NULL, worker VARCHAR(64) NOT NULL, KEY (job_id)) ENGINE=InnoDB",
		"CREATE TABLE durable_effect (id BIGINT AUTO_INCREMENT PRIMARY KEY, job_id VARCHAR(64) NOT NULL, attempt INT NOT NULL, "+
			"worker VARCHAR(64) NOT NULL, KEY (job_id)) ENGINE=InnoDB")
	return durableDB{dsn: dsn, db: db, led: led}
}

func (d durableDB) count(t testing.TB, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := d.db.WithContext(testenv.Context(t)).Raw(query, args...).Scan(&n).Error; err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func (d durableDB) effects(t testing.TB) int64 {
	return d.count(t, "SELECT COUNT(*) FROM durable_effect")
}
func (d durableDB) ledgerRows(t testing.TB) int64 {
	return d.count(t, "SELECT COUNT(*) FROM "+d.led.LedgerTable())
}

// jobRuns is what the run log and the effect table say about one job.
type jobRuns struct {
	Runs, Effects int
	Due           int64 // as the job's payload says
	FirstStart    int64 // the earliest run's start, Redis's clock
	Early         int   // runs that started before the due time
}

// jobs reads the run log and the effect table, by job id.
func (d durableDB) jobs(t testing.TB) map[string]*jobRuns {
	t.Helper()
	var runs []struct {
		JobID           string
		Runs, Early     int
		Due, FirstStart int64
	}
	err := d.db.WithContext(testenv.Context(t)).Raw("SELECT job_id, COUNT(*) AS runs, SUM(start_ms < due_ms) AS early, " +
		"MAX(due_ms) AS due, MIN(start_ms) AS first_start FROM durable_runs GROUP BY job_id").Scan(&runs).Error
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]*jobRuns, len(runs))
	for _, r := range runs {
		out[r.JobID] = &jobRuns{Runs: r.Runs, Early: r.Early, Due: r.Due, FirstStart: r.FirstStart}
	}
	var effects []struct {
		JobID string
		N     int
	}
	if err := d.db.WithContext(testenv.Context(t)).Raw("SELECT job_id, COUNT(*) AS n FROM durable_effect GROUP BY job_id").Scan(&effects).Error; err != nil {
		t.Fatal(err)
	}
	for _, e := range effects {
		if out[e.JobID] == nil {
			out[e.JobID] = &jobRuns{}
		}
		out[e.JobID].Effects = e.N
	}
	return out
}

// checkOnce fails t unless every id in want ran and has exactly one effect,
// none ran before its due time, and only ids in mayRepeat ran more than
// once. It returns how many extra runs there were.
func checkOnce(t testing.TB, got map[string]*jobRuns, want []string, mayRepeat map[string]bool) int {
	t.Helper()
	extra, bad := 0, 0
	fail := func(format string, args ...any) {
		if bad++; bad <= 10 {
			t.Errorf(format, args...)
		}
	}
	for _, id := range want {
		r := got[id]
		switch {
		case r == nil || r.Runs == 0:
			fail("%s never ran", id)
			continue
		case r.Effects != 1:
			fail("%s has %d effects, want 1 (runs: %d)", id, r.Effects, r.Runs)
		case r.Early > 0:
			fail("%s: %d runs started before its due time %d (first at %d)", id, r.Early, r.Due, r.FirstStart)
		case r.Runs > 1 && !mayRepeat[id]:
			fail("%s ran %d times, and it was not in flight at the fault", id, r.Runs)
		}
		extra += r.Runs - 1
	}
	if len(got) != len(want) {
		fail("%d jobs ran, want %d", len(got), len(want))
	}
	if bad > 10 {
		t.Errorf("... %d failures in all", bad)
	}
	return extra
}

// spread is the median, 99th percentile and maximum of ms.
type spread struct{ p50, p99, max, n int64 }

func spreadOf(ms []int64) spread {
	if len(ms) == 0 {
		return spread{}
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	at := func(q float64) int64 { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return spread{p50: at(0.50), p99: at(0.99), max: s[len(s)-1], n: int64(len(s))}
}

func (s spread) String() string {
	d := func(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
	return fmt.Sprintf("n=%d p50=%s p99=%s max=%s", s.n, d(s.p50), d(s.p99), d(s.max))
}

// waitSettled waits, up to timeout, until n effects are committed and the
// ledger is empty: every accepted job ran and settled. more adds to the
// failure's message.
func (d durableDB) waitSettled(t testing.TB, n int64, timeout time.Duration, more func() string) {
	t.Helper()
	testenv.WaitFor(testenv.ContextTimeout(t, timeout), t, fmt.Sprintf("%d accepted jobs' effects and an empty ledger", n), func() bool {
		return d.effects(t) >= n && d.ledgerRows(t) == 0
	}, func() string {
		var rows []map[string]any
		_ = d.db.Raw("SELECT job_id, state, attempt, worker, run_at, lease_until, updated_at FROM " + d.led.LedgerTable() + " LIMIT 5").Scan(&rows).Error
		msg := fmt.Sprintf("%d effects, %d ledger rows, e.g. %v", d.effects(t), d.ledgerRows(t), rows)
		if more != nil {
			msg += "; " + more()
		}
		return msg
	})
}

// mayRepeat returns the jobs that may have run more than once after a
// fault: those with a run matching inFlight (a WHERE clause on
// durable_runs: in flight at the fault), and those whose effect is their
// last run's while an earlier run left none (it outlived its lease
// uncommitted on a loaded host); leaseRan counts the latter alone.
func (d durableDB) mayRepeat(t testing.TB, inFlight string, args ...any) (may map[string]bool, leaseRan int) {
	t.Helper()
	var ids []string
	if err := d.db.Raw("SELECT DISTINCT job_id FROM durable_runs WHERE "+inFlight, args...).Scan(&ids).Error; err != nil {
		t.Fatal(err)
	}
	may = make(map[string]bool, len(ids))
	for _, id := range ids {
		may[id] = true
	}
	var late []string
	if err := d.db.Raw("SELECT r.job_id FROM (SELECT job_id, MAX(attempt) AS a, COUNT(*) AS n FROM durable_runs GROUP BY job_id) r " +
		"JOIN durable_effect e ON e.job_id = r.job_id AND e.attempt = r.a WHERE r.n > 1").Scan(&late).Error; err != nil {
		t.Fatal(err)
	}
	for _, id := range late {
		if !may[id] {
			may[id], leaseRan = true, leaseRan+1
		}
	}
	return may, leaseRan
}

// logRepeats logs, when t failed, the runs and effects of every job that
// ran more often than it may have or has more than one effect.
func (d durableDB) logRepeats(t testing.TB, got map[string]*jobRuns, mayRepeat map[string]bool) {
	t.Helper()
	if !t.Failed() {
		return
	}
	shown := 0
	for id, r := range got {
		if shown < 20 && (r.Effects > 1 || (r.Runs > 1 && !mayRepeat[id])) {
			var runs, effects []map[string]any
			_ = d.db.Raw("SELECT attempt, worker, due_ms, start_ms FROM durable_runs WHERE job_id = ? ORDER BY start_ms", id).Scan(&runs).Error
			_ = d.db.Raw("SELECT id, attempt, worker FROM durable_effect WHERE job_id = ? ORDER BY id", id).Scan(&effects).Error
			t.Logf("%s: runs %v effects %v", id, runs, effects)
			shown++
		}
	}
}

package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// BenchmarkClaimCost measures what one claim costs the database per job, on
// a redis topic (Record inserts the row) and on a durable one (Record turns
// the scheduled row Schedule wrote into in_progress), each followed by the
// completion's DELETE: a claim's whole SQL cost. Each op is one batch of 50
// jobs. The durable topic's rows are all scheduled before the first op (not
// measured) and claimed in the order they were written, as in a drain; 50,000
// Scheduled rows of another topic wait meanwhile, as in a ledger in use.
//
// It runs on a private mariadbd (testenv.StartMariaDB, skipped without
// one) with innodb_flush_log_at_trx_commit=2 (a commit is one fsync on
// either kind, and on a slow disk it would drown the statements' own
// work), over one connection, so that the server-wide counters are the
// benchmark's alone. Per job it reports, for the record (rec-), the
// completion (done-), the purge of what they left (purge-) and their sum
// (all-):
//
//   - redo-B: InnoDB redo bytes (Innodb_lsn_current);
//   - pgmod: page modifications in the buffer pool
//     (Innodb_buffer_pool_write_requests);
//   - hw, hu, hd, hrk, hrn, hrrn: the session's Handler_write, _update,
//     _delete, _read_key, _read_next, _read_rnd_next;
//   - cpu-µs: CPU time of the server thread that runs the connection (for
//     the purge: the whole server's while it runs); µs: the client's
//     wall-clock time of the statement.
//
// durable-upsert records the durable claims as if they were not Durable:
// with the multi-row upsert a durable claim took before it was an UPDATE.
// select1 is the same-minute baseline: one SELECT 1 round trip on the same
// connection. Sub-benchmarks run one after the other; run the command
// several times to alternate them:
//
//	go test -run '^$' -bench ClaimCost -benchtime 400x ./ledger/
func BenchmarkClaimCost(b *testing.B) {
	cc := openClaimCost(b)
	b.Run("select1", func(b *testing.B) {
		ctx := context.Background()
		var one int
		cpu0 := cc.threadCPU(b)
		b.ResetTimer()
		for range b.N {
			if err := cc.db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N), "µs/rtt")
		b.ReportMetric((cc.threadCPU(b)-cpu0)/float64(b.N), "cpu-µs/rtt")
		b.ReportMetric(0, "ns/op")
	})
	for _, c := range []struct {
		name    string
		durable bool // the jobs have scheduled rows
		upsert  bool // recorded as if not Durable: Record's upsert over the rows
	}{
		{"redis", false, false},
		{"durable", true, false},
		{"durable-upsert", true, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			cc.run(b, c.durable, func(ctx context.Context, js []*queue.Job) error {
				for _, j := range js {
					j.Durable = c.durable && !c.upsert
				}
				return opsOf(cc.l).Record(ctx, js, "bench:1")
			})
		})
	}
}

// claimCostBatch is how many jobs one op of BenchmarkClaimCost claims.
const claimCostBatch = 50

// claimCostEnv is BenchmarkClaimCost's private server and ledger.
type claimCostEnv struct {
	srv *testenv.MariaDB
	l   *Ledger
	db  *sql.DB // the ledger's one connection
	// tid is the server thread that runs db's connection.
	tid int
}

func openClaimCost(b *testing.B) *claimCostEnv {
	srv := testenv.StartMariaDB(b, testenv.MariaDBOptions{})
	srv.Exec(b, "CREATE DATABASE claimcost", "SET GLOBAL innodb_flush_log_at_trx_commit = 2")
	db, err := gorm.Open(mysql.Open(srv.DSN("root", "", "claimcost", testenv.DefaultMySQLParams)),
		&gorm.Config{Logger: logger.Default.LogMode(logger.Silent)})
	if err != nil {
		b.Fatal(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sqlDB.Close() })
	// One connection: the Handler_ counters are per session, and the CPU
	// is read from the one server thread that serves it.
	sqlDB.SetMaxOpenConns(1)
	sqlDB.SetMaxIdleConns(1)
	// Each write alone: the statements' cost, not the group commit's (a
	// Complete would linger for the next Record).
	l, err := New(db, Options{GroupCommit: -1})
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	cc := &claimCostEnv{srv: srv, l: l, db: sqlDB}
	cc.tid = cc.findThread(b)
	cc.backlog(b)
	return cc
}

// claimCostBacklog is how many scheduled rows wait, due in a day, while
// BenchmarkClaimCost runs: the indexes have the depth and the optimizer
// the statistics of a ledger in use.
const claimCostBacklog = 50_000

// backlog writes claimCostBacklog scheduled rows of another topic.
func (cc *claimCostEnv) backlog(b *testing.B) {
	ctx := context.Background()
	const batch = 1000
	for n := 0; n < claimCostBacklog; n += batch {
		js := make([]queue.NewJob, batch)
		for i := range js {
			js[i] = queue.NewJob{
				ID:          fmt.Sprintf("later:%d", n+i),
				Payload:     []byte(fmt.Sprintf(`{"order_no":"later-%d","reason":"unpaid"}`, n+i)),
				Delay:       24 * time.Hour,
				MaxAttempts: 5,
			}
		}
		if _, _, err := cc.l.Schedule(ctx, "backlog", js); err != nil {
			b.Fatal(err)
		}
	}
	if err := cc.l.conn(ctx).Exec("ANALYZE TABLE `" + cc.l.LedgerTable() + "`").Error; err != nil {
		b.Fatal(err)
	}
}

// findThread returns the server thread that serves cc.db: the one whose
// CPU time grows most while the connection runs a busy loop.
func (cc *claimCostEnv) findThread(b *testing.B) int {
	before := threadCPUs(cc.srv.Pid())
	if _, err := cc.db.Exec("SELECT BENCHMARK(3000000, MD5('claimcost'))"); err != nil {
		b.Fatal(err)
	}
	best, most := 0, 0.0
	for tid, cpu := range threadCPUs(cc.srv.Pid()) {
		if d := cpu - before[tid]; d > most {
			best, most = tid, d
		}
	}
	if best == 0 {
		b.Skip("no per-thread CPU times (/proc/<pid>/task/*/schedstat)")
	}
	return best
}

// threadCPUs returns the CPU time (µs) of each thread of process pid so
// far, from /proc/<pid>/task/*/schedstat (ns, precise where
// /proc/<pid>/stat counts clock ticks); none without /proc.
func threadCPUs(pid int) map[int]float64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	out := make(map[int]float64, len(tasks))
	for _, t := range tasks {
		tid, err := strconv.Atoi(filepath.Base(filepath.Dir(t)))
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(t)
		if err != nil {
			continue // the thread ended meanwhile
		}
		if f := strings.Fields(string(raw)); len(f) > 0 {
			ns, _ := strconv.ParseFloat(f[0], 64)
			out[tid] = ns / 1e3
		}
	}
	return out
}

// threadCPU returns the CPU time (µs) of the thread serving cc.db.
func (cc *claimCostEnv) threadCPU(b *testing.B) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/schedstat", cc.srv.Pid(), cc.tid))
	if err != nil {
		b.Fatalf("the connection's server thread: %v", err)
	}
	ns, err := strconv.ParseFloat(strings.Fields(string(raw))[0], 64)
	if err != nil {
		b.Fatal(err)
	}
	return ns / 1e3
}

// serverCPU returns the CPU time (µs) of every thread of the server.
func (cc *claimCostEnv) serverCPU() float64 {
	sum := 0.0
	for _, cpu := range threadCPUs(cc.srv.Pid()) {
		sum += cpu
	}
	return sum
}

// The counters of one phase, in the order of costUnits.
const (
	cRedo = iota
	cPgmod
	cWrite
	cUpdate
	cDelete
	cReadKey
	cReadNext
	cReadRndNext
	cCPU
	nCounters
)

var costUnits = [nCounters]string{"redo-B", "pgmod", "hw", "hu", "hd", "hrk", "hrn", "hrrn", "cpu-µs"}

// statusNames maps the status variables read to their counters.
var statusNames = map[string]int{
	"Innodb_lsn_current": cRedo, "Innodb_buffer_pool_write_requests": cPgmod,
	"Handler_write": cWrite, "Handler_update": cUpdate, "Handler_delete": cDelete,
	"Handler_read_key": cReadKey, "Handler_read_next": cReadNext, "Handler_read_rnd_next": cReadRndNext,
}

type counters [nCounters]float64

func (c counters) minus(o counters) counters {
	for i := range c {
		c[i] -= o[i]
	}
	return c
}

func (c counters) plus(o counters) counters {
	for i := range c {
		c[i] += o[i]
	}
	return c
}

// read returns the counters now: InnoDB's server-wide (the server is the
// benchmark's alone), the Handler_ ones of the session, the CPU time of the
// connection's thread.
func (cc *claimCostEnv) read(ctx context.Context, b *testing.B) counters {
	var c counters
	for _, scope := range []string{"GLOBAL", "SESSION"} {
		rows, err := cc.db.QueryContext(ctx, "SHOW "+scope+" STATUS WHERE Variable_name IN "+
			"('Innodb_lsn_current','Innodb_buffer_pool_write_requests','Handler_write','Handler_update',"+
			"'Handler_delete','Handler_read_key','Handler_read_next','Handler_read_rnd_next')")
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
			var name, val string
			if err := rows.Scan(&name, &val); err != nil {
				b.Fatal(err)
			}
			if strings.HasPrefix(name, "Innodb_") != (scope == "GLOBAL") {
				continue
			}
			v, err := strconv.ParseFloat(val, 64)
			if err != nil {
				b.Fatalf("%s = %q: %v", name, val, err)
			}
			c[statusNames[name]] = v
		}
		if err := rows.Err(); err != nil {
			b.Fatal(err)
		}
		_ = rows.Close()
	}
	c[cCPU] = cc.threadCPU(b)
	return c
}

// run measures ops of claimCostBatch jobs on a fresh topic, as a drain
// Claims them: on a durable topic Schedule writes every op's rows first,
// in order (not measured), as the enqueues did long before the claims;
// then each op records the claims of the next batch and Complete deletes
// them. Before each op, InnoDB's purge is made to finish what the previous
// one left, and measured: it is part of the cost, and would otherwise run
// in the middle of the next op's statements.
func (cc *claimCostEnv) run(b *testing.B, durable bool, record func(ctx context.Context, js []*queue.Job) error) {
	ctx := context.Background()
	l := cc.l
	topic := fmt.Sprintf("bench_%d", time.Now().UnixNano())

	batches := make([][]*queue.Job, b.N)
	var nj []queue.NewJob
	for n := range batches {
		js := make([]*queue.Job, claimCostBatch)
		for i := range js {
			// Ids in the order of the unique key: the claims come in
			// the order the rows were written, as in a drain.
			id := fmt.Sprintf("order_close:%06d-%02d", n, i)
			payload := []byte(fmt.Sprintf(`{"order_no":"%d-%d","reason":"unpaid"}`, n, i))
			nj = append(nj, queue.NewJob{ID: id, Payload: payload, MaxAttempts: 5})
			js[i] = &queue.Job{Topic: topic, ID: id, Payload: payload, Attempt: 1, MaxAttempts: 5}
		}
		batches[n] = js
	}
	runAt := map[string]int64{}
	var enqueuedAt int64
	if durable {
		for lo := 0; lo < len(nj); lo += 1000 {
			part := nj[lo:min(lo+1000, len(nj))]
			res, sqlNow, err := l.Schedule(ctx, topic, part)
			if err != nil {
				b.Fatal(err)
			}
			for i := range part {
				runAt[part[i].ID] = res[i].RunAt
			}
			enqueuedAt = sqlNow
		}
	}

	// What one read adds to the session's counters itself (InnoDB's see
	// nothing of it): the smallest of a few, since the first reads of a
	// session may open tables.
	self := counters{}
	last := cc.read(ctx, b)
	for i := 0; i < 5; i++ {
		next := cc.read(ctx, b)
		d := next.minus(last)
		if i == 0 || d[cReadKey]+d[cWrite] < self[cReadKey]+self[cWrite] {
			self = d
		}
		last = next
	}
	self[cRedo], self[cPgmod] = 0, 0

	var rec, done, purge counters
	var recTime, doneTime time.Duration
	var prev counters // after the previous op's completion
	b.ResetTimer()
	b.StopTimer()
	for n := 0; n <= b.N; n++ {
		// The purge of the previous op: the connection waits for it, so
		// its CPU is the whole server's, less the connection's own.
		cpu0 := cc.serverCPU()
		cc.waitPurged(ctx, b)
		p := cc.read(ctx, b)
		cpu1 := cc.serverCPU()
		if n > 0 {
			d := p.minus(prev).minus(self)
			d[cCPU] = cpu1 - cpu0 - d[cCPU]
			purge = purge.plus(d)
		}
		if n == b.N {
			break
		}
		js := batches[n]
		now := time.Now().UnixMilli()
		for _, j := range js {
			if durable {
				j.RunAt, j.EnqueuedAt = runAt[j.ID], enqueuedAt
			} else {
				j.RunAt, j.EnqueuedAt = now, now
			}
			j.LeaseUntil = now + 30_000
		}
		c0 := cc.read(ctx, b)
		b.StartTimer()
		t0 := time.Now()
		if err := record(ctx, js); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		b.StopTimer()
		c1 := cc.read(ctx, b)
		b.StartTimer()
		t2 := time.Now()
		if err := opsOf(l).Complete(ctx, refsOf(js)); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		b.StopTimer()
		prev = cc.read(ctx, b)
		recTime += t1.Sub(t0)
		doneTime += t3.Sub(t2)
		rec = rec.plus(c1.minus(c0).minus(self))
		done = done.plus(prev.minus(c1).minus(self))
	}

	jobs := float64(b.N * claimCostBatch)
	all := rec.plus(done).plus(purge)
	for i, unit := range costUnits {
		b.ReportMetric(rec[i]/jobs, "rec-"+unit+"/job")
		b.ReportMetric(done[i]/jobs, "done-"+unit+"/job")
		if i == cRedo || i == cPgmod || i == cCPU {
			b.ReportMetric(purge[i]/jobs, "purge-"+unit+"/job")
			b.ReportMetric(all[i]/jobs, "all-"+unit+"/job")
		}
	}
	b.ReportMetric(float64(recTime.Nanoseconds())/1e3/jobs, "rec-µs/job")
	b.ReportMetric(float64(doneTime.Nanoseconds())/1e3/jobs, "done-µs/job")
	b.ReportMetric(0, "ns/op")
}

// waitPurged returns once InnoDB's purge has caught up (no history left):
// setting innodb_max_purge_lag_wait wakes the purge and waits for it
// (MariaDB 10.5+).
func (cc *claimCostEnv) waitPurged(ctx context.Context, b *testing.B) {
	if _, err := cc.db.ExecContext(ctx, "SET GLOBAL innodb_max_purge_lag_wait = 0"); err != nil {
		b.Fatal(err)
	}
}

package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/delayq/delayq/app/bench"
	"github.com/delayq/delayq/internal/testenv"
)

// On a Redis Cluster the costs are counted on every master, and each
// master's part is reported (the per-node figures of docs/benchmarks.md):
// a topic of one partition is one hash tag, so one master does most of the
// work; with 6 partitions (--partitions) each master does a third, ±10
// points. The durable runs keep their ledger on three MariaDB servers of
// the test's own (--sql-shard): a topic of one partition has its rows on
// one of them, one of 6 partitions a third on each, ±10 points, by each
// server's own count of rows inserted.
func TestClusterPerNodeCosts(t *testing.T) {
	addrs := testenv.StartCluster(t, 3)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	var shards []*gorm.DB
	for i := range 3 {
		srv := testenv.StartMariaDB(t, testenv.MariaDBOptions{})
		srv.Exec(t, "CREATE DATABASE shard", "SET GLOBAL innodb_flush_log_at_trx_commit = 2")
		db, err := gorm.Open(mysql.Open(srv.DSN("root", "", "shard", testenv.DefaultMySQLParams)),
			&gorm.Config{Logger: logger.Default.LogMode(logger.Silent)})
		if err != nil {
			t.Fatalf("shard %d: %v", i, err)
		}
		sqlDB, err := db.DB()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sqlDB.Close() })
		shards = append(shards, db)
	}
	for _, run := range []struct {
		durable    bool
		partitions int
	}{{false, 1}, {true, 1}, {true, 6}} {
		durable := run.durable
		sc, _ := bench.Lookup("drain")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		env := bench.Env{Redis: rdb, DB: testenv.MySQL(t), Partitions: run.partitions}
		if durable {
			env.DB, env.Shards = shards[0], shards[1:]
		}
		r, err := sc.Run(ctx, bench.Options{Env: env, Jobs: 2000, Concurrency: 20,
			ClaimBatch: 50, Durable: durable, Stall: 10 * time.Second})
		cancel()
		if err != nil || !r.OK() || r.Handled != 2000 {
			t.Fatalf("durable %v: %v, %+v", durable, err, r)
		}
		c := r.Costs
		if c == nil || len(c.RedisNodes) != 3 || c.RedisCommands == nil || c.RedisCPUUs == nil {
			t.Fatalf("durable %v: costs %+v, want the three masters' figures and their sums", durable, c)
		}
		var sum int64
		var share, top float64
		for _, n := range c.RedisNodes {
			sum += n.Commands
			share += n.Share
			top = max(top, n.Share)
			if n.CommandsPerJob == nil || n.CPUUsPerJob == nil || n.CPUUs < 0 {
				t.Errorf("durable %v: master %+v: want per-job figures", durable, n)
			}
		}
		if sum == 0 || sum > *c.RedisCommands || share < 0.999 || share > 1.001 {
			t.Errorf("durable %v: masters' commands %d (shares %.3f) against %d in all", durable, sum, share, *c.RedisCommands)
		}
		if run.partitions == 1 && top < 0.5 {
			// One topic, one hash tag: its master does most of the work.
			t.Errorf("durable %v: the busiest master did %.0f%% of the commands; one topic's keys are on one master", durable, 100*top)
		}
		for _, n := range c.RedisNodes {
			if run.partitions > 1 && (n.Share < 0.2333 || n.Share > 0.4333) {
				t.Errorf("%d partitions: master %s did %.1f%% of the commands, want 33%% ± 10", run.partitions, n.Addr, 100*n.Share)
			}
			t.Logf("durable %v, %d partitions: master %s: %d commands (%.1f%%), %.2f/job, %.1f CPU µs/job",
				durable, run.partitions, n.Addr, n.Commands, 100*n.Share, *n.CommandsPerJob, *n.CPUUsPerJob)
		}
		if !durable {
			continue
		}
		if len(c.SQLShards) != 3 {
			t.Fatalf("%d partitions: ledger shards %+v, want three", run.partitions, c.SQLShards)
		}
		var busiest float64
		for _, sh := range c.SQLShards {
			if sh.RowsShare == nil || sh.CommitsPer1k == nil {
				t.Fatalf("%d partitions: shard %+v: want its server's rows and its commits", run.partitions, sh)
			}
			busiest = max(busiest, *sh.RowsShare)
			if run.partitions == 6 && (*sh.RowsShare < 0.2333 || *sh.RowsShare > 0.4333) {
				t.Errorf("6 partitions: ledger shard %d inserted %.1f%% of the rows, want 33%% ± 10", sh.Shard, 100**sh.RowsShare)
			}
			t.Logf("%d partitions: ledger shard %d: %d rows inserted (%.1f%%), %d commits (%.1f per 1,000 jobs)",
				run.partitions, sh.Shard, *sh.RowsInserted, 100**sh.RowsShare, sh.Commits, *sh.CommitsPer1k)
		}
		if run.partitions == 1 && busiest < 0.9 {
			t.Errorf("1 partition: the busiest ledger shard inserted %.0f%% of the rows; one topic's rows are on one shard", 100*busiest)
		}
	}
}

package ledgerops_test

import (
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/internal/unavailable"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// Partition p of any count is on shard p mod n: 5 random topic names of 6
// partitions each have 2 on each of 3 shards; a topic of one partition is
// on one shard, whatever its name.
func TestShardOfSpreadsPartitions(t *testing.T) {
	for i := range 5 {
		topic := fmt.Sprintf("t%x", time.Now().UnixNano()+int64(i))
		per := make([]int, 3)
		for p := range 6 {
			per[dataplane.ShardOf(dataplane.PartitionName(topic, 6, p), 3)]++
		}
		if per[0] != 2 || per[1] != 2 || per[2] != 2 {
			t.Errorf("%s: partitions per shard %v, want 2 each", topic, per)
		}
		if s := dataplane.ShardOf(topic, 3); s < 0 || s > 2 || dataplane.ShardOf(topic, 1) != 0 {
			t.Errorf("%s: shard %d", topic, s)
		}
	}
}

// On three MariaDB databases: a partitioned topic's rows are written,
// recorded and completed on their partitions' shards, a third on each;
// lookups and reschedules find them there; pauses and layouts stay on the
// home shard, which every shard's own steps read them from.
func TestShardsRouteEachRowToItsShard(t *testing.T) {
	ctx := testenv.Context(t)
	var ledgers []*ledger.Ledger
	var dbs []*gorm.DB
	for range 3 {
		db := testenv.MySQL(t)
		l, err := ledger.New(db, ledger.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		ledgers, dbs = append(ledgers, l), append(dbs, db)
	}
	s, err := ledgerops.NewShards(ledgers...)
	if err != nil {
		t.Fatal(err)
	}
	const k, perPart = 6, 50
	names := make([]string, k)
	jobs := make([][]queue.NewJob, k)
	for p := range names {
		names[p] = dataplane.PartitionName("order_close", k, p)
		for i := range perPart {
			jobs[p] = append(jobs[p], queue.NewJob{ID: fmt.Sprintf("o%d-%d", p, i), MaxAttempts: 3})
		}
	}
	out, _, err := s.ScheduleEach(ctx, names, jobs)
	if err != nil {
		t.Fatal(err)
	}
	for p := range out {
		if len(out[p]) != perPart || out[p][0].Duplicate {
			t.Fatalf("partition %d: %+v", p, out[p][:1])
		}
	}
	rows := func(i int) int64 {
		var n int64
		if err := dbs[i].Table(ledgers[i].LedgerTable()).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i := range 3 {
		if n := rows(i); n != 2*perPart {
			t.Fatalf("shard %d holds %d rows, want %d (2 partitions)", i, n, 2*perPart)
		}
	}

	// The worker's steps: record a claim of every partition's first job,
	// complete them; each lands on its shard.
	var claimed []*queue.Job
	for p, name := range names {
		// Inside the worker a claimed job's Topic is its partition's name
		// (its handler gets the topic's, with Partition).
		claimed = append(claimed, &queue.Job{Topic: name, ID: jobs[p][0].ID, Attempt: 1,
			MaxAttempts: 3, RunAt: out[p][0].RunAt, LeaseUntil: time.Now().Add(time.Minute).UnixMilli(), Durable: true})
	}
	if err := s.Record(ctx, claimed, "h:1"); err != nil {
		t.Fatal(err)
	}
	for _, j := range claimed {
		row, err := s.Lookup(ctx, j.Topic, j.ID)
		if err != nil || row == nil {
			t.Fatalf("lookup of %s/%s: %+v %v", j.Topic, j.ID, row, err)
		}
	}
	refs := make([]queue.Ref, len(claimed))
	for i, j := range claimed {
		refs[i] = j.Ref()
	}
	if err := s.Complete(ctx, refs); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if n := rows(i); n != 2*perPart-2 {
			t.Errorf("shard %d holds %d rows after its 2 completions, want %d", i, n, 2*perPart-2)
		}
		var hist int64
		if err := dbs[i].Table(ledgers[i].HistoryTable()).Count(&hist).Error; err != nil {
			t.Fatal(err)
		}
		if hist != 2 {
			t.Errorf("shard %d has %d history rows, want its 2", i, hist)
		}
	}

	// Topic state on the home shard, read by every shard's own steps.
	if _, _, err := s.SetPaused(ctx, "order_close", true, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddLayouts(ctx, "order_close", []int{1, k}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		st, err := s.Shard(i).TopicStates(ctx)
		if err != nil || len(st) != 1 || !st[0].Paused {
			t.Errorf("shard %d's steps read pauses %+v (%v), want the home shard's", i, st, err)
		}
		l, err := s.Shard(i).Layouts(ctx)
		if err != nil || len(l["order_close"]) != 2 {
			t.Errorf("shard %d's steps read layouts %v (%v), want the home shard's", i, l, err)
		}
		if own, _ := ledgers[i].TopicStates(ctx); i > 0 && len(own) != 0 {
			t.Errorf("shard %d keeps pauses of its own: %+v", i, own)
		}
	}
}

// A write over two shards that fails on the second after the first
// committed says its outcome is unknown (the data plane keeps its relay
// note and asks for a recheck), and the first shard's rows stand.
func TestShardsScheduleEachPartlyCommitted(t *testing.T) {
	ctx := testenv.Context(t)
	var ledgers []*ledger.Ledger
	for range 2 {
		l, err := ledger.New(testenv.MySQL(t), ledger.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		ledgers = append(ledgers, l)
	}
	if err := ledgers[1].DB().Exec("DROP TABLE " + ledgers[1].LedgerTable()).Error; err != nil {
		t.Fatal(err)
	}
	s, err := ledgerops.NewShards(ledgers...)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{dataplane.PartitionName("t", 2, 0), dataplane.PartitionName("t", 2, 1)}
	_, _, err = s.ScheduleEach(ctx, names, [][]queue.NewJob{{{ID: "a", MaxAttempts: 1}}, {{ID: "b", MaxAttempts: 1}}})
	if err == nil || !unavailable.OutcomeUnknown(err) {
		t.Fatalf("ScheduleEach with shard 1 failing: %v, want an unknown outcome", err)
	}
	if row, err := s.Lookup(ctx, names[0], "a"); err != nil || row == nil {
		t.Fatalf("shard 0's row: %+v, %v", row, err)
	}
}

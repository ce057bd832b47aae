package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/queue/engine"
	"github.com/delayq/delayq/queue/periodic"
	"github.com/delayq/delayq/recovery"
)

// threeShards returns three migrated ledgers, each on a MySQL database of
// its own, with the tables of models (a shop's own) on each too.
func threeShards(t *testing.T, models ...any) []*ledger.Ledger {
	t.Helper()
	var stores []*ledger.Ledger
	for range 3 {
		db := testenv.MySQL(t)
		if len(models) > 0 {
			if err := db.AutoMigrate(models...); err != nil {
				t.Fatal(err)
			}
		}
		stores = append(stores, migratedLedger(t, db))
	}
	return stores
}

// waitPartitions waits until Run raised topic to k partitions.
func waitPartitions(ctx context.Context, t *testing.T, eng *engine.Engine, topic string, k int) {
	t.Helper()
	testenv.WaitFor(ctx, t, "Run to raise the topic's partitions", func() bool {
		p, err := eng.Partitions(ctx, topic)
		return err == nil && p.Current == k
	})
}

// An engine over three ledger shards (three MariaDB databases) with a
// durable topic of 6 partitions: every partition's rows are on its shard
// (2 partitions, a third of the rows, on each), each shard's relay has its
// own mark and lock, and after Redis lost every key each shard's relay
// reloads its own shard's waiting jobs: all of them run, each once.
func TestEngineOverLedgerShards(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	ctx := testenv.Context(t)
	stores := threeShards(t)
	const topic, k = "order_close", 6
	eng, err := engine.New(rdb, stores[0], engine.Config{
		Queue: queue.Config{Namespace: ns, Horizon: 2 * time.Second,
			TopicDurability: map[string]queue.Durability{topic: queue.DurabilityDurable}},
		Shards:     stores[1:],
		Schedules:  []periodic.Schedule{{Name: "sweep", Spec: "@every 1s", Topic: topic}},
		Partitions: map[string]int{topic: k},
		Relay:      recovery.RelayConfig{Every: 50 * time.Millisecond},
		Logger:     testenv.QuietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		runs = map[string]int{}
	)
	var ran testenv.Counter
	ticked := make(chan *queue.Job, 1)
	if err := eng.Handle(topic, queue.HandlerFunc(func(_ context.Context, j *queue.Job) error {
		if !strings.HasPrefix(j.ID, "o") { // a periodic tick's job
			select {
			case ticked <- j:
			default:
			}
			return nil
		}
		mu.Lock()
		runs[j.ID]++
		mu.Unlock()
		ran.Add(1)
		return nil
	}), queue.TopicConfig{Concurrency: 20}); err != nil {
		t.Fatal(err)
	}
	run := testenv.Start(t, eng.Run)
	waitPartitions(ctx, t, eng, topic, k)

	// 300 jobs due at once and 300 beyond the horizon.
	const now, later = 300, 300
	var jobs []queue.NewJob
	for i := range now + later {
		j := queue.NewJob{ID: fmt.Sprintf("o%04d", i)}
		if i >= now {
			j.Delay = 8 * time.Second // well after the first 300 ran and were counted
		}
		jobs = append(jobs, j)
	}
	for b := 0; b < len(jobs); b += 100 {
		res, err := eng.EnqueueBatch(ctx, topic, jobs[b:b+100])
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Status != queue.BatchCreated {
				t.Fatalf("%s: %v %v", r.ID, r.Status, r.Err)
			}
		}
	}
	ran.WaitAtLeast(ctx, t, now, "the jobs due at once to run")

	// The waiting jobs' rows, counted by each server: a third on each,
	// each shard holding two partitions' rows and none of another's.
	for i, s := range stores {
		page, err := s.List(ctx, ledger.ListFilter{Topic: topic, Limit: later})
		if err != nil {
			t.Fatal(err)
		}
		parts, n := map[string]int{}, 0
		for _, r := range page.Rows {
			if r.State != queue.StateWaiting || !strings.HasPrefix(r.JobID, "o") {
				continue // a job that ran, its settlement not written yet; a periodic tick's
			}
			n++
			parts[r.Topic]++
			if got := dataplane.ShardOf(r.Topic, 3); got != i {
				t.Errorf("shard %d holds a row of %s, whose shard is %d", i, r.Topic, got)
			}
		}
		if n < later*23/100 || n > later*43/100 || len(parts) != 2 {
			t.Errorf("shard %d: %d waiting rows of %d (want 33%% ± 10%%) over partitions %v (want 2)", i, n, later, parts)
		}
	}
	// Each shard's relay passed with its own mark and holds its own lock.
	for i := range 3 {
		mark, lock := ns+":relay", ns+":relay:lock"
		if i > 0 {
			mark, lock = fmt.Sprintf("%s:%d", mark, i), fmt.Sprintf("%s:%d", lock, i)
		}
		testenv.WaitFor(ctx, t, "shard's relay mark and lock", func() bool {
			n, err := rdb.Exists(ctx, mark, lock).Result()
			return err == nil && n == 2
		}, func() string { return mark + " " + lock })
	}

	// Redis loses every key: each shard's relay reloads its own rows.
	if err := testenv.WipeNamespace(ctx, rdb, ns); err != nil {
		t.Fatal(err)
	}
	ran.WaitAtLeast(ctx, t, now+later, "every job to run after Redis lost its data")
	// A periodic tick's job commits with the tick's row on the topic's
	// shard: it goes to the topic's own name, not to a partition that may
	// be on another shard.
	tick := testenv.Receive(ctx, t, ticked, "a periodic tick's job to run")
	if tick.Partition != "" {
		t.Errorf("the tick's job ran from partition %s, want the topic's own name", tick.Partition)
	}
	if err := run.Stop(); err != nil {
		t.Fatal(err)
	}
	for i, s := range stores {
		page, err := s.List(ctx, ledger.ListFilter{Topic: topic, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Rows {
			if got := dataplane.ShardOf(r.Topic, 3); got != i {
				t.Errorf("shard %d holds %s/%s (%s), whose shard is %d", i, r.Topic, r.JobID, r.State, got)
			}
		}
	}
	// The history of every job, each on its partition's shard, in one
	// listing: pages of 100 over the three shards.
	finished := map[string]bool{}
	f := ledger.HistoryFilter{Topic: topic, Limit: 100}
	for {
		rows, next, err := eng.History(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if strings.HasPrefix(r.JobID, "o") {
				finished[r.JobID] = true
			}
		}
		if f.After = next; next == "" {
			break
		}
	}
	if len(finished) != len(jobs) {
		t.Errorf("the history lists %d of the %d jobs", len(finished), len(jobs))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, j := range jobs {
		if runs[j.ID] != 1 {
			t.Errorf("%s ran %d times, want once", j.ID, runs[j.ID])
		}
	}
	if tot := eng.RelayTotals(); tot.Loaded+tot.Reloaded < later {
		t.Errorf("relays loaded %d and reloaded %d jobs in all, want the %d waiting", tot.Loaded, tot.Reloaded, later)
	}
}

// order is a shop's order, in a table of its own on each ledger shard:
// the shop shards its orders by customer with the engine's function.
type order struct {
	ID       string `gorm:"primaryKey;size:64"`
	Customer string `gorm:"size:64"`
}

// The shop's pattern over three ledger shards: a customer's order and its
// close job, partitioned by the customer, commit together in one
// transaction on the customer's shard; a job that would go to another
// shard is refused before anything is written, and the order rolls back
// with it; a rolled-back transaction leaves neither.
func TestTransactionOnTheCustomersShard(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	ctx := testenv.Context(t)
	stores := threeShards(t, &order{})
	const topic = "order_close"
	eng, err := engine.New(rdb, stores[0], engine.Config{
		Queue:  queue.Config{Namespace: ns, TopicDurability: map[string]queue.Durability{topic: queue.DurabilityDurable}},
		Shards: stores[1:], NoRecovery: true, Logger: testenv.QuietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	// A process that read the topic's one partition before the raise, and
	// would not read it again for an hour.
	stale, err := engine.New(rdb, stores[0], engine.Config{
		Queue:  queue.Config{Namespace: ns, LayoutRefresh: time.Hour, TopicDurability: map[string]queue.Durability{topic: queue.DurabilityDurable}},
		Shards: stores[1:], NoRecovery: true, Logger: testenv.QuietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := stale.Partitions(ctx, topic); err != nil || p.Current != 1 {
		t.Fatalf("before the raise: %+v, %v", p, err)
	}
	if _, err := eng.SetPartitions(ctx, topic, 6); err != nil {
		t.Fatal(err)
	}
	place := func(shard int, o order, key string, fail error) error {
		return eng.TransactionOn(ctx, shard, func(tx *gorm.DB, enq *ledger.TxEnqueuer) error {
			if err := tx.Create(&o).Error; err != nil {
				return err
			}
			if _, err := enq.Enqueue(ctx, topic, queue.NewJob{ID: "close:" + o.ID, PartitionKey: key, Delay: time.Hour}); err != nil {
				return err
			}
			return fail
		})
	}
	const customers = 30
	for c := range customers {
		cust := fmt.Sprintf("cust-%d", c)
		if err := place(eng.ShardOfKey(cust), order{ID: fmt.Sprintf("o%d", c), Customer: cust}, cust, nil); err != nil {
			t.Fatalf("%s on shard %d: %v", cust, eng.ShardOfKey(cust), err)
		}
	}
	// Each shard holds its customers' orders and exactly their close jobs.
	for i, s := range stores {
		db := eng.LedgerShard(i).DB()
		var orders []order
		if err := db.WithContext(ctx).Find(&orders).Error; err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{}
		for _, o := range orders {
			if eng.ShardOfKey(o.Customer) != i {
				t.Errorf("shard %d holds %s's order, whose shard is %d", i, o.Customer, eng.ShardOfKey(o.Customer))
			}
			want["close:"+o.ID] = true
		}
		page, err := s.List(ctx, ledger.ListFilter{Topic: topic, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, r := range page.Rows {
			got[r.JobID] = true
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("shard %d: close jobs %v, want its orders' %v", i, got, want)
		}
	}

	// A close job keyed to another shard's customer: refused, nothing written.
	cust := "cust-0"
	other := (eng.ShardOfKey(cust) + 1) % 3
	err = place(other, order{ID: "stray", Customer: cust}, cust, nil)
	var ve *queue.ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, queue.ErrOtherShard) || ve.Field != "partition_key" {
		t.Fatalf("a job of shard %d in a transaction on shard %d: %v, want a ValidationError of partition_key wrapping ErrOtherShard", eng.ShardOfKey(cust), other, err)
	}
	// A transaction that fails after its enqueue: neither stays.
	if err := place(eng.ShardOfKey(cust), order{ID: "undone", Customer: cust}, cust, errors.New("payment refused")); err == nil {
		t.Fatal("the failed transaction returned nil")
	}
	for i := range 3 {
		var n int64
		if err := eng.LedgerShard(i).DB().WithContext(ctx).Model(&order{}).Where("id IN ?", []string{"stray", "undone"}).Count(&n).Error; err != nil || n != 0 {
			t.Errorf("shard %d: %d refused or rolled-back orders stayed (%v)", i, n, err)
		}
	}
	for _, id := range []string{"close:stray", "close:undone"} {
		if info, err := eng.Find(ctx, topic, id); err != nil || info.State != queue.StateUnknown {
			t.Errorf("%s: %+v %v, want no such job", id, info, err)
		}
	}
	// The process with the old copy reads the layout again before it
	// refuses: a customer of another shard than the topic's own name's
	// commits on its own shard.
	late := "cust-0"
	for c := 0; dataplane.ShardOfKey(late, 3) == dataplane.ShardOf(topic, 3); c++ {
		late = fmt.Sprintf("cust-%d", c)
	}
	err = stale.TransactionOn(ctx, stale.ShardOfKey(late), func(tx *gorm.DB, enq *ledger.TxEnqueuer) error {
		if err := tx.Create(&order{ID: "late", Customer: late}).Error; err != nil {
			return err
		}
		_, err := enq.Enqueue(ctx, topic, queue.NewJob{ID: "close:late", PartitionKey: late, Delay: time.Hour})
		return err
	})
	if err != nil {
		t.Errorf("a transaction of a process whose layout predates the raise: %v, want it committed", err)
	}

	// Redis down: the jobs route by the layout stored in SQL (the home
	// shard's), and the order and its close job commit, as on a ledger
	// of one shard; the relay pushes the job once Redis is back.
	down := redis.NewClient(&redis.Options{Addr: testenv.RefusedAddr(t), MaxRetries: -1})
	t.Cleanup(func() { _ = down.Close() })
	cut, err := engine.New(down, stores[0], engine.Config{
		Queue:  queue.Config{Namespace: ns, TopicDurability: map[string]queue.Durability{topic: queue.DurabilityDurable}},
		Shards: stores[1:], NoRecovery: true, Logger: testenv.QuietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	err = cut.TransactionOn(ctx, cut.ShardOfKey(cust), func(tx *gorm.DB, enq *ledger.TxEnqueuer) error {
		if err := tx.Create(&order{ID: "offline", Customer: cust}).Error; err != nil {
			return err
		}
		_, err := enq.Enqueue(ctx, topic, queue.NewJob{ID: "close:offline", PartitionKey: cust, Delay: time.Hour})
		return err
	})
	if err != nil {
		t.Errorf("a transaction with Redis down: %v, want it committed", err)
	}
	if page, err := eng.LedgerShard(eng.ShardOfKey(cust)).List(ctx, ledger.ListFilter{Topic: topic, Limit: 100}); err != nil || !slices.ContainsFunc(page.Rows, func(r ledger.Entry) bool { return r.JobID == "close:offline" }) {
		t.Errorf("the close job of the transaction with Redis down is not on the customer's shard (%v)", err)
	}
	// The topic's count in SQL (no relay here to count) sums the shards':
	// the 30 customers' close jobs, the late one and the offline one.
	if info, err := eng.Inspector().Topic(ctx, topic); err != nil || info.SQL == nil || info.SQL.Waiting != customers+2 {
		t.Errorf("the topic's waiting jobs in SQL: %+v, %v; want %d over the three shards", info.SQL, err, customers+2)
	}
	if err := eng.TransactionOn(ctx, 3, func(*gorm.DB, *ledger.TxEnqueuer) error { return nil }); err == nil {
		t.Error("a transaction on shard 3 of 3 was accepted")
	}
}

// Each shard's recoverer checks the partitions whose rows it holds: after
// Redis lost the keys of 6 partitions (not the topic set nor the layout)
// while their 60 jobs waited for a retry an hour away, one recovery finds each partition lost and puts every one
// of them back at once, on whichever shard its row is. A shard-0
// recoverer that wrote every lost partition's epoch marker would leave
// the other shards' jobs for their retry times.
func TestRecoveryPerShardRestoresItsPartitions(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	ctx := testenv.Context(t)
	stores := threeShards(t)
	const topic, jobs = "order_close", 60
	eng, err := engine.New(rdb, stores[0], engine.Config{
		Queue: queue.Config{Namespace: ns,
			TopicDurability: map[string]queue.Durability{topic: queue.DurabilityDurable}},
		Shards:     stores[1:],
		Partitions: map[string]int{topic: 6},
		Recovery:   recovery.Config{Schedule: "@every 1h"},
		Logger:     testenv.QuietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var failed testenv.Counter
	if err := eng.Handle(topic, queue.HandlerFunc(func(context.Context, *queue.Job) error {
		failed.Add(1)
		return queue.RetryAfter(errors.New("payment service down"), time.Hour)
	}), queue.TopicConfig{Concurrency: 20}); err != nil {
		t.Fatal(err)
	}
	run := testenv.Start(t, eng.Run)
	waitPartitions(ctx, t, eng, topic, 6)
	var batch []queue.NewJob
	for i := range jobs {
		batch = append(batch, queue.NewJob{ID: fmt.Sprintf("o%02d", i)})
	}
	if _, err := eng.EnqueueBatch(ctx, topic, batch); err != nil {
		t.Fatal(err)
	}
	failed.WaitAtLeast(ctx, t, jobs, "every job to fail once")
	testenv.WaitFor(ctx, t, "every job's retry in its shard's ledger", func() bool {
		n := 0
		for _, s := range stores {
			page, err := s.List(ctx, ledger.ListFilter{State: queue.StateRetrying, Topic: topic, Limit: jobs})
			if err != nil {
				return false
			}
			n += len(page.Rows)
		}
		return n == jobs
	})
	if err := run.Stop(); err != nil {
		t.Fatal(err)
	}
	// The partitions' keys go (their master lost its data), while the
	// topic set and the layout, in other slots, stay: every recoverer
	// sees every partition.
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(ctx, cursor, ns+":{"+topic+"~*", 500).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if err := rdb.Unlink(ctx, k).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	rep, err := eng.Recover(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	lost := map[string]bool{}
	for _, l := range rep.DataLoss {
		lost[l.Topic] = true
	}
	if rep.Reenqueued != jobs || len(lost) != 6 {
		t.Errorf("recovery put back %d of the %d retrying jobs and found %d partitions lost (%v), want all of them and 6", rep.Reenqueued, jobs, len(lost), rep.DataLoss)
	}
}

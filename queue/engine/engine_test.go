package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/queue/engine"
	"github.com/delayq/delayq/queue/periodic"
	"github.com/delayq/delayq/recovery"
)

// TestNewRefusesConfigsThatCannotWork: what cannot work is refused when
// the engine is built, with an error naming the field, before anything
// runs.
func TestNewRefusesConfigsThatCannotWork(t *testing.T) {
	rdb, _ := testenv.MiniRedis(t)
	store, err := ledger.New(testenv.SQLite(t), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		nilR bool
		nilS bool
		cfg  engine.Config
		want string
	}{
		{name: "no Redis", nilR: true, want: "Redis client is required"},
		{name: "no store", nilS: true, want: "store (the SQL ledger) is required"},
		{name: "a second store", cfg: engine.Config{Queue: queue.Config{Store: store}}, want: "Config.Queue.Store"},
		{name: "a durable topic that is not a name", cfg: engine.Config{Queue: queue.Config{
			TopicDurability: map[string]queue.Durability{"a b": queue.DurabilityDurable}}}, want: "TopicDurability"},
		{name: "grace within the heartbeat", cfg: engine.Config{
			Worker:   queue.WorkerConfig{Topic: queue.TopicConfig{Lease: time.Minute}},
			Recovery: recovery.Config{Grace: 10 * time.Second}}, want: "Grace"},
		{name: "a schedule that cannot parse", cfg: engine.Config{Schedules: []periodic.Schedule{
			{Name: "x", Spec: "every day", Topic: "t"}}}, want: "every day"},
		{name: "no partitions", cfg: engine.Config{Partitions: map[string]int{"t": 0}}, want: "Config.Partitions[t]"},
		{name: "partitions of a topic that is not a name", cfg: engine.Config{Partitions: map[string]int{"a b": 2}}, want: "Config.Partitions"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, s := rdb, store
			if c.nilR {
				r = nil
			}
			if c.nilS {
				s = nil
			}
			e, err := engine.New(r, s, c.cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New: %v (engine %v), want an error naming %q", err, e, c.want)
			}
		})
	}
}

// TestRunStartsWhatTheConfigNeeds, on Redis and MariaDB: one Run starts
// the worker, the relay (a durable job due beyond a 1 s horizon reaches
// its handler), the recoverer (its start-up run is reported) and the
// periodic schedules (a tick runs); when its context ends it stops them
// all and returns nil, with every job settled.
func TestRunStartsWhatTheConfigNeeds(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	store := migratedLedger(t, testenv.MySQL(t))
	ctx := testenv.Context(t)
	eng, err := engine.New(rdb, store, engine.Config{
		Queue: queue.Config{Namespace: ns, Horizon: time.Second,
			TopicDurability: map[string]queue.Durability{"close": queue.DurabilityDurable}},
		Schedules: []periodic.Schedule{{Name: "tick", Spec: "@every 1s", Topic: "ticks"}},
		Logger:    testenv.QuietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan *queue.Job, 1)
	var ticks atomic.Int64
	ticked := make(chan struct{}, 1)
	if err := eng.Handle("close", queue.HandlerFunc(func(_ context.Context, j *queue.Job) error {
		closed <- j
		return nil
	}), queue.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	if err := eng.Handle("ticks", queue.HandlerFunc(func(context.Context, *queue.Job) error {
		if ticks.Add(1) == 1 {
			ticked <- struct{}{}
		}
		return nil
	}), queue.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	err = eng.Transaction(ctx, func(tx *gorm.DB, enq *ledger.TxEnqueuer) error {
		_, err := enq.Enqueue(ctx, "close", queue.NewJob{ID: "o1", Delay: 2 * time.Second})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if info, err := eng.Find(ctx, "close", "o1"); err != nil || !info.SQLOnly {
		t.Fatalf("the job beyond the horizon: %+v, %v; want it in SQL only", info, err)
	}

	run := testenv.Start(t, eng.Run)
	j := testenv.Receive(ctx, t, closed, "the durable job beyond the horizon to run")
	if j.ID != "o1" || !j.Durable {
		t.Errorf("ran %s (durable %v), want the durable o1", j.ID, j.Durable)
	}
	testenv.Receive(ctx, t, ticked, "a periodic tick to run")
	if reps := eng.RecoveryReports(); len(reps) == 0 {
		t.Error("the recoverer did not run at start")
	}
	if err := eng.Handle("late", queue.HandlerFunc(func(context.Context, *queue.Job) error { return nil }), queue.TopicConfig{}); err == nil {
		t.Error("Handle after Run was accepted")
	}
	if err := run.Stop(); err != nil {
		t.Fatalf("Run returned %v after its context ended, want nil", err)
	}
	if err := eng.Run(ctx); err == nil {
		t.Error("a second Run was accepted")
	}
	// The durable job settled: its row is gone.
	rows, err := store.List(ctx, ledger.ListFilter{Topic: "close", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows.Rows) != 0 {
		t.Errorf("the close job's row is still in the ledger: %+v", rows.Rows)
	}
}

// TestNoRecoveryWarnsOfDurableTopics: a process that runs no relay says
// that a durable topic it handles depends on another process's relay.
func TestNoRecoveryWarnsOfDurableTopics(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	store := migratedLedger(t, testenv.SQLite(t))
	ctx := testenv.Context(t)
	log := testenv.QuietLogger()
	var buf testenv.SyncBuffer
	log.SetOutput(&buf)
	eng, err := engine.New(rdb, store, engine.Config{NoRecovery: true, Logger: log,
		Queue: queue.Config{Namespace: ns, Durability: queue.DurabilityDurable}})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Handle("close", queue.HandlerFunc(func(context.Context, *queue.Job) error { return nil }), queue.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	run := testenv.Start(t, eng.Run)
	testenv.WaitFor(ctx, t, "the warning", func() bool { return strings.Contains(buf.String(), "no relay in this process") })
	if err := run.Stop(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "relay started") || strings.Contains(buf.String(), "recoverer started") {
		t.Errorf("NoRecovery started the relay or the recoverer:\n%s", buf.String())
	}
}

// TestHandleRefusesAHeartbeatWithinTheGrace: a topic whose heartbeat is
// not shorter than the recoverer's grace is refused, since recovery would
// take its live worker's jobs for lost; a nil handler too.
func TestHandleRefusesAHeartbeatWithinTheGrace(t *testing.T) {
	rdb, _ := testenv.MiniRedis(t)
	store, err := ledger.New(testenv.SQLite(t), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(rdb, store, engine.Config{Recovery: recovery.Config{Grace: 30 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	h := queue.HandlerFunc(func(context.Context, *queue.Job) error { return nil })
	if err := eng.Handle("slow", h, queue.TopicConfig{Lease: 2 * time.Minute}); err == nil || !strings.Contains(err.Error(), "Recovery.Grace") {
		t.Errorf("a 40s heartbeat against a 30s grace: %v, want refused naming Recovery.Grace", err)
	}
	if err := eng.Handle("fine", h, queue.TopicConfig{Lease: time.Minute, Heartbeat: 10 * time.Second}); err != nil {
		t.Errorf("a 10s heartbeat against a 30s grace: %v", err)
	}
	if err := eng.Handle("nil", nil, queue.TopicConfig{}); err == nil {
		t.Error("a nil handler was accepted")
	}
	if got := eng.HandledTopics(); len(got) != 1 || got[0] != "fine" {
		t.Errorf("handled %v, want [fine]", got)
	}
}

// Run raises the partition counts of Config.Partitions (never lowers one),
// before its worker claims: the worker claims from every partition.
func TestRunRaisesConfiguredPartitions(t *testing.T) {
	rdb, ns := testenv.MiniRedis(t)
	store := migratedLedger(t, testenv.SQLite(t))
	ctx := testenv.Context(t)
	first, err := engine.New(rdb, store, engine.Config{Queue: queue.Config{Namespace: ns}, NoRecovery: true, Logger: testenv.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.SetPartitions(ctx, "low", 8); err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(rdb, store, engine.Config{Queue: queue.Config{Namespace: ns}, NoRecovery: true, Logger: testenv.QuietLogger(),
		Partitions: map[string]int{"close": 4, "low": 2}})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan *queue.Job, 1)
	if err := eng.Handle("close", queue.HandlerFunc(func(_ context.Context, j *queue.Job) error {
		ran <- j
		return nil
	}), queue.TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	run := testenv.Start(t, eng.Run)
	testenv.WaitFor(ctx, t, "Run to raise close's partitions", func() bool {
		p, err := eng.Partitions(ctx, "close")
		return err == nil && p.Current == 4
	})
	if _, err := eng.Enqueue(ctx, "close", queue.NewJob{ID: "o1"}); err != nil {
		t.Fatal(err)
	}
	j := testenv.Receive(ctx, t, ran, "the job to run")
	if j.Topic != "close" || !strings.HasPrefix(j.Partition, "close~4.") {
		t.Errorf("ran from topic %q partition %q, want one of close's 4", j.Topic, j.Partition)
	}
	for topic, want := range map[string]string{"close": "{4 [1 4]}", "low": "{8 [1 8]}"} {
		p, err := eng.Partitions(ctx, topic)
		if err != nil || fmt.Sprint(p) != want {
			t.Errorf("%s: %v %v, want %s", topic, p, err, want)
		}
	}
	if err := run.Stop(); err != nil {
		t.Fatal(err)
	}
}

package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/glebarez/sqlite"
	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/delayq/delayq/jobs/httptarget"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/queue/engine"
	"github.com/delayq/delayq/queue/periodic"
)

// The examples run on an in-process Redis (miniredis) and an in-memory
// SQLite ledger; in production, give New a go-redis client of your Redis
// (single node, Sentinel or Cluster) and a ledger on MySQL.

// newEngine builds an engine with cfg on a fresh in-process Redis and
// SQLite ledger; close releases them.
func newEngine(cfg engine.Config) (eng *engine.Engine, close func()) {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	db, err := gorm.Open(sqlite.Open(":memory:"), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		panic(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		panic(err)
	}
	sqlDB.SetMaxOpenConns(1) // every connection to ":memory:" is a database of its own
	store, err := ledger.New(db, ledger.Options{})
	if err != nil {
		panic(err)
	}
	if err := store.Migrate(context.Background()); err != nil {
		panic(err)
	}
	l := logrus.New()
	l.SetOutput(io.Discard) // the examples' output is only what they print
	cfg.Logger = l
	eng = engine.Must(engine.New(rdb, store, cfg))
	return eng, func() { _ = sqlDB.Close(); _ = rdb.Close(); mr.Close() }
}

// start runs eng until the returned stop is called; stop waits for the
// graceful shutdown (SIGTERM in a real program).
func start(eng *engine.Engine) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			panic(err)
		}
	}
}

// durable makes every topic durable, with a horizon of h.
func durable(h time.Duration) engine.Config {
	return engine.Config{Queue: queue.Config{Durability: queue.DurabilityDurable, Horizon: h}}
}

// A redis topic: the job waits in Redis, and is written to the ledger when
// a worker claims it, before its handler runs.
func Example() {
	eng, closeAll := newEngine(engine.Config{})
	defer closeAll()
	ran := make(chan struct{})
	err := eng.Handle("order_close", queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		defer close(ran)
		fmt.Printf("closing %s, attempt %d\n", j.Payload, j.Attempt)
		return nil
	}), queue.TopicConfig{Concurrency: 4})
	if err != nil {
		panic(err)
	}
	r, err := eng.Enqueue(context.Background(), "order_close", queue.NewJob{ID: "order_close:1", Payload: []byte("order 1")})
	if err != nil {
		panic(err)
	}
	fmt.Println("enqueued:", r.Duplicate == false)
	stop := start(eng)
	<-ran
	stop()
	// Output:
	// enqueued: true
	// closing order 1, attempt 1
}

// A durable topic with a transactional enqueue: the order row and the job
// that closes it commit together, then the job is pushed to Redis.
func ExampleEngine_Transaction() {
	eng, closeAll := newEngine(durable(time.Hour))
	defer closeAll()
	ctx := context.Background()
	db := eng.Store().DB()
	if err := db.Exec("CREATE TABLE orders (no TEXT PRIMARY KEY)").Error; err != nil {
		panic(err)
	}
	ran := make(chan string, 1)
	if err := eng.Handle("order_close", queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		ran <- j.ID
		return nil
	}), queue.TopicConfig{}); err != nil {
		panic(err)
	}
	err := eng.Transaction(ctx, func(tx *gorm.DB, enq *ledger.TxEnqueuer) error {
		if err := tx.Exec("INSERT INTO orders (no) VALUES ('1001')").Error; err != nil {
			return err // rolled back: no job anywhere
		}
		_, err := enq.Enqueue(ctx, "order_close", queue.NewJob{ID: "order_close:1001"})
		return err
	})
	if err != nil {
		panic(err)
	}
	stop := start(eng)
	fmt.Println("ran:", <-ran)
	stop()
	// Output:
	// ran: order_close:1001
}

// A shop whose orders are sharded by customer partitions its close jobs by
// the same key: the order row and its close job commit together, and all
// of one customer's close jobs are on one partition (docs/design.md §7.1).
func ExampleEngine_Transaction_partitioned() {
	eng, closeAll := newEngine(durable(time.Hour))
	defer closeAll()
	ctx := context.Background()
	if _, err := eng.SetPartitions(ctx, "order_close", 4); err != nil {
		panic(err)
	}
	db := eng.Store().DB()
	if err := db.Exec("CREATE TABLE orders (no TEXT PRIMARY KEY, customer TEXT)").Error; err != nil {
		panic(err)
	}
	ran := make(chan *queue.Job, 2)
	if err := eng.Handle("order_close", queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		ran <- j
		return nil
	}), queue.TopicConfig{}); err != nil {
		panic(err)
	}
	for _, no := range []string{"1001", "1002"} {
		err := eng.Transaction(ctx, func(tx *gorm.DB, enq *ledger.TxEnqueuer) error {
			if err := tx.Exec("INSERT INTO orders (no, customer) VALUES (?, 'c42')", no).Error; err != nil {
				return err // rolled back: no job anywhere
			}
			_, err := enq.Enqueue(ctx, "order_close", queue.NewJob{ID: "order_close:" + no, PartitionKey: "customer:c42"})
			return err
		})
		if err != nil {
			panic(err)
		}
	}
	stop := start(eng)
	a, b := <-ran, <-ran
	stop()
	fmt.Println("topic:", a.Topic, b.Topic)
	fmt.Println("one partition:", a.Partition == b.Partition && strings.HasPrefix(a.Partition, "order_close~4."))
	// Output:
	// topic: order_close order_close
	// one partition: true
}

// EnqueueTx joins a transaction the caller runs: a rollback leaves no job.
func ExampleEngine_EnqueueTx() {
	eng, closeAll := newEngine(durable(time.Hour))
	defer closeAll()
	ctx := context.Background()
	failed := errors.New("payment service said no")
	err := eng.Store().DB().WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := eng.EnqueueTx(tx, "order_close", queue.NewJob{ID: "order_close:1", Delay: time.Hour}); err != nil {
			return err
		}
		return failed // rolls the job back with everything else
	})
	fmt.Println("transaction:", err)
	info, err := eng.Find(ctx, "order_close", "order_close:1")
	if err != nil {
		panic(err)
	}
	fmt.Println("after the rollback:", info.State)

	err = eng.Store().DB().WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return eng.EnqueueTx(tx, "order_close", queue.NewJob{ID: "order_close:1", Delay: time.Hour})
	})
	info, _ = eng.Find(ctx, "order_close", "order_close:1")
	fmt.Println("after the commit:", err, info.State)
	// Output:
	// transaction: payment service said no
	// after the rollback: unknown
	// after the commit: <nil> waiting
}

// A durable job due beyond the horizon waits in SQL only; the relay that
// Run starts loads it into Redis as it comes within the horizon, and the
// worker runs it when it is due.
func Example_horizon() {
	eng, closeAll := newEngine(durable(time.Second))
	defer closeAll()
	ctx := context.Background()
	ran := make(chan time.Time, 1)
	if err := eng.Handle("reminder", queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		ran <- time.Now()
		return nil
	}), queue.TopicConfig{}); err != nil {
		panic(err)
	}
	if _, err := eng.Enqueue(ctx, "reminder", queue.NewJob{ID: "r1", Delay: 1500 * time.Millisecond}); err != nil {
		panic(err)
	}
	info, err := eng.Find(ctx, "reminder", "r1")
	if err != nil {
		panic(err)
	}
	fmt.Println("in SQL only:", info.SQLOnly)
	stop := start(eng)
	at := <-ran
	stop()
	fmt.Println("ran when due:", !at.Before(info.Job.RunTime()))
	// Output:
	// in SQL only: true
	// ran when due: true
}

// Pause stops every worker of the deployment from claiming a topic's jobs;
// they keep falling due and run after Resume.
func ExampleEngine_Pause() {
	eng, closeAll := newEngine(engine.Config{})
	defer closeAll()
	ctx := context.Background()
	ran := make(chan string, 1)
	if err := eng.Handle("emails", queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		ran <- j.ID
		return nil
	}), queue.TopicConfig{}); err != nil {
		panic(err)
	}
	st, err := eng.Pause(ctx, "emails", "ops:alice")
	if err != nil {
		panic(err)
	}
	fmt.Println("paused by:", st.By)
	if _, err := eng.Enqueue(ctx, "emails", queue.NewJob{ID: "welcome:7"}); err != nil {
		panic(err)
	}
	stop := start(eng)
	stats, _ := eng.Stats(ctx, "emails")
	fmt.Println("due while paused:", stats.DueNow)
	if _, err := eng.Resume(ctx, "emails", "ops:alice"); err != nil {
		panic(err)
	}
	fmt.Println("ran after resume:", <-ran)
	stop()
	// Output:
	// paused by: ops:alice
	// due while paused: 1
	// ran after resume: welcome:7
}

// Reschedule moves a waiting job's due time: here from an hour ahead to
// now.
func ExampleEngine_Reschedule() {
	eng, closeAll := newEngine(engine.Config{})
	defer closeAll()
	ctx := context.Background()
	ran := make(chan string, 1)
	if err := eng.Handle("order_close", queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		ran <- j.ID
		return nil
	}), queue.TopicConfig{}); err != nil {
		panic(err)
	}
	if _, err := eng.Enqueue(ctx, "order_close", queue.NewJob{ID: "order_close:9", Delay: time.Hour}); err != nil {
		panic(err)
	}
	stop := start(eng)
	r, err := eng.Reschedule(ctx, "order_close", "order_close:9", queue.RescheduleIn(0))
	if err != nil {
		panic(err)
	}
	fmt.Println("moved earlier by about an hour:", r.OldRunAt-r.RunAt > int64(59*time.Minute/time.Millisecond))
	fmt.Println("ran:", <-ran)
	stop()
	// Output:
	// moved earlier by about an hour: true
	// ran: order_close:9
}

// A periodic schedule: each tick is enqueued once, whichever process
// claims it, and runs like any job of its topic.
func Example_periodic() {
	eng, closeAll := newEngine(engine.Config{Schedules: []periodic.Schedule{
		{Name: "nightly-report", Spec: "@every 1s", Topic: "reports", Payload: []byte("sales")},
	}})
	defer closeAll()
	ran := make(chan string, 1)
	if err := eng.Handle("reports", queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		select {
		case ran <- string(j.Payload):
		default: // a later tick
		}
		return nil
	}), queue.TopicConfig{}); err != nil {
		panic(err)
	}
	list, err := eng.Schedules(context.Background())
	if err != nil {
		panic(err)
	}
	fmt.Println("schedule:", list[0].Name, list[0].Spec)
	stop := start(eng)
	fmt.Println("tick ran with payload:", <-ran)
	stop()
	// Output:
	// schedule: nightly-report @every 1s
	// tick ran with payload: sales
}

// A rate-limited topic: handler starts are capped per second across every
// worker of the deployment, whatever the backlog.
func Example_rateLimit() {
	eng, closeAll := newEngine(engine.Config{})
	defer closeAll()
	ctx := context.Background()
	var mu sync.Mutex
	var starts []time.Time
	all := make(chan struct{})
	if err := eng.Handle("sms", queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		mu.Lock()
		defer mu.Unlock()
		if starts = append(starts, time.Now()); len(starts) == 3 {
			close(all)
		}
		return nil
	}), queue.TopicConfig{Concurrency: 10, RateLimit: 2, RateBurst: 1}); err != nil {
		panic(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if _, err := eng.Enqueue(ctx, "sms", queue.NewJob{ID: id}); err != nil {
			panic(err)
		}
	}
	stop := start(eng)
	<-all
	stop()
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	// 2 per second with a burst of 1: the third start comes about a
	// second after the first.
	fmt.Println("3 jobs spread over at least 0.9 s:", starts[2].Sub(starts[0]) >= 900*time.Millisecond)
	// Output:
	// 3 jobs spread over at least 0.9 s: true
}

// A shared pool of handlers: two topics share 4 slots, split 3 to 1 while
// both have due jobs; either alone may use all 4.
func Example_pool() {
	eng, closeAll := newEngine(engine.Config{Worker: queue.WorkerConfig{
		Pools: []queue.Pool{{Name: "notify", Concurrency: 4, Weights: map[string]int{"urgent": 3, "bulk": 1}}},
	}})
	defer closeAll()
	ctx := context.Background()
	var running, most atomic.Int64
	var wg sync.WaitGroup
	h := queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		defer wg.Done()
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(2 * time.Millisecond) // the work
		return nil
	})
	for _, topic := range []string{"urgent", "bulk"} {
		if err := eng.Handle(topic, h, queue.TopicConfig{}); err != nil {
			panic(err)
		}
		for i := range 20 {
			wg.Add(1)
			if _, err := eng.Enqueue(ctx, topic, queue.NewJob{ID: fmt.Sprint(topic, i)}); err != nil {
				panic(err)
			}
		}
	}
	stop := start(eng)
	wg.Wait()
	stop()
	fmt.Println("40 jobs, at most 4 at once:", most.Load() <= 4)
	// Output:
	// 40 jobs, at most 4 at once: true
}

// Jobs with one ordering key run one at a time, in due order, whatever
// the handlers free: an order's refund never runs before (or beside) its
// close, though enqueued first and with a higher priority.
func Example_orderingKey() {
	eng, closeAll := newEngine(engine.Config{})
	defer closeAll()
	ctx := context.Background()
	var mu sync.Mutex
	var ran []string
	var wg sync.WaitGroup
	err := eng.Handle("orders", queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		defer wg.Done()
		mu.Lock()
		ran = append(ran, j.ID)
		mu.Unlock()
		return nil
	}), queue.TopicConfig{Concurrency: 8})
	if err != nil {
		panic(err)
	}
	// Due times in the future: one in the past is due at its enqueue.
	now := time.Now().UnixMilli()
	for i, j := range []queue.NewJob{
		{ID: "refund:42", OrderingKey: "order:42", RunAt: now + 550, Priority: 3},
		{ID: "notify:42", OrderingKey: "order:42", RunAt: now + 600},
		{ID: "close:42", OrderingKey: "order:42", RunAt: now + 500},
	} {
		wg.Add(1)
		if _, err := eng.Enqueue(ctx, "orders", j); err != nil {
			panic(fmt.Sprint(i, err))
		}
	}
	stop := start(eng)
	wg.Wait()
	stop()
	fmt.Println(strings.Join(ran, ", "))
	// Output:
	// close:42, refund:42, notify:42
}

// An HTTP target: the handler of a topic is an endpoint of another
// service, called with the job's payload and headers naming it; its
// answer decides the outcome.
func Example_httpTarget() {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- fmt.Sprintf("%s %s, job %s, attempt %s", r.Method, body, r.Header.Get(httptarget.HeaderJobID), r.Header.Get(httptarget.HeaderAttempt))
		w.WriteHeader(http.StatusNoContent) // done
	}))
	defer srv.Close()
	eng, closeAll := newEngine(engine.Config{})
	defer closeAll()
	target, err := httptarget.New(httptarget.Config{URL: srv.URL + "/hooks/close-order"})
	if err != nil {
		panic(err)
	}
	defer target.Close()
	if err := eng.Handle("php_close", target, queue.TopicConfig{}); err != nil {
		panic(err)
	}
	if _, err := eng.Enqueue(context.Background(), "php_close", queue.NewJob{ID: "o-77", Payload: []byte(`{"order":77}`)}); err != nil {
		panic(err)
	}
	stop := start(eng)
	fmt.Println(<-got)
	stop()
	// Output:
	// POST {"order":77}, job o-77, attempt 1
}

// Cancel removes a job that waits, from Redis and from the store.
func ExampleEngine_Cancel() {
	eng, closeAll := newEngine(durable(time.Hour))
	defer closeAll()
	ctx := context.Background()
	if _, err := eng.Enqueue(ctx, "order_close", queue.NewJob{ID: "order_close:5", Delay: 30 * time.Minute}); err != nil {
		panic(err)
	}
	j, err := eng.Cancel(ctx, "order_close", "order_close:5")
	if err != nil {
		panic(err)
	}
	fmt.Println("cancelled:", j.ID)
	info, err := eng.Find(ctx, "order_close", "order_close:5")
	if err != nil {
		panic(err)
	}
	fmt.Println("afterwards:", info.State)
	// Output:
	// cancelled: order_close:5
	// afterwards: unknown
}

// A job whose handler gives up for good is dead: it keeps its last error
// until it is requeued (with fresh attempts) or purged.
func ExampleEngine_RequeueDead() {
	buried := make(chan string, 1)
	eng, closeAll := newEngine(engine.Config{Worker: queue.WorkerConfig{
		// Called once the job is dead in the ledger and in Redis.
		OnDead: func(_ context.Context, j *queue.Job, _ error) { buried <- j.ID },
	}})
	defer closeAll()
	ctx := context.Background()
	var calls atomic.Int32
	ranAgain := make(chan struct{})
	if err := eng.Handle("invoices", queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		if calls.Add(1) == 1 {
			return queue.SkipRetry(errors.New("customer has no address"))
		}
		close(ranAgain)
		return nil
	}), queue.TopicConfig{}); err != nil {
		panic(err)
	}
	if _, err := eng.Enqueue(ctx, "invoices", queue.NewJob{ID: "inv-3"}); err != nil {
		panic(err)
	}
	stop := start(eng)
	defer stop()
	<-buried
	page, err := eng.List(ctx, "invoices", queue.StateDead, 0, 10)
	if err != nil {
		panic(err)
	}
	fmt.Println("dead:", page.Jobs[0].Job.ID, "-", page.Jobs[0].Job.LastError)
	if err := eng.RequeueDead(ctx, "invoices", "inv-3"); err != nil {
		panic(err)
	}
	<-ranAgain
	fmt.Println("ran again after the requeue")
	// Output:
	// dead: inv-3 - permanent: customer has no address
	// ran again after the requeue
}

// DeleteDead deletes one dead job for good; its history says purged. A job
// that is not dead is queue.ErrNotFound and is left alone.
func ExampleEngine_DeleteDead() {
	buried := make(chan string, 1)
	eng, closeAll := newEngine(engine.Config{Worker: queue.WorkerConfig{
		OnDead: func(_ context.Context, j *queue.Job, _ error) { buried <- j.ID },
	}})
	defer closeAll()
	ctx := context.Background()
	if err := eng.Handle("invoices", queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		return queue.SkipRetry(errors.New("customer has no address"))
	}), queue.TopicConfig{}); err != nil {
		panic(err)
	}
	if _, err := eng.Enqueue(ctx, "invoices", queue.NewJob{ID: "inv-4"}); err != nil {
		panic(err)
	}
	stop := start(eng)
	defer stop()
	<-buried
	if err := eng.DeleteDead(ctx, "invoices", "inv-4"); err != nil {
		panic(err)
	}
	info, err := eng.Find(ctx, "invoices", "inv-4")
	if err != nil {
		panic(err)
	}
	rows, _, err := eng.History(ctx, ledger.HistoryFilter{Topic: "invoices", ID: "inv-4", Limit: 5})
	if err != nil {
		panic(err)
	}
	fmt.Println("after the delete:", info.State, "- history:", rows[0].Outcome)
	fmt.Println("again:", errors.Is(eng.DeleteDead(ctx, "invoices", "inv-4"), queue.ErrNotFound))
	// Output:
	// after the delete: unknown - history: purged
	// again: true
}

// Recover runs recovery now; a dry run reports what it would put back and
// changes nothing.
func ExampleEngine_Recover() {
	eng, closeAll := newEngine(engine.Config{})
	defer closeAll()
	rep, err := eng.Recover(context.Background(), true)
	if err != nil {
		panic(err)
	}
	fmt.Println("dry run:", rep.DryRun, "re-enqueued:", rep.Reenqueued)
	// Output:
	// dry run: true re-enqueued: 0
}

// Inspector.Jobs pages through a topic's jobs by state, each with its own
// state: here a durable topic's jobs waiting in SQL, beyond the horizon.
func ExampleInspector_Jobs() {
	eng, closeAll := newEngine(durable(time.Minute))
	defer closeAll()
	ctx := context.Background()
	for _, id := range []string{"order_close:1", "order_close:2", "order_close:3"} {
		if _, err := eng.Enqueue(ctx, "order_close", queue.NewJob{ID: id, Delay: time.Hour}); err != nil {
			panic(err)
		}
	}
	q := engine.JobQuery{State: engine.ListWaitingSQL, Limit: 2}
	for {
		page, err := eng.Inspector().Jobs(ctx, "order_close", q)
		if err != nil {
			panic(err)
		}
		for _, j := range page.Jobs {
			fmt.Println(j.Row.JobID, j.Row.State)
		}
		if page.NextAfter == "" {
			break
		}
		q.After = page.NextAfter
	}
	// Output:
	// order_close:1 waiting
	// order_close:2 waiting
	// order_close:3 waiting
}

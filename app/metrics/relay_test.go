package metrics_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/app/metrics"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/recovery"
)

// fakeRelay is a RelayReader whose totals and counts the test sets.
type fakeRelay struct {
	mu       sync.Mutex
	totals   recovery.RelayTotals
	counts   map[string]ledger.ScheduledCount
	countsAt time.Time
}

func (f *fakeRelay) Totals() recovery.RelayTotals {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.totals
}

func (f *fakeRelay) Counts() (map[string]ledger.ScheduledCount, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts, f.countsAt
}

func where(topic, w string) map[string]string { return map[string]string{"topic": topic, "where": w} }

// shard0 labels the one relay of a ledger of one shard.
var shard0 = map[string]string{"shard": "0"}

// shardRelay is a fakeRelay of a ledger of several shards, each shard's
// totals its own.
type shardRelay struct {
	fakeRelay
	byShard []recovery.RelayTotals
}

func (f *shardRelay) TotalsByShard() []recovery.RelayTotals {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byShard
}

// Over ledger shards each shard's relay has its own series: one shard's
// failing passes and stale last success show under its label, not hidden
// by the others' (the sum Totals gives has the latest LastOK of all).
func TestRelayMetricsPerShard(t *testing.T) {
	m := metrics.New(testenv.QuietLogger())
	ok := time.Unix(1700000000, 0)
	f := &shardRelay{byShard: []recovery.RelayTotals{
		{Passes: 10, LastOK: ok, Wakes: map[string]int64{"note": 4}},
		{Passes: 6, Failed: 6, HandOvers: 1, LastOK: ok.Add(-time.Hour), Wakes: map[string]int64{"error": 6}},
	}}
	f.totals = recovery.RelayTotals{Passes: 16, Failed: 6, HandOvers: 1, LastOK: ok}
	if err := m.WatchRelay(f, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	shard := func(s string, kv ...string) map[string]string {
		l := map[string]string{"shard": s}
		for i := 0; i < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return l
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"delayq_relay_passes_total", shard("0", "result", "ok"), 10},
		{"delayq_relay_passes_total", shard("1", "result", "ok"), 0},
		{"delayq_relay_passes_total", shard("1", "result", "failed"), 6},
		{"delayq_relay_handovers_total", shard("1"), 1},
		{"delayq_relay_handovers_total", shard("0"), 0},
		{"delayq_relay_wakes_total", shard("0", "cause", "note"), 4},
		{"delayq_relay_wakes_total", shard("1", "cause", "error"), 6},
		{"delayq_relay_last_success_timestamp_seconds", shard("0"), float64(ok.Unix())},
		{"delayq_relay_last_success_timestamp_seconds", shard("1"), float64(ok.Add(-time.Hour).Unix())},
	} {
		if got := value(t, m, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if st, _ := m.RelayState(); !st.LastOK.Equal(ok.Add(-time.Hour)) {
		t.Errorf("RelayState's last success %v, want shard 1's, the oldest, %v", st.LastOK, ok.Add(-time.Hour))
	}
}

// The relay's totals and counts are read at scrape time: passes by result,
// the last successful pass (the time of WatchRelay before the first), the
// interval, and per topic the waiting jobs within the horizon and beyond.
// Pushes after commit and the relay's pushes count by topic and kind.
func TestRelayMetrics(t *testing.T) {
	m := metrics.New(testenv.QuietLogger())
	m.InitDurableTopic("quiet")
	if _, ok := m.RelayState(); ok {
		t.Error("RelayState before WatchRelay says a relay runs")
	}
	f := &fakeRelay{}
	before := time.Now()
	if err := m.WatchRelay(f, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := value(t, m, "delayq_relay_last_success_timestamp_seconds", shard0); got < float64(before.Unix()) || got > float64(time.Now().Unix()+1) {
		t.Errorf("last success before any pass %v, want the time WatchRelay was called (%d)", got, before.Unix())
	}
	if got := value(t, m, "delayq_durable_counted_timestamp_seconds", nil); got != 0 {
		t.Errorf("counted at %v before any count, want 0", got)
	}

	ok := time.Unix(1700000000, 0)
	f.mu.Lock()
	f.totals = recovery.RelayTotals{Passes: 10, Failed: 3, HandOvers: 2, LastOK: ok, LastPass: ok.Add(time.Second), LastErr: ok.Add(time.Second)}
	f.counts = map[string]ledger.ScheduledCount{"orders": {Total: 1000, Beyond: 990}, "mail": {Total: 4}}
	f.countsAt = ok
	f.mu.Unlock()
	m.Pushed("orders", 3, 0)
	m.Pushed("orders", 0, 2)
	m.Pushed("orders", 1, 1)
	m.RelayPass(recovery.RelayReport{Loaded: map[string]int{"orders": 5}, Relayed: map[string]int{"orders": 2, "mail": 1}})
	m.RelayPass(recovery.RelayReport{Reload: true, Reloaded: map[string]int{"orders": 7}})

	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"delayq_relay_passes_total", map[string]string{"result": "ok", "shard": "0"}, 7},
		{"delayq_relay_passes_total", map[string]string{"result": "failed", "shard": "0"}, 3},
		{"delayq_relay_handovers_total", shard0, 2},
		{"delayq_relay_last_success_timestamp_seconds", shard0, float64(ok.Unix())},
		{"delayq_relay_interval_seconds", nil, 0.2},
		{"delayq_durable_counted_timestamp_seconds", nil, float64(ok.Unix())},
		{"delayq_durable_waiting_jobs", where("orders", "horizon"), 10},
		{"delayq_durable_waiting_jobs", where("orders", "beyond"), 990},
		{"delayq_durable_waiting_jobs", where("mail", "horizon"), 4},
		{"delayq_durable_waiting_jobs", where("mail", "beyond"), 0},
		{"delayq_durable_pushes_total", map[string]string{"topic": "orders", "result": "pushed"}, 4},
		{"delayq_durable_pushes_total", map[string]string{"topic": "orders", "result": "deferred"}, 3},
		{"delayq_durable_pushes_total", map[string]string{"topic": "quiet", "result": "deferred"}, 0},
		{"delayq_relay_pushed_total", map[string]string{"topic": "orders", "kind": "loaded"}, 5},
		{"delayq_relay_pushed_total", map[string]string{"topic": "orders", "kind": "relayed"}, 2},
		{"delayq_relay_pushed_total", map[string]string{"topic": "orders", "kind": "reloaded"}, 7},
		{"delayq_relay_pushed_total", map[string]string{"topic": "mail", "kind": "relayed"}, 1},
		{"delayq_relay_pushed_total", map[string]string{"topic": "quiet", "kind": "relayed"}, 0},
	} {
		if got := value(t, m, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	live := m.SampleLive()["orders"]
	if live.Loaded != 5 || live.Relayed != 2 || live.Reloaded != 7 {
		t.Errorf("live totals of orders %+v, want loaded 5, relayed 2, reloaded 7", live)
	}
	st, running := m.RelayState()
	if !running || st.Totals.Passes != 10 || !st.LastOK.Equal(ok) || st.Every != 200*time.Millisecond {
		t.Errorf("RelayState %+v, %v", st, running)
	}
	if err := metrics.New(testenv.QuietLogger()).WatchRelay(nil, time.Second); err == nil {
		t.Error("WatchRelay without a relay was accepted")
	}
}

// In a process without a relay only the pushes after commit are exported:
// no relay series that would say a relay runs here.
func TestNoRelayNoRelayMetrics(t *testing.T) {
	m := metrics.New(testenv.QuietLogger())
	m.Pushed("orders", 1, 0)
	m.RelayPass(recovery.RelayReport{Relayed: map[string]int{"orders": 1}})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	if !strings.Contains(body, `delayq_durable_pushes_total{result="pushed",topic="orders"} 1`) {
		t.Errorf("/metrics lacks the push after commit:\n%s", body)
	}
	for _, name := range []string{"delayq_relay_", "delayq_durable_waiting_jobs"} {
		if strings.Contains(body, name) {
			t.Errorf("/metrics has %s without a relay", name)
		}
	}
}

// End to end on Redis and MariaDB: the metrics are the queue client's
// observer, so a durable enqueue's push counts; a job beyond the horizon
// is not pushed and shows as waiting beyond the horizon once the running
// relay has counted; a job whose push was lost is counted as relayed.
func TestDurableMetricsFromARealRelay(t *testing.T) {
	ctx := testenv.Context(t)
	m := metrics.New(testenv.QuietLogger())
	rdb, ns := testenv.Redis(t)
	led, err := ledger.New(testenv.MySQL(t), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := led.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	q, err := dataplane.New(rdb, queue.Config{
		Namespace: ns, Store: led, Horizon: time.Hour, Observer: m,
		TopicDurability: map[string]queue.Durability{"dur": queue.DurabilityDurable},
	})
	if err != nil {
		t.Fatal(err)
	}
	m.InitDurableTopic("dur")
	for _, j := range []queue.NewJob{{ID: "soon", Delay: time.Minute}, {ID: "later", Delay: 3 * time.Hour}} {
		if _, err := q.Enqueue(ctx, "dur", j); err != nil {
			t.Fatal(err)
		}
	}
	// A job committed but never pushed (its enqueuer died): the
	// transactional enqueue without its Push.
	if _, err := q.EnqueueTx(ctx, led, "dur", queue.NewJob{ID: "lost"}); err != nil {
		t.Fatal(err)
	}
	if got := value(t, m, "delayq_durable_pushes_total", map[string]string{"topic": "dur", "result": "pushed"}); got != 1 {
		t.Errorf("pushes after commit %v, want 1 (the job beyond the horizon stays in SQL, the staged one is not pushed)", got)
	}

	r, err := recoverer.NewRelay(q, ledgerops.Of(led), recovery.RelayConfig{
		Every: 20 * time.Millisecond, Grace: time.Nanosecond, CountEvery: time.Second,
		OnPass: m.RelayPass, Logger: testenv.QuietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.WatchRelay(r, r.Config().Every); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	defer func() { stop(); <-done }()

	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	testenv.WaitFor(ctx, t, "the relay's count and a successful pass", func() bool {
		b := scrape()
		return strings.Contains(b, `delayq_durable_waiting_jobs{topic="dur",where="beyond"} 1`) &&
			strings.Contains(b, `delayq_durable_waiting_jobs{topic="dur",where="horizon"} 2`) &&
			strings.Contains(b, `delayq_relay_pushed_total{kind="reloaded",topic="dur"} 1`)
	}, scrape)
	if got := value(t, m, "delayq_relay_last_success_timestamp_seconds", shard0); got < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("last success %v", got)
	}
}

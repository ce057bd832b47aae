package metrics_test

import (
	"testing"

	"github.com/delayq/delayq/app/metrics"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// The ledger write counters follow a real ledger's writes on MariaDB.
func TestLedgerWriteMetrics(t *testing.T) {
	ctx := testenv.Context(t)
	m := metrics.New(testenv.QuietLogger())
	if err := m.WatchLedgerWrites(nil); err == nil {
		t.Fatal("WatchLedgerWrites(nil) accepted")
	}
	led, err := ledger.New(testenv.MySQL(t), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := led.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchLedgerWrites(led); err != nil {
		t.Fatal(err)
	}
	j := &queue.Job{Topic: "t", ID: "a", Attempt: 1, MaxAttempts: 3, Payload: []byte("{}"), LeaseUntil: 1 << 40}
	if err := ledgerops.Of(led).Record(ctx, []*queue.Job{j}, "w1"); err != nil {
		t.Fatal(err)
	}
	if err := ledgerops.Of(led).Complete(ctx, []queue.Ref{j.Ref()}); err != nil {
		t.Fatal(err)
	}
	none := map[string]string{}
	if got := value(t, m, "delayq_ledger_writes_total", none); got != 2 {
		t.Errorf("writes_total %v, want 2 (a record, a complete)", got)
	}
	if got, want := value(t, m, "delayq_ledger_commits_total", none), float64(led.WriteStats().Commits); got != want || got < 1 {
		t.Errorf("commits_total %v, want the ledger's %v (at least 1)", got, want)
	}
	if got := value(t, m, "delayq_ledger_deadlocks_total", none); got != 0 {
		t.Errorf("deadlocks_total %v, want 0", got)
	}
	if got := value(t, m, "delayq_ledger_not_ready_total", none); got != 0 {
		t.Errorf("not_ready_total %v, want 0 (no Galera node refused anything)", got)
	}
}

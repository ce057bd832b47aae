package recoverer_test

import (
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// A recovery run deletes the job history past its retention: the default
// for most topics, a topic's own for one, none for a topic kept for ever;
// the recent rows stay. The report counts what it deleted.
func TestRecoveryDeletesHistoryPastItsRetention(t *testing.T) {
	e := newREnv(t)
	ctx := testenv.Context(t)
	var clock time.Time
	led, err := ledger.New(testenv.MySQL(t), ledger.Options{Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	if err := led.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	finish := func(topic, id string, at time.Time) {
		t.Helper()
		clock = at
		j := &queue.Job{Topic: topic, ID: id, Attempt: 1, MaxAttempts: 3, RunAt: at.UnixMilli(), LeaseUntil: at.Add(time.Minute).UnixMilli()}
		o := ledgerops.Of(led)
		if err := o.Record(ctx, []*queue.Job{j}, "w"); err != nil {
			t.Fatal(err)
		}
		if err := o.Complete(ctx, []queue.Ref{j.Ref()}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	for _, topic := range []string{"mail", "audit", "short"} {
		finish(topic, "old", now.Add(-10*24*time.Hour)) // past the default week
		finish(topic, "mid", now.Add(-3*time.Hour))     // within the week
		finish(topic, "new", now.Add(-time.Minute))
	}
	r, err := recoverer.New(e.c, ledgerops.Of(led), recoverer.Config{Logger: e.log, Grace: 2 * time.Second, HeartbeatInterval: time.Second,
		TopicHistoryRetention: map[string]time.Duration{"audit": -1, "short": time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.RunOnce(ctx)
	if err != nil || rep.HistoryDeleted != 3 { // mail/old, short/old, short/mid
		t.Fatalf("run: %+v, %v; want 3 history rows deleted", rep, err)
	}
	for topic, want := range map[string]string{"mail": "[mid new]", "audit": "[old mid new]", "short": "[new]"} {
		rows, _, err := led.History(ctx, ledger.HistoryFilter{Topic: topic, Prefix: "", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for i := len(rows) - 1; i >= 0; i-- { // oldest first
			ids = append(ids, rows[i].JobID)
		}
		if got := "[" + strings.Join(ids, " ") + "]"; got != want {
			t.Errorf("%s keeps %s, want %s", topic, got, want)
		}
	}
}

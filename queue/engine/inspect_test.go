package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/queue/engine"
)

// TestInspectorReadsBothStores, on Redis and MariaDB: a durable topic
// (of 4 partitions) whose only job waits beyond the horizon is listed, with
// its SQL counts,
// although Redis has no key of it; a redis topic has no SQL counts; a
// paused topic says who paused it. Counted on demand (no relay), then
// through a counter that has not counted yet (no counts at hand).
func TestInspectorReadsBothStores(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	store := migratedLedger(t, testenv.MySQL(t))
	ctx := testenv.Context(t)
	eng, err := engine.New(rdb, store, engine.Config{NoRecovery: true, Logger: testenv.QuietLogger(),
		Queue: queue.Config{Namespace: ns, Horizon: time.Minute,
			TopicDurability: map[string]queue.Durability{"far": queue.DurabilityDurable}}})
	if err != nil {
		t.Fatal(err)
	}
	// far is partitioned: its row is its partition's, counted as far's.
	if _, err := eng.SetPartitions(ctx, "far", 4); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "far", queue.NewJob{ID: "f1", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "near", queue.NewJob{ID: "n1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Pause(ctx, "near", "test:inspector"); err != nil {
		t.Fatal(err)
	}

	infos, err := eng.Inspector().Topics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 || infos[0].Topic != "far" || infos[1].Topic != "near" {
		t.Fatalf("topics %+v, want far and near", infos)
	}
	far, near := infos[0], infos[1]
	if far.Durability != string(queue.DurabilityDurable) || far.SQL == nil || far.SQL.Waiting != 1 || far.SQL.BeyondHorizon != 1 || far.Due != 0 {
		t.Errorf("far: %+v (SQL %+v), want durable, 1 waiting beyond the horizon in SQL, none in Redis", far, far.SQL)
	}
	if near.Durability != string(queue.DurabilityRedis) || near.SQL != nil || near.Due != 1 {
		t.Errorf("near: %+v, want a redis topic with 1 job due in Redis and no SQL counts", near)
	}
	if !near.Pause.Paused || near.Pause.By != "test:inspector" || far.Pause.Paused {
		t.Errorf("pauses: near %+v, far %+v; want near paused by test:inspector", near.Pause, far.Pause)
	}
	one, err := eng.Inspector().Topic(ctx, "far")
	if err != nil || one.SQL == nil || one.SQL.Waiting != 1 {
		t.Errorf("Topic(far): %+v, %v", one, err)
	}
	if _, err := eng.Inspector().Topic(ctx, "bad topic"); err == nil {
		t.Error("a topic that is not a name was read")
	}

	// A relay's counter that has not counted yet: no SQL counts, so a
	// durable topic only in SQL is not listed, and no SQL is read.
	idle, err := engine.NewInspector(rdb, store, queue.Config{Namespace: ns,
		TopicDurability: map[string]queue.Durability{"far": queue.DurabilityDurable}}, neverCounted{})
	if err != nil {
		t.Fatal(err)
	}
	infos, err = idle.Topics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Topic != "near" {
		t.Errorf("topics without counts: %+v, want near only", infos)
	}
}

type neverCounted struct{}

func (neverCounted) Counts() (map[string]ledger.ScheduledCount, time.Time) { return nil, time.Time{} }

// TestInspectorListsJobs, on Redis and MariaDB: a durable job beyond the
// horizon is in waiting_sql (and, older name, scheduled_sql) but not in
// Redis's waiting set; a redis topic's job is in waiting; a prefix search
// finds the durable job and is refused on a redis topic; an offset on a
// keyset listing is ErrConflictingFields naming offset.
func TestInspectorListsJobs(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	store := migratedLedger(t, testenv.MySQL(t))
	ctx := testenv.Context(t)
	eng, err := engine.New(rdb, store, engine.Config{NoRecovery: true, Logger: testenv.QuietLogger(),
		Queue: queue.Config{Namespace: ns, Horizon: time.Minute}.WithDurableTopics("far")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "far", queue.NewJob{ID: "inv:1", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "near", queue.NewJob{ID: "n1", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	insp := eng.Inspector()
	ids := func(p *engine.JobPage) (out []string) {
		for _, j := range p.Jobs {
			if j.Info != nil {
				out = append(out, j.Info.Job.ID+"="+string(j.Info.State))
			} else {
				out = append(out, j.Row.JobID+"="+string(j.Row.State)+"(row)")
			}
		}
		return out
	}
	for _, c := range []struct {
		topic string
		q     engine.JobQuery
		want  string
	}{
		{"far", engine.JobQuery{State: engine.ListWaitingSQL}, "[inv:1=waiting(row)]"},
		{"far", engine.JobQuery{State: "scheduled_sql"}, "[inv:1=waiting(row)]"},
		{"far", engine.JobQuery{}, "[]"},
		{"far", engine.JobQuery{Prefix: "inv:"}, "[inv:1=waiting(row)]"},
		{"near", engine.JobQuery{}, "[n1=waiting]"},
		{"near", engine.JobQuery{State: engine.ListRetrying}, "[]"},
	} {
		p, err := insp.Jobs(ctx, c.topic, c.q)
		if err != nil || fmt.Sprint(ids(p)) != c.want && !(c.want == "[]" && len(p.Jobs) == 0) {
			t.Errorf("%s %+v: %v, %v; want %s", c.topic, c.q, p, err, c.want)
		}
	}
	var ve *queue.ValidationError
	if _, err := insp.Jobs(ctx, "near", engine.JobQuery{Prefix: "n"}); !errors.As(err, &ve) || ve.Field != "prefix" {
		t.Errorf("a prefix search of a redis topic: %v, want a validation error of prefix", err)
	}
	if _, err := insp.Jobs(ctx, "far", engine.JobQuery{State: engine.ListRetrying, HasOffset: true}); !errors.Is(err, engine.ErrConflictingFields) ||
		!errors.As(err, &ve) || ve.Field != "offset" {
		t.Errorf("an offset on a keyset listing: %v, want ErrConflictingFields of offset", err)
	}
}

// TestPauseIsAudited: Engine.Pause and Resume write the audit line the
// API's and the CLI's pauses write (the data plane's SetPaused), with the actor and
// whether the call changed anything.
func TestPauseIsAudited(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	store := migratedLedger(t, testenv.MySQL(t))
	ctx := testenv.Context(t)
	log, hook := logtest.NewNullLogger()
	eng := engine.Must(engine.New(rdb, store, engine.Config{NoRecovery: true, Logger: log, Queue: queue.Config{Namespace: ns}}))
	if _, err := eng.Pause(ctx, "mail", "ops:alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Pause(ctx, "mail", "ops:bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Resume(ctx, "mail", "ops:alice"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range hook.AllEntries() {
		if strings.HasPrefix(e.Message, "audit: ") {
			got = append(got, fmt.Sprintf("%s %v %v %v", e.Message, e.Data["topic"], e.Data["actor"], e.Data["changed"]))
		}
	}
	want := []string{"audit: topic pause mail ops:alice true", "audit: topic pause mail ops:bob false", "audit: topic resume mail ops:alice true"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("audit lines %q, want %q", got, want)
	}
}

// The in_flight page of a partitioned durable topic joins each job with
// its ledger row, which its partition's name keys.
func TestInspectorJoinsPartitionedInFlightRows(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	store := migratedLedger(t, testenv.MySQL(t))
	ctx := testenv.Context(t)
	eng, err := engine.New(rdb, store, engine.Config{NoRecovery: true, Logger: testenv.QuietLogger(),
		Queue: queue.Config{Namespace: ns}.WithDurableTopics("pt")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.SetPartitions(ctx, "pt", 4); err != nil {
		t.Fatal(err)
	}
	const jobs = 8
	for i := 0; i < jobs; i++ {
		if _, err := eng.Enqueue(ctx, "pt", queue.NewJob{ID: fmt.Sprint("o", i)}); err != nil {
			t.Fatal(err)
		}
	}
	started, release := make(chan string, jobs), make(chan struct{})
	err = eng.Handle("pt", queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		started <- j.ID
		<-release
		return nil
	}), queue.TopicConfig{Concurrency: jobs})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- eng.Run(runCtx) }()
	defer func() {
		close(release)
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	for i := 0; i < jobs; i++ {
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatalf("%d of %d jobs started", i, jobs)
		}
	}
	page, err := eng.Inspector().Jobs(ctx, "pt", engine.JobQuery{State: "in_flight", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Jobs) != jobs || page.LedgerError != nil {
		t.Fatalf("in_flight page: %d jobs, ledger error %v; want %d", len(page.Jobs), page.LedgerError, jobs)
	}
	for _, j := range page.Jobs {
		if j.Row == nil || j.Row.Topic != j.Info.Job.Partition || !strings.HasPrefix(j.Row.Topic, "pt~4.") {
			t.Fatalf("job %s of partition %q: row %+v", j.Info.Job.ID, j.Info.Job.Partition, j.Row)
		}
	}
}

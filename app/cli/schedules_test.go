package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/scheduler"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/queue/periodic"
)

// delayq schedules, on Redis and SQL directly and through an instance's
// API: the config's schedules with the last tick any process enqueued.
func TestSchedulesCommand(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	cfgPath := directConfig(t, ns, `periodic:
  - {name: hourly, spec: "0 0 * * * *", topic: reports, missed: once}
`)
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	tick := time.Now().Truncate(time.Hour)
	if _, err := q.EnqueueTick(testenv.Context(t), nil, "reports", "hourly", tick.UnixMilli(),
		queue.NewJob{ID: periodic.JobID("hourly", tick), RunAt: tick.UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, args ...string) {
		t.Helper()
		code, out, errOut := runCLI(t, append([]string{"schedules", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var list []periodic.Info
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if len(list) != 1 || list[0].Name != "hourly" || list[0].LastTick != tick.UnixMilli() ||
			list[0].NextRun != tick.Add(time.Hour).UnixMilli() || list[0].Missed != periodic.MissedOnce {
			t.Fatalf("schedules %+v", list)
		}
		code, out, _ = runCLI(t, append([]string{"schedules"}, args...)...)
		if code != 0 || !strings.Contains(out, "NEXT RUN") || !strings.Contains(out, periodic.JobID("hourly", tick)) {
			t.Fatalf("table: exit %d\n%s", code, out)
		}
	}
	t.Run("direct", func(t *testing.T) { check(t, "--config", cfgPath) })
	t.Run("api", func(t *testing.T) {
		l, err := ledger.New(testenv.SQLite(t), ledger.Options{})
		if err != nil {
			t.Fatal(err)
		}
		sched, err := scheduler.New(q, ledgerops.Of(l), []periodic.Schedule{{Name: "hourly", Spec: "0 0 * * * *", Topic: "reports", Missed: periodic.MissedOnce}}, periodic.Options{})
		if err != nil {
			t.Fatal(err)
		}
		check(t, "--api", apiInstance(t, httpapi.Deps{Queue: q, Ledger: l, Schedules: sched}))
	})
}

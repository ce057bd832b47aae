package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/scheduler"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/queue/periodic"
)

// lateSchedules is a Schedules whose scheduler is built after the env (it
// needs the env's queue client).
type lateSchedules struct{ s httpapi.Schedules }

func (l *lateSchedules) List(ctx context.Context) ([]periodic.Info, error) { return l.s.List(ctx) }

type failingSchedules struct{}

func (failingSchedules) List(context.Context) ([]periodic.Info, error) {
	return nil, fmt.Errorf("periodic: list: %w", syscall.ECONNREFUSED)
}

// GET /v1/schedules lists the schedules with their next run and the last
// tick enqueued by any process; none configured is an empty list; a store
// down is 503.
func TestListSchedules(t *testing.T) {
	late := &lateSchedules{}
	e := newEnv(t, embedded, withDurable(time.Hour, "dur"), func(s *setup) { s.deps.Schedules = late })
	sched, err := scheduler.New(e.q, ledgerops.Of(e.l), []periodic.Schedule{
		{Name: "r", Spec: "0 0 * * * *", Topic: "t"},
		{Name: "d", Spec: "@daily", Topic: "dur", Missed: periodic.MissedOnce},
	}, periodic.Options{})
	if err != nil {
		t.Fatal(err)
	}
	late.s = sched
	tick := time.Now().Truncate(time.Hour)
	if _, err := e.q.EnqueueTick(context.Background(), nil, "t", "r", tick.UnixMilli(),
		queue.NewJob{ID: periodic.JobID("r", tick), RunAt: tick.UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	got := decode[httpapi.SchedulesList](t, e.get(t, "/v1/schedules"))
	if len(got.Schedules) != 2 {
		t.Fatalf("schedules %+v", got)
	}
	r, d := got.Schedules[0], got.Schedules[1]
	if r.Name != "r" || r.LastTick != tick.UnixMilli() || r.LastJobID != periodic.JobID("r", tick) ||
		r.NextRun != tick.Add(time.Hour).UnixMilli() || r.Durability != "redis" || r.Missed != periodic.MissedSkip {
		t.Errorf("r: %+v", r)
	}
	if d.Name != "d" || d.LastTick != 0 || d.Durability != "durable" || d.Location != "UTC" || d.NextRun <= time.Now().UnixMilli() {
		t.Errorf("d: %+v", d)
	}

	none := newEnv(t, embedded)
	if got := decode[httpapi.SchedulesList](t, none.get(t, "/v1/schedules")); got.Schedules == nil || len(got.Schedules) != 0 {
		t.Errorf("no scheduler: %+v", got)
	}
	down := newEnv(t, embedded, func(s *setup) { s.deps.Schedules = failingSchedules{} })
	expectError(t, down.get(t, "/v1/schedules"), http.StatusServiceUnavailable, httpapi.CodeBackendUnavailable, "")
}

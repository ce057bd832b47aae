package httpapi

import (
	"context"
	"net/http"

	"github.com/delayq/delayq/queue/periodic"
)

// Schedules is what the API needs of the periodic scheduler
// (*scheduler.Scheduler): its schedules, with the last tick of each read
// from Redis and SQL.
type Schedules interface {
	List(ctx context.Context) ([]periodic.Info, error)
}

// SchedulesList answers GET /v1/schedules.
type SchedulesList struct {
	Schedules []periodic.Info `json:"schedules"`
}

// listSchedules handles GET /v1/schedules: every configured periodic
// schedule, in config order, with its next run and the last tick any
// process enqueued. Redis or SQL down: 503 naming it.
func (a *api) listSchedules(w http.ResponseWriter, r *http.Request) error {
	out := SchedulesList{Schedules: []periodic.Info{}}
	if a.schedules != nil {
		list, err := a.schedules.List(r.Context())
		if err != nil {
			return fromRedis(err)
		}
		out.Schedules = list
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

package httpapi

import (
	"net/http"

	"github.com/delayq/delayq/queue"
)

// WorkerList is GET /v1/workers: the worker processes of the registry
// (docs/design.md §4.19), by id, live or gone.
type WorkerList struct {
	Workers []queue.WorkerInfo `json:"workers"`
}

// listWorkers handles GET /v1/workers.
func (a *api) listWorkers(w http.ResponseWriter, r *http.Request) error {
	list, err := a.q.Workers(r.Context())
	if err != nil {
		return fromRedis(err)
	}
	writeJSON(w, http.StatusOK, WorkerList{Workers: list})
	return nil
}

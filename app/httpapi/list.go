package httpapi

import (
	"net/http"

	"github.com/delayq/delayq/internal/httpjson"
	"github.com/delayq/delayq/queue"
)

// defaultPage is the page size of listings that do not say.
const defaultPage = 100

// JobPage is one page of a topic's jobs in one state: scheduled and in
// flight earliest first, dead newest first. Payloads are left out (their
// sizes stay): a page of a thousand 1 MiB payloads is not a listing; GET the
// job for its payload.
type JobPage struct {
	Topic  string    `json:"topic"`
	State  string    `json:"state"`
	Total  int64     `json:"total"` // jobs in that state in all
	Offset int       `json:"offset"`
	Limit  int       `json:"limit"`
	Jobs   []JobView `json:"jobs"`
	// NextOffset is the offset of the next page; absent on the last one.
	NextOffset int `json:"next_offset,omitempty"`
}

// listJobs handles GET /v1/topics/{topic}/jobs?state=&offset=&limit=; the
// state defaults to scheduled.
func (a *api) listJobs(w http.ResponseWriter, r *http.Request) error {
	state := queue.State(r.URL.Query().Get("state"))
	switch state {
	case "":
		state = queue.StateScheduled
	case queue.StateScheduled, queue.StateInFlight, queue.StateDead:
	default:
		return badRequest(CodeInvalidValue, "state", "state=%q: want scheduled, in_flight or dead", state)
	}
	return a.listState(w, r, state)
}

// listDead handles GET /v1/topics/{topic}/dead?offset=&limit=.
func (a *api) listDead(w http.ResponseWriter, r *http.Request) error {
	return a.listState(w, r, queue.StateDead)
}

// listState answers one page of the topic's jobs in state.
func (a *api) listState(w http.ResponseWriter, r *http.Request, state queue.State) error {
	topic := r.PathValue("topic")
	if err := queue.ValidateTopic(topic); err != nil {
		return err
	}
	offset, err := httpjson.QueryInt(r, "offset", 0, 0, 1<<31-1)
	if err != nil {
		return err
	}
	limit, err := httpjson.QueryInt(r, "limit", defaultPage, 1, queue.MaxPage)
	if err != nil {
		return err
	}
	page, err := a.q.List(r.Context(), topic, state, int(offset), int(limit))
	if err != nil {
		return fromRedis(err)
	}
	out := JobPage{Topic: topic, State: string(state), Total: page.Total, Offset: int(offset), Limit: int(limit),
		Jobs: make([]JobView, 0, len(page.Jobs))}
	for _, info := range page.Jobs {
		out.Jobs = append(out.Jobs, NewJobView(info, false))
	}
	if next := int(offset) + len(page.Jobs); len(page.Jobs) > 0 && int64(next) < page.Total {
		out.NextOffset = next
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/httpjson"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/queue/engine"
)

// JobPage is one page of a topic's jobs: in one state, or (a durable
// topic's) with an id prefix. Payloads are left out (their sizes stay): a
// page of a thousand 1 MiB payloads is not a listing; GET the job for its
// payload.
type JobPage struct {
	Topic string `json:"topic"`
	// State is the state listed; absent in a prefix search.
	State string `json:"state,omitempty"`
	// Prefix is the id prefix searched (durable topics).
	Prefix string `json:"prefix,omitempty"`
	// Total is the count of jobs in that state (Redis's sets), -1 for the
	// listings of the SQL ledger, which count nothing per request.
	Total  int64     `json:"total"`
	Offset int       `json:"offset"`
	Limit  int       `json:"limit"`
	Jobs   []JobView `json:"jobs"`
	// NextOffset is the offset of the next page of a Redis state; absent
	// on the last one.
	NextOffset int `json:"next_offset,omitempty"`
	// NextAfter is the after of the next page of a SQL listing (retrying,
	// waiting_sql, a prefix search); absent on the last one.
	NextAfter string `json:"next_after,omitempty"`
	// LedgerError says why an in_flight page has no ledger rows (SQL did
	// not answer); the Redis page is still shown.
	LedgerError string `json:"ledger_error,omitempty"`
}

// JobQuery is one listing of the job browser (engine.JobQuery).
type JobQuery = engine.JobQuery

// listJobs handles GET /v1/topics/{topic}/jobs?state=&offset=&limit=
// &prefix=&after=.
func (a *api) listJobs(w http.ResponseWriter, r *http.Request) error {
	topic := r.PathValue("topic")
	if err := queue.ValidateTopic(topic); err != nil {
		return err
	}
	q := r.URL.Query()
	var jq JobQuery
	var err error
	if q.Has("state") {
		if jq.State, err = engine.ParseListing(q.Get("state")); err != nil || jq.State == "" {
			return badRequest(CodeInvalidValue, "state", "state=%q: want one of %s", q.Get("state"), strings.Join(engine.Listings, ", "))
		}
	}
	offset, err := httpjson.QueryInt(r, "offset", 0, 0, 1<<31-1)
	if err != nil {
		return err
	}
	jq.Offset, jq.HasOffset = int(offset), q.Has("offset")
	limit, err := httpjson.QueryInt(r, "limit", engine.DefaultPage, 1, queue.MaxPage)
	if err != nil {
		return err
	}
	jq.Limit = int(limit)
	jq.Prefix, jq.After = q.Get("prefix"), q.Get("after")
	if q.Has("prefix") && jq.Prefix == "" {
		return badRequest(CodeInvalidValue, "prefix", "prefix=: give the start of a job id")
	}
	p, err := BrowseJobs(r.Context(), a.inspect, a.log, topic, jq)
	if err != nil {
		return err
	}
	p.CapAttempts(a.attemptLimit)
	writeJSON(w, http.StatusOK, p)
	return nil
}

// listDead handles GET /v1/topics/{topic}/dead?offset=&limit=.
func (a *api) listDead(w http.ResponseWriter, r *http.Request) error {
	topic := r.PathValue("topic")
	if err := queue.ValidateTopic(topic); err != nil {
		return err
	}
	offset, err := httpjson.QueryInt(r, "offset", 0, 0, 1<<31-1)
	if err != nil {
		return err
	}
	limit, err := httpjson.QueryInt(r, "limit", engine.DefaultPage, 1, queue.MaxPage)
	if err != nil {
		return err
	}
	p, err := BrowseJobs(r.Context(), a.inspect, a.log, topic, JobQuery{State: engine.ListDead, Offset: int(offset), HasOffset: true, Limit: int(limit)})
	if err != nil {
		return err
	}
	p.CapAttempts(a.attemptLimit)
	writeJSON(w, http.StatusOK, p)
	return nil
}

// BrowseJobs answers one listing of the job browser (engine.Inspector.Jobs)
// as the API and the CLI show it. Bad input is the 400 naming the
// parameter; a store's failure names the store.
func BrowseJobs(ctx context.Context, insp *engine.Inspector, log logrus.FieldLogger, topic string, jq JobQuery) (JobPage, error) {
	p, err := insp.Jobs(ctx, topic, jq)
	if err != nil {
		return JobPage{}, browseError(err)
	}
	out := JobPage{Topic: p.Topic, State: p.State, Prefix: p.Prefix, Total: p.Total, Offset: p.Offset, Limit: p.Limit,
		Jobs: make([]JobView, 0, len(p.Jobs)), NextOffset: p.NextOffset, NextAfter: p.NextAfter}
	for _, j := range p.Jobs {
		if j.Info == nil {
			out.Jobs = append(out.Jobs, NewRowView(*j.Row))
			continue
		}
		v := NewJobView(j.Info, false)
		if j.Row != nil {
			row := newSummaryRow(*j.Row)
			v.Ledger = &row
		}
		out.Jobs = append(out.Jobs, v)
	}
	if p.LedgerError != nil {
		if log != nil {
			log.WithError(p.LedgerError).WithField("topic", topic).Warn("httpapi: in-flight page without its ledger rows")
		}
		out.LedgerError = "sql is unavailable: the ledger rows (worker, claim) are not shown"
	}
	return out, nil
}

// browseError is the answer to a failed listing: the engine's validation
// errors are the 400 naming the parameter (a topic's has its own code,
// classify's), the rest names the store that failed.
func browseError(err error) error {
	var ve *queue.ValidationError
	switch {
	case !errors.As(err, &ve):
		return fromRedis(err)
	case errors.Is(err, engine.ErrConflictingFields):
		return badRequest(CodeConflictingFields, ve.Field, "%s", ve.Reason)
	case ve.Field == "topic":
		return err
	}
	return badRequest(CodeInvalidValue, ve.Field, "%s", ve.Reason)
}

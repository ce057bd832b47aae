package httpapi

import (
	"errors"
	"net/http"

	"github.com/delayq/delayq/internal/httpjson"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// defaultPage is the page size of listings that do not say.
const defaultPage = 100

// The states GET /v1/topics/{topic}/jobs lists (the job browser,
// docs/design.md §4.17), each a page of one index: the first three of
// Redis's sets, the others of the SQL ledger.
const (
	listWaiting      = "waiting"       // due ZSET by due time: first runs and retries alike
	listScheduled    = "scheduled"     // the older name of waiting
	listInFlight     = "in_flight"     // lease ZSET by lease end, with the ledger rows (worker, claim)
	listDead         = "dead"          // dead ZSET, newest first, with the last error
	listRetrying     = "retrying"      // ledger rows state=retrying by due time: the (state, run_at) index
	listScheduledSQL = "scheduled_sql" // ledger rows state=scheduled by due time (durable topics, beyond the horizon too)
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
	// scheduled_sql, a prefix search); absent on the last one.
	NextAfter string `json:"next_after,omitempty"`
	// LedgerError says why an in_flight page has no ledger rows (SQL did
	// not answer); the Redis page is still shown.
	LedgerError string `json:"ledger_error,omitempty"`
}

// listJobs handles GET /v1/topics/{topic}/jobs?state=&offset=&limit=
// &prefix=&after=. Every page comes from an index, never from a scan of
// the keyspace: Redis's due, lease and dead sets are paged by offset
// (O(log N + limit)), the ledger's rows by keyset (after). A prefix
// searches a durable topic's ledger by job id; a redis topic has no index
// that could serve it and is refused.
func (a *api) listJobs(w http.ResponseWriter, r *http.Request) error {
	topic := r.PathValue("topic")
	if err := queue.ValidateTopic(topic); err != nil {
		return err
	}
	q := r.URL.Query()
	if q.Has("prefix") {
		return a.searchPrefix(w, r, topic)
	}
	state, err := httpjson.QueryEnum(r, "state", listWaiting,
		listWaiting, listScheduled, listInFlight, listRetrying, listDead, listScheduledSQL)
	if err != nil {
		return err
	}
	switch state {
	case listRetrying:
		return a.listLedger(w, r, topic, state, ledger.StateRetrying)
	case listScheduledSQL:
		return a.listLedger(w, r, topic, state, ledger.StateScheduled)
	case listInFlight:
		return a.listState(w, r, state, queue.StateInFlight)
	case listDead:
		return a.listState(w, r, state, queue.StateDead)
	}
	return a.listState(w, r, state, queue.StateScheduled)
}

// listDead handles GET /v1/topics/{topic}/dead?offset=&limit=.
func (a *api) listDead(w http.ResponseWriter, r *http.Request) error {
	if err := queue.ValidateTopic(r.PathValue("topic")); err != nil {
		return err
	}
	return a.listState(w, r, listDead, queue.StateDead)
}

// listState answers one page of one of Redis's sets of the topic, by
// offset; an in-flight page gets its ledger rows in one statement.
func (a *api) listState(w http.ResponseWriter, r *http.Request, name string, state queue.State) error {
	topic := r.PathValue("topic")
	if r.URL.Query().Has("after") {
		return badRequest(CodeConflictingFields, "after", "state=%s pages by offset; after is for retrying, scheduled_sql and prefix searches", name)
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
	out := JobPage{Topic: topic, State: name, Total: page.Total, Offset: int(offset), Limit: int(limit),
		Jobs: make([]JobView, 0, len(page.Jobs))}
	for _, info := range page.Jobs {
		out.Jobs = append(out.Jobs, NewJobView(info, false))
	}
	if state == queue.StateInFlight && len(out.Jobs) > 0 {
		ids := make([]string, len(out.Jobs))
		for i, j := range out.Jobs {
			ids[i] = j.ID
		}
		rows, err := a.l.RowsOf(r.Context(), topic, ids)
		if err != nil {
			a.log.WithError(err).WithField("topic", topic).Warn("httpapi: in-flight page without its ledger rows")
			out.LedgerError = "sql is unavailable: the ledger rows (worker, claim) are not shown"
		}
		for i := range out.Jobs {
			if e, ok := rows[out.Jobs[i].ID]; ok {
				row := NewLedgerRow(e)
				out.Jobs[i].Ledger = &row
			}
		}
	}
	if next := int(offset) + len(page.Jobs); len(page.Jobs) > 0 && int64(next) < page.Total {
		out.NextOffset = next
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// listLedger answers one page of the topic's ledger rows in state, by due
// time, paged by keyset (after is a page's next_after).
func (a *api) listLedger(w http.ResponseWriter, r *http.Request, topic, name, state string) error {
	if r.URL.Query().Has("offset") {
		return badRequest(CodeConflictingFields, "offset", "state=%s pages by keyset: pass next_after as after", name)
	}
	limit, err := httpjson.QueryInt(r, "limit", defaultPage, 1, queue.MaxPage)
	if err != nil {
		return err
	}
	f := ledger.ListFilter{State: state, Topic: topic, Limit: int(limit)}
	if s := httpjson.QueryString(r, "after"); s != "" {
		c, err := ledger.ParseCursor(s)
		if err != nil {
			return badRequest(CodeInvalidValue, "after", "after=%q: give a page's next_after as it is", s)
		}
		f.After = &c
	}
	p, err := a.l.List(r.Context(), f)
	if err != nil {
		return fromSQL(err)
	}
	out := JobPage{Topic: topic, State: name, Total: -1, Limit: int(limit), Jobs: make([]JobView, 0, len(p.Rows))}
	for _, e := range p.Rows {
		out.Jobs = append(out.Jobs, NewRowView(e))
	}
	if p.Next != nil {
		out.NextAfter = p.Next.String()
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// searchPrefix answers the jobs of a durable topic whose id starts with
// prefix, from the ledger's unique (topic, job_id) index, in id order,
// paged by keyset (after is the last id of the previous page). Jobs without
// a row (a redis topic's waiting jobs, dead or finished jobs) are not in
// it: a redis topic has no index by id prefix (its sets are by time), and
// searching it would mean scanning the keyspace, which the API never does.
func (a *api) searchPrefix(w http.ResponseWriter, r *http.Request, topic string) error {
	q := r.URL.Query()
	for _, p := range []string{"state", "offset"} {
		if q.Has(p) {
			return badRequest(CodeConflictingFields, p, "a prefix search lists every ledger row of the topic with the prefix, by id: leave %s out", p)
		}
	}
	prefix := q.Get("prefix")
	if err := queue.ValidateID(prefix); err != nil {
		var ve *queue.ValidationError
		if errors.As(err, &ve) {
			return badRequest(CodeInvalidValue, "prefix", "prefix=%q: an id prefix is 1-200 of the id characters [A-Za-z0-9_.:@/-]", prefix)
		}
		return err
	}
	if !a.q.IsDurable(topic) {
		return badRequest(CodeInvalidValue, "prefix",
			"topic %q is a redis topic: no index serves an id prefix search there (only a durable topic's SQL ledger has one); search by the exact id (GET /v1/topics/{topic}/jobs/{id})", topic)
	}
	after := httpjson.QueryString(r, "after")
	if after != "" {
		if err := queue.ValidateID(after); err != nil {
			return badRequest(CodeInvalidValue, "after", "after=%q: give a page's next_after as it is", after)
		}
	}
	limit, err := httpjson.QueryInt(r, "limit", defaultPage, 1, queue.MaxPage)
	if err != nil {
		return err
	}
	rows, next, err := a.l.ByPrefix(r.Context(), topic, prefix, after, int(limit))
	if err != nil {
		return fromSQL(err)
	}
	out := JobPage{Topic: topic, Prefix: prefix, Total: -1, Limit: int(limit), Jobs: make([]JobView, 0, len(rows)), NextAfter: next}
	for _, e := range rows {
		out.Jobs = append(out.Jobs, NewRowView(e))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/httpjson"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// defaultPage is the page size of listings that do not say.
const defaultPage = 100

// The listings of GET /v1/topics/{topic}/jobs (the job browser,
// docs/design.md §4.17), each named by the state it lists (queue.State)
// and each a page of one index: waiting, in_flight and dead of Redis's
// sets, retrying and waiting_sql of the SQL ledger. Every job of a page
// carries its own state, so a job shows the same state in every listing
// it appears in.
const (
	// Redis's due set by due time: the jobs waiting to run, and (in the
	// same set) those waiting for a retry, which show as retrying.
	ListWaiting = string(queue.StateWaiting)
	// The ledger's rows waiting for a retry, by due time: the (state,
	// run_at) index.
	ListRetrying = string(queue.StateRetrying)
	// Redis's lease set by lease end, with the ledger rows (worker, claim).
	ListInFlight = string(queue.StateInFlight)
	// Redis's dead set, newest first, with the last error.
	ListDead = string(queue.StateDead)
	// The ledger's waiting rows by due time: a durable topic's jobs,
	// beyond the horizon too.
	ListWaitingSQL = string(queue.StateWaiting) + "_sql"
)

// ListStates are the listings a JobQuery takes, in the order the API doc
// and the dashboard give them.
var ListStates = []string{ListWaiting, ListRetrying, ListInFlight, ListDead, ListWaitingSQL}

// renamedLists are the older names of listings, accepted on input until
// the release after next, like queue.ParseState's.
var renamedLists = map[string]string{"scheduled": ListWaiting, "scheduled_sql": ListWaitingSQL}

// ParseListing reads a listing's name given on input: one of ListStates
// or an older name of one; "" stays "" (the default listing).
func ParseListing(s string) (string, error) {
	if s == "" || slices.Contains(ListStates, s) {
		return s, nil
	}
	if l, ok := renamedLists[s]; ok {
		return l, nil
	}
	return "", fmt.Errorf("state %q: want one of %s", s, strings.Join(ListStates, ", "))
}

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

// JobQuery is one listing of the job browser: a state or an id prefix,
// and where the page starts. The zero value is the first page of waiting
// jobs.
type JobQuery struct {
	// State is one of ListStates; "" is waiting (or, with a Prefix,
	// every ledger row).
	State string
	// Prefix searches a durable topic's ledger by id prefix; not with a
	// State or an Offset.
	Prefix string
	// Offset pages Redis's states (waiting, in_flight, dead); HasOffset
	// says it was given, which keyset listings refuse.
	Offset    int
	HasOffset bool
	// After is the keyset cursor of retrying, waiting_sql and prefix
	// listings: a page's NextAfter as it is.
	After string
	// Limit is the page size, 1 to queue.MaxPage; 0 means 100.
	Limit int
}

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
		if jq.State, err = ParseListing(q.Get("state")); err != nil || jq.State == "" {
			return badRequest(CodeInvalidValue, "state", "state=%q: want one of %s", q.Get("state"), strings.Join(ListStates, ", "))
		}
	}
	offset, err := httpjson.QueryInt(r, "offset", 0, 0, 1<<31-1)
	if err != nil {
		return err
	}
	jq.Offset, jq.HasOffset = int(offset), q.Has("offset")
	limit, err := httpjson.QueryInt(r, "limit", defaultPage, 1, queue.MaxPage)
	if err != nil {
		return err
	}
	jq.Limit = int(limit)
	jq.Prefix, jq.After = q.Get("prefix"), q.Get("after")
	if q.Has("prefix") && jq.Prefix == "" {
		return badRequest(CodeInvalidValue, "prefix", "prefix=: give the start of a job id")
	}
	p, err := BrowseJobs(r.Context(), a.q, a.l, a.log, topic, jq)
	if err != nil {
		return err
	}
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
	limit, err := httpjson.QueryInt(r, "limit", defaultPage, 1, queue.MaxPage)
	if err != nil {
		return err
	}
	p, err := listRedis(r.Context(), a.q, a.l, a.log, topic, ListDead, queue.StateDead, int(offset), int(limit))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

// BrowseJobs answers one listing of the job browser, for the API and the
// CLI alike. Every page comes from an index, never from a scan of the
// keyspace: Redis's due, lease and dead sets are paged by offset (O(log N
// + limit)), the ledger's rows by keyset (After). A Prefix searches a
// durable topic's ledger by job id; a redis topic has no index that could
// serve it and is refused. Bad input is an *httpjson.Error (400) naming
// the parameter; a backend's failure names the backend.
func BrowseJobs(ctx context.Context, q *queue.Client, l *ledger.Ledger, log logrus.FieldLogger, topic string, jq JobQuery) (JobPage, error) {
	if err := queue.ValidateTopic(topic); err != nil {
		return JobPage{}, err
	}
	if jq.Limit == 0 {
		jq.Limit = defaultPage
	}
	if jq.Limit < 1 || jq.Limit > queue.MaxPage || jq.Offset < 0 {
		return JobPage{}, badRequest(CodeInvalidValue, "limit", "offset %d, limit %d: want an offset of 0 or more and a limit of 1-%d", jq.Offset, jq.Limit, queue.MaxPage)
	}
	if jq.Prefix != "" {
		return searchPrefix(ctx, q, l, topic, jq)
	}
	state, err := ParseListing(jq.State)
	if err != nil {
		return JobPage{}, badRequest(CodeInvalidValue, "state", "%v", err)
	}
	if state == "" {
		state = ListWaiting
	}
	keyset := state == ListRetrying || state == ListWaitingSQL
	switch {
	case keyset && jq.HasOffset:
		return JobPage{}, badRequest(CodeConflictingFields, "offset", "state=%s pages by keyset: pass next_after as after", state)
	case !keyset && jq.After != "":
		return JobPage{}, badRequest(CodeConflictingFields, "after", "state=%s pages by offset; after is for retrying, waiting_sql and prefix searches", state)
	}
	switch state {
	case ListRetrying:
		return listLedger(ctx, l, topic, state, queue.StateRetrying, jq)
	case ListWaitingSQL:
		return listLedger(ctx, l, topic, state, queue.StateWaiting, jq)
	case ListInFlight:
		return listRedis(ctx, q, l, log, topic, state, queue.StateInFlight, jq.Offset, jq.Limit)
	case ListDead:
		return listRedis(ctx, q, l, log, topic, state, queue.StateDead, jq.Offset, jq.Limit)
	case ListWaiting:
		return listRedis(ctx, q, l, log, topic, state, queue.StateWaiting, jq.Offset, jq.Limit)
	}
	return JobPage{}, badRequest(CodeInvalidValue, "state", "state=%q: want one of %v", state, ListStates)
}

// listRedis answers one page of one of Redis's sets of the topic, by
// offset; an in-flight page gets its ledger rows in one statement.
func listRedis(ctx context.Context, q *queue.Client, l *ledger.Ledger, log logrus.FieldLogger, topic, name string, state queue.State, offset, limit int) (JobPage, error) {
	page, err := q.List(ctx, topic, state, offset, limit)
	if err != nil {
		return JobPage{}, fromRedis(err)
	}
	out := JobPage{Topic: topic, State: name, Total: page.Total, Offset: offset, Limit: limit,
		Jobs: make([]JobView, 0, len(page.Jobs))}
	for _, info := range page.Jobs {
		out.Jobs = append(out.Jobs, NewJobView(info, false))
	}
	if state == queue.StateInFlight && len(out.Jobs) > 0 {
		ids := make([]string, len(out.Jobs))
		for i, j := range out.Jobs {
			ids[i] = j.ID
		}
		rows, err := l.RowsOf(ctx, topic, ids)
		if err != nil {
			if log != nil {
				log.WithError(err).WithField("topic", topic).Warn("httpapi: in-flight page without its ledger rows")
			}
			out.LedgerError = "sql is unavailable: the ledger rows (worker, claim) are not shown"
		}
		for i := range out.Jobs {
			if e, ok := rows[out.Jobs[i].ID]; ok {
				row := NewLedgerRow(e.Entry)
				row.PayloadSize = e.PayloadSize
				out.Jobs[i].Ledger = &row
			}
		}
	}
	if next := offset + len(page.Jobs); len(page.Jobs) > 0 && int64(next) < page.Total {
		out.NextOffset = next
	}
	return out, nil
}

// listLedger answers one page of the topic's ledger rows in state, by due
// time, paged by keyset (After is a page's NextAfter).
func listLedger(ctx context.Context, l *ledger.Ledger, topic, name string, state queue.State, jq JobQuery) (JobPage, error) {
	f := ledger.ListFilter{State: state, Topic: topic, Limit: jq.Limit}
	if jq.After != "" {
		c, err := ledger.ParseCursor(jq.After)
		if err != nil {
			return JobPage{}, badRequest(CodeInvalidValue, "after", "after=%q: give a page's next_after as it is", jq.After)
		}
		f.After = &c
	}
	rows, next, err := l.ListSummaries(ctx, f)
	if err != nil {
		return JobPage{}, fromSQL(err)
	}
	out := JobPage{Topic: topic, State: name, Total: -1, Limit: jq.Limit, Jobs: make([]JobView, 0, len(rows))}
	for _, e := range rows {
		out.Jobs = append(out.Jobs, NewRowView(e))
	}
	if next != nil {
		out.NextAfter = next.String()
	}
	return out, nil
}

// searchPrefix answers the jobs of a durable topic whose id starts with
// the prefix, from the ledger's unique (topic, job_id) index, in id order,
// paged by keyset (After is the last id of the previous page). Jobs
// without a row (a redis topic's waiting jobs, dead or finished jobs) are
// not in it: a redis topic has no index by id prefix (its sets are by
// time), and searching it would mean scanning the keyspace, which the API
// never does.
func searchPrefix(ctx context.Context, q *queue.Client, l *ledger.Ledger, topic string, jq JobQuery) (JobPage, error) {
	switch {
	case jq.State != "":
		return JobPage{}, badRequest(CodeConflictingFields, "state", "a prefix search lists every ledger row of the topic with the prefix, by id: leave state out")
	case jq.HasOffset:
		return JobPage{}, badRequest(CodeConflictingFields, "offset", "a prefix search pages by keyset: pass next_after as after, leave offset out")
	}
	if err := queue.ValidateID(jq.Prefix); err != nil {
		var ve *queue.ValidationError
		if errors.As(err, &ve) {
			return JobPage{}, badRequest(CodeInvalidValue, "prefix", "prefix=%q: an id prefix is 1-200 of the id characters [A-Za-z0-9_.:@/-]", jq.Prefix)
		}
		return JobPage{}, err
	}
	if !q.WaitsInSQL(topic) {
		return JobPage{}, badRequest(CodeInvalidValue, "prefix",
			"topic %q is a redis topic: no index serves an id prefix search there (only a durable topic's SQL ledger has one); search by the exact id (GET /v1/topics/{topic}/jobs/{id})", topic)
	}
	if jq.After != "" {
		if err := queue.ValidateID(jq.After); err != nil {
			return JobPage{}, badRequest(CodeInvalidValue, "after", "after=%q: give a page's next_after as it is", jq.After)
		}
	}
	rows, next, err := l.ByPrefix(ctx, topic, jq.Prefix, jq.After, jq.Limit)
	if err != nil {
		return JobPage{}, fromSQL(err)
	}
	out := JobPage{Topic: topic, Prefix: jq.Prefix, Total: -1, Limit: jq.Limit, Jobs: make([]JobView, 0, len(rows)), NextAfter: next}
	for _, e := range rows {
		out.Jobs = append(out.Jobs, NewRowView(e))
	}
	return out, nil
}

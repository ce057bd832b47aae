package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// The listings of the job browser (Inspector.Jobs, docs/design.md §4.17),
// each named by the state it lists and each a page of one index: waiting,
// in_flight and dead of Redis's sets, retrying and waiting_sql of the SQL
// ledger. Every job of a page carries its own state, so a job shows the
// same state in every listing it appears in.
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

// Listings are the listings a JobQuery takes, in the order the API doc
// and the dashboard give them.
var Listings = []string{ListWaiting, ListRetrying, ListInFlight, ListDead, ListWaitingSQL}

// renamedListings are the older names of listings, read on input until
// the release after next, like queue.ParseState's.
var renamedListings = map[string]string{"scheduled": ListWaiting, "scheduled_sql": ListWaitingSQL}

// ParseListing reads a listing's name given on input: one of Listings or
// an older name of one; "" stays "" (the default listing, waiting).
func ParseListing(s string) (string, error) {
	if s == "" || slices.Contains(Listings, s) {
		return s, nil
	}
	if l, ok := renamedListings[s]; ok {
		return l, nil
	}
	return "", fmt.Errorf("state %q: want one of %s", s, strings.Join(Listings, ", "))
}

// ErrConflictingFields is the kind of a JobQuery's validation error that
// sets two things that exclude each other (an offset on a keyset listing).
var ErrConflictingFields = errors.New("conflicting fields")

// DefaultPage is the page size of a JobQuery that does not say.
const DefaultPage = 100

// JobQuery is one listing of the job browser: a listing or an id prefix,
// and where the page starts. The zero value is the first page of waiting
// jobs.
type JobQuery struct {
	// State is one of Listings (or an older name); "" is waiting.
	State string
	// Prefix searches a durable topic's ledger by id prefix; not with a
	// State or an Offset.
	Prefix string
	// Offset pages Redis's listings (waiting, in_flight, dead); HasOffset
	// says it was given, which keyset listings refuse.
	Offset    int
	HasOffset bool
	// After is the keyset cursor of retrying, waiting_sql and prefix
	// listings: a page's NextAfter as it is.
	After string
	// Limit is the page size, 1 to queue.MaxPage; 0 means DefaultPage.
	Limit int
}

// ListedJob is one job of a page: as Redis has it (Info, for Redis's
// listings) or as its row describes it (Info nil, for the ledger's), and
// its ledger row where the page reads it (the ledger's listings, and an
// in_flight page's rows).
type ListedJob struct {
	Info *queue.JobInfo
	Row  *ledger.Summary
}

// JobPage is one page of a topic's jobs: in one listing, or (a durable
// topic's) with an id prefix.
type JobPage struct {
	Topic string
	// State is the listing (its current name); "" in a prefix search.
	State  string
	Prefix string
	// Total counts the listing's jobs (Redis's sets); -1 for the ledger's
	// listings, which count nothing per call.
	Total         int64
	Offset, Limit int
	Jobs          []ListedJob
	// NextOffset (Redis's listings) and NextAfter (the ledger's) start the
	// next page; zero on the last.
	NextOffset int
	NextAfter  string
	// LedgerError says why an in_flight page has no rows: SQL did not
	// answer, and the Redis page is still given.
	LedgerError error
}

// Jobs answers one listing of the job browser. Every page comes from an
// index, never from a scan of the keyspace: Redis's due, lease and dead
// sets are paged by offset (O(log N + limit)), the ledger's rows by keyset
// (After). A Prefix searches a durable topic's ledger by job id; a redis
// topic has no index that could serve it and is refused. Bad input is a
// *queue.ValidationError naming the field (ErrConflictingFields for two
// that exclude each other); a store's failure wraps queue.ErrLedger.
func (i *Inspector) Jobs(ctx context.Context, topic string, q JobQuery) (*JobPage, error) {
	if err := queue.ValidateTopic(topic); err != nil {
		return nil, err
	}
	if q.Limit == 0 {
		q.Limit = DefaultPage
	}
	if q.Limit < 1 || q.Limit > queue.MaxPage || q.Offset < 0 {
		return nil, invalid("limit", "offset %d, limit %d: want an offset of 0 or more and a limit of 1-%d", q.Offset, q.Limit, queue.MaxPage)
	}
	if q.Prefix != "" {
		return i.searchPrefix(ctx, topic, q)
	}
	state, err := ParseListing(q.State)
	if err != nil {
		return nil, invalid("state", "%v", err)
	}
	if state == "" {
		state = ListWaiting
	}
	keyset := state == ListRetrying || state == ListWaitingSQL
	switch {
	case keyset && q.HasOffset:
		return nil, conflicting("offset", "state=%s pages by keyset: pass next_after as after", state)
	case !keyset && q.After != "":
		return nil, conflicting("after", "state=%s pages by offset; after is for retrying, waiting_sql and prefix searches", state)
	}
	switch state {
	case ListRetrying:
		return i.listLedger(ctx, topic, state, queue.StateRetrying, q)
	case ListWaitingSQL:
		return i.listLedger(ctx, topic, state, queue.StateWaiting, q)
	case ListInFlight:
		return i.listRedis(ctx, topic, state, queue.StateInFlight, q)
	case ListDead:
		return i.listRedis(ctx, topic, state, queue.StateDead, q)
	}
	return i.listRedis(ctx, topic, state, queue.StateWaiting, q)
}

// listRedis answers one page of one of Redis's sets of the topic, by
// offset; an in_flight page gets its ledger rows in one statement.
func (i *Inspector) listRedis(ctx context.Context, topic, name string, set queue.State, q JobQuery) (*JobPage, error) {
	page, err := i.q.List(ctx, topic, set, q.Offset, q.Limit)
	if err != nil {
		return nil, err
	}
	out := &JobPage{Topic: topic, State: name, Total: page.Total, Offset: q.Offset, Limit: q.Limit,
		Jobs: make([]ListedJob, 0, len(page.Jobs))}
	for _, info := range page.Jobs {
		out.Jobs = append(out.Jobs, ListedJob{Info: info})
	}
	if set == queue.StateInFlight && len(out.Jobs) > 0 {
		// One statement per partition on the page, each on the exact
		// (topic, job_id) index: a partition's rows carry its name.
		ids := map[string][]string{}
		for _, j := range out.Jobs {
			in := cmp.Or(j.Info.Job.Partition, topic)
			ids[in] = append(ids[in], j.Info.Job.ID)
		}
		rows := map[string]map[string]ledger.Summary{}
		for in, of := range ids {
			r, err := i.store.RowsOf(ctx, in, of)
			if err != nil {
				out.LedgerError = fmt.Errorf("%w: %w", queue.ErrLedger, err)
				break
			}
			rows[in] = r
		}
		for k := range out.Jobs {
			j := out.Jobs[k].Info.Job
			if s, ok := rows[cmp.Or(j.Partition, topic)][j.ID]; ok {
				out.Jobs[k].Row = &s
			}
		}
	}
	if next := q.Offset + len(page.Jobs); len(page.Jobs) > 0 && int64(next) < page.Total {
		out.NextOffset = next
	}
	return out, nil
}

// listLedger answers one page of the topic's ledger rows in state, by due
// time, paged by keyset (After is a page's NextAfter).
func (i *Inspector) listLedger(ctx context.Context, topic, name string, state queue.State, q JobQuery) (*JobPage, error) {
	f := ledger.ListFilter{State: state, Topic: topic, Limit: q.Limit}
	if q.After != "" {
		pos, ok := cursorPosition(q.After, name, topic, "")
		if !ok {
			return nil, invalid("after", "after=%q: not a cursor of state=%s of topic %q; give this listing's next_after as it is", q.After, name, topic)
		}
		c, err := ledger.ParseCursor(pos)
		if err != nil {
			return nil, invalid("after", "after=%q: give a page's next_after as it is", q.After)
		}
		f.After = &c
	}
	rows, next, err := i.store.ListSummaries(ctx, f)
	switch {
	case errors.Is(err, ledger.ErrBadCursor):
		return nil, invalid("after", "after=%q: not a cursor of this ledger's shards; give a page's next_after as it is", q.After)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", queue.ErrLedger, err)
	}
	out := &JobPage{Topic: topic, State: name, Total: -1, Limit: q.Limit, Jobs: rowJobs(rows)}
	if next != nil {
		out.NextAfter = makeCursor(name, topic, "", next.String())
	}
	return out, nil
}

// searchPrefix answers the jobs of a durable topic whose id starts with
// the prefix, from the ledger's unique (topic, job_id) index, in id order,
// paged by keyset (After is the last id of the previous page). Jobs
// without a row (a redis topic's waiting jobs, dead or finished jobs) are
// not in it: a redis topic has no index by id prefix (its sets are by
// time), and searching it would mean scanning the keyspace, which the
// browser never does.
func (i *Inspector) searchPrefix(ctx context.Context, topic string, q JobQuery) (*JobPage, error) {
	switch {
	case q.State != "":
		return nil, conflicting("state", "a prefix search lists every ledger row of the topic with the prefix, by id: leave state out")
	case q.HasOffset:
		return nil, conflicting("offset", "a prefix search pages by keyset: pass next_after as after, leave offset out")
	}
	if err := queue.ValidateID(q.Prefix); err != nil {
		return nil, invalid("prefix", "prefix=%q: an id prefix is 1-200 of the id characters [A-Za-z0-9_.:@/-]", q.Prefix)
	}
	if !i.q.WaitsInSQL(topic) {
		return nil, invalid("prefix", "topic %q is a redis topic: no index serves an id prefix search there (only a durable topic's SQL ledger has one); search by the exact id (GET /v1/topics/{topic}/jobs/{id})", topic)
	}
	after := ""
	if q.After != "" {
		pos, ok := cursorPosition(q.After, "prefix", topic, q.Prefix)
		if !ok {
			return nil, invalid("after", "after=%q: not a cursor of the prefix search %q of topic %q; give this search's next_after as it is", q.After, q.Prefix, topic)
		}
		if err := queue.ValidateID(pos); err != nil {
			return nil, invalid("after", "after=%q: give a page's next_after as it is", q.After)
		}
		after = pos
	}
	rows, next, err := i.store.ByPrefix(ctx, topic, q.Prefix, after, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", queue.ErrLedger, err)
	}
	out := &JobPage{Topic: topic, Prefix: q.Prefix, Total: -1, Limit: q.Limit, Jobs: rowJobs(rows)}
	if next != "" {
		out.NextAfter = makeCursor("prefix", topic, q.Prefix, next)
	}
	return out, nil
}

func rowJobs(rows []ledger.Summary) []ListedJob {
	out := make([]ListedJob, len(rows))
	for k := range rows {
		out[k].Row = &rows[k]
	}
	return out
}

func invalid(field, format string, args ...any) error {
	return &queue.ValidationError{Field: field, Kind: queue.ErrInvalid, Reason: fmt.Sprintf(format, args...)}
}

func conflicting(field, format string, args ...any) error {
	return &queue.ValidationError{Field: field, Kind: ErrConflictingFields, Reason: fmt.Sprintf(format, args...)}
}

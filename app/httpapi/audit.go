package httpapi

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/delayq/delayq/internal/httpjson"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// maxLedgerPage bounds one audit listing: rows carry no payload here, but
// an unbounded listing of a stuck system is still a large answer.
const maxLedgerPage = 1000

// LedgerRow is one ledger row, as the API and the CLI show it (built by
// NewLedgerRow): a job some worker claimed and that has not
// finished for good, or a durable topic's job waiting for its first run. The payload is left out (its size stays): audit
// listings are for finding jobs, GET the job for its content. Times are Unix
// milliseconds.
type LedgerRow struct {
	ID    int64  `json:"id"`
	Topic string `json:"topic"`
	// Partition is the partition whose row this is, for a topic of
	// several (docs/design.md §7.1); "" otherwise.
	Partition string `json:"partition,omitempty"`
	JobID     string `json:"job_id"`
	// State is the row's: waiting (a durable job waiting for its first
	// run: no claim yet), in_flight or retrying.
	State       queue.State `json:"state"`
	Attempt     int         `json:"attempt"`
	MaxAttempts int         `json:"max_attempts"`
	Priority    int         `json:"priority"` // the job's, 0-3 (docs/design.md §4.23)
	// OrderingKey is the job's (docs/design.md §4.24), absent for none.
	OrderingKey string `json:"ordering_key,omitempty"`
	RunAt       int64  `json:"run_at"`
	ClaimedAt   int64  `json:"claimed_at"`
	LeaseUntil  int64  `json:"lease_until"` // 0: no lease (a waiting row)
	Worker      string `json:"worker"`      // host:pid of the claiming process
	LastError   string `json:"last_error,omitempty"`
	UpdatedAt   int64  `json:"updated_at"`
	PayloadSize int    `json:"payload_size"`
	// Shard is the ledger shard that holds the row, over several
	// (docs/design.md §7.1); absent for shard 0, the home shard.
	Shard int `json:"shard,omitempty"`
}

// defaultPage is the page size of the audit routes' pages that do not say.
const defaultPage = 100

// LedgerPage answers the audit routes.
type LedgerPage struct {
	Rows []LedgerRow `json:"rows"`
	// NextAfterID (stale only) is the after_id of the next page; absent
	// when this page was not full.
	NextAfterID int64 `json:"next_after_id,omitempty"`
	// NextAfterShard (stale only, over ledger shards) is the after_shard
	// of the next page; absent for shard 0.
	NextAfterShard int `json:"next_after_shard,omitempty"`
	// NextCursor (GET /v1/ledger and /v1/ledger/inflight) is the cursor of
	// the next page; absent on the last one.
	NextCursor string `json:"next_cursor,omitempty"`
}

func ledgerPage(rows []ledger.Entry) LedgerPage {
	p := LedgerPage{Rows: make([]LedgerRow, 0, len(rows))}
	for _, e := range rows {
		p.Rows = append(p.Rows, NewLedgerRow(e))
	}
	return p
}

// newSummaryRow renders a row read without its payload (ledger.Summary),
// with the payload's size.
func newSummaryRow(s ledger.Summary) LedgerRow {
	row := NewLedgerRow(s.Entry)
	row.PayloadSize = s.PayloadSize
	return row
}

// leaseOf is a row's lease end as shown: 0 for a waiting row, which holds
// no lease (its column keeps ledger.NeverStale, for the stale scan).
func leaseOf(e ledger.Entry) int64 {
	if e.LeaseUntil == ledger.NeverStale {
		return 0
	}
	return e.LeaseUntil
}

// NewLedgerRow renders a ledger row as the API and the CLI show it: no
// payload, the last error as valid UTF-8.
func NewLedgerRow(e ledger.Entry) LedgerRow {
	topic, partition := ledger.SplitPartition(e.Topic)
	return LedgerRow{
		ID: e.ID, Topic: topic, Partition: partition, JobID: e.JobID, State: e.State,
		Attempt: e.Attempt, MaxAttempts: e.MaxAttempts, Priority: e.Priority, OrderingKey: e.OrderingKey, RunAt: e.RunAt,
		ClaimedAt: e.ClaimedAt, LeaseUntil: leaseOf(e), Worker: validText(e.Worker),
		LastError: validText(e.LastError), UpdatedAt: e.UpdatedAt, PayloadSize: len(e.Payload),
		Shard: e.Shard,
	}
}

// ledgerList handles GET /v1/ledger?state=&topic=&due_after=&due_before=
// &cursor=&limit= and its older name GET /v1/ledger/inflight (same
// parameters, same answer). With a state, rows come by due time (run_at,
// then id); without one, by id (see ledger.List). Page on by passing
// next_cursor back as cursor with the same filters.
func (a *api) ledgerList(w http.ResponseWriter, r *http.Request) error {
	f, err := ledgerFilter(r)
	if err != nil {
		return err
	}
	p, err := a.sh.List(r.Context(), f)
	switch {
	case errors.Is(err, ledger.ErrBadCursor):
		// A cursor of a shard this ledger does not have.
		return badRequest(CodeInvalidValue, "cursor", "cursor=%q: not a cursor of this ledger's shards; give a page's next_cursor as it is", f.After.String())
	case err != nil:
		return fromSQL(err)
	}
	writeJSON(w, http.StatusOK, NewLedgerPage(p))
	return nil
}

// NewLedgerPage renders a page of ledger.List as GET /v1/ledger answers it
// (and the CLI prints it): rows as NewLedgerRow makes them, and the next
// page's cursor in its text form.
func NewLedgerPage(p ledger.Page) LedgerPage {
	out := ledgerPage(p.Rows)
	if p.Next != nil {
		out.NextCursor = p.Next.String()
	}
	return out
}

// ledgerFilter reads GET /v1/ledger's parameters; each bad one is 400
// naming it.
func ledgerFilter(r *http.Request) (ledger.ListFilter, error) {
	var f ledger.ListFilter
	f.Topic = httpjson.QueryString(r, "topic")
	if f.Topic != "" {
		if err := queue.ValidateTopic(f.Topic); err != nil {
			return f, err
		}
	}
	var err error
	if q := r.URL.Query(); q.Has("state") {
		s := q.Get("state")
		f.State, err = queue.ParseState(s)
		if err == nil && !ledger.ValidState(f.State) {
			err = fmt.Errorf("state %q: a ledger row is waiting, retrying or in_flight", s)
		}
		if err != nil {
			return f, badRequest(CodeInvalidValue, "state", "%v", err)
		}
	}
	if f.DueAfter, err = httpjson.QueryInt(r, "due_after", 0, 0, math.MaxInt64); err != nil {
		return f, err
	}
	if f.DueBefore, err = httpjson.QueryInt(r, "due_before", 0, 1, math.MaxInt64); err != nil {
		return f, err
	}
	if f.DueBefore != 0 && f.DueBefore <= f.DueAfter {
		return f, badRequest(CodeInvalidValue, "due_before", "due_before=%d: must be after due_after=%d", f.DueBefore, f.DueAfter)
	}
	if s := httpjson.QueryString(r, "cursor"); s != "" {
		c, err := ledger.ParseCursor(s)
		if err != nil {
			return f, badRequest(CodeInvalidValue, "cursor", "cursor=%q: give a page's next_cursor as it is", s)
		}
		f.After = &c
	}
	limit, err := httpjson.QueryInt(r, "limit", defaultPage, 1, maxLedgerPage)
	f.Limit = int(limit)
	return f, err
}

// ledgerStale handles GET
// /v1/ledger/stale?older_than=&after_id=&after_shard=&limit=: rows whose
// lease ended before older_than (Unix ms, default now), by id, after
// after_id; over ledger shards by (shard, id), from after_shard's rows
// after after_id on. Page on by passing next_after_id (and
// next_after_shard) back; every row stale throughout is listed once
// however rows come and go.
func (a *api) ledgerStale(w http.ResponseWriter, r *http.Request) error {
	olderThan, err := httpjson.QueryInt(r, "older_than", time.Now().UnixMilli(), 1, math.MaxInt64)
	if err != nil {
		return err
	}
	afterID, err := httpjson.QueryInt(r, "after_id", 0, 0, math.MaxInt64)
	if err != nil {
		return err
	}
	afterShard, err := httpjson.QueryInt(r, "after_shard", 0, 0, int64(a.sh.Len()-1))
	if err != nil {
		return err
	}
	limit, err := httpjson.QueryInt(r, "limit", defaultPage, 1, maxLedgerPage)
	if err != nil {
		return err
	}
	rows, err := a.sh.Stale(r.Context(), olderThan, ledger.StaleCursor{Shard: int(afterShard), ID: afterID}, int(limit))
	if err != nil {
		return fromSQL(err)
	}
	p := ledgerPage(rows)
	if len(rows) == int(limit) {
		p.NextAfterID, p.NextAfterShard = rows[len(rows)-1].ID, rows[len(rows)-1].Shard
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

// ledgerListParams are the query parameters of GET /v1/ledger.
var ledgerListParams = []string{"state", "topic", "due_after", "due_before", "cursor", "limit"}

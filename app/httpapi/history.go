package httpapi

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"time"

	"github.com/delayq/delayq/internal/httpjson"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// HistoryView is one finished job as GET /v1/topics/{topic}/history shows
// it (ledger.HistoryRow): times are Unix ms; first_claimed_at and
// claimed_at are 0 for a job cancelled before any claim.
type HistoryView = ledger.HistoryRow

// HistoryPage is a page of a topic's job history: newest first by finish
// time, or by id with id or prefix; next_after starts the next page
// (absent on the last one).
type HistoryPage struct {
	Topic     string        `json:"topic"`
	History   []HistoryView `json:"history"`
	NextAfter string        `json:"next_after,omitempty"`
}

// historyParams are the query parameters of GET /v1/topics/{topic}/history.
var historyParams = []string{"id", "prefix", "outcome", "finished_from", "finished_before", "after", "limit"}

// HistoryQuery reads GET /v1/topics/{topic}/history's query into a
// ledger filter: bad values are 400s naming the parameter.
func HistoryQuery(r *http.Request, topic string) (ledger.HistoryFilter, error) {
	f := ledger.HistoryFilter{Topic: topic}
	if err := queue.ValidateTopic(topic); err != nil {
		return f, err
	}
	q := r.URL.Query()
	f.ID, f.Prefix, f.Outcome, f.After = q.Get("id"), q.Get("prefix"), q.Get("outcome"), q.Get("after")
	switch {
	case f.ID != "" && f.Prefix != "":
		return f, badRequest(CodeConflictingFields, "prefix", "give an id or a prefix, not both")
	case f.ID != "" && queue.ValidateID(f.ID) != nil:
		return f, badRequest(CodeInvalidValue, "id", "id=%q: not a job id", f.ID)
	case f.Prefix != "" && queue.ValidateID(f.Prefix) != nil:
		return f, badRequest(CodeInvalidValue, "prefix", "prefix=%q: an id prefix is 1-200 of the id characters [A-Za-z0-9_.:@/-]", f.Prefix)
	case f.Outcome != "" && !ledger.ValidOutcome(f.Outcome):
		return f, badRequest(CodeInvalidValue, "outcome", "outcome=%q: want succeeded, dead, cancelled or purged", f.Outcome)
	}
	var err error
	if f.FinishedFrom, err = httpjson.QueryInt(r, "finished_from", 0, 1, math.MaxInt64); err != nil {
		return f, err
	}
	if f.FinishedBefore, err = httpjson.QueryInt(r, "finished_before", 0, 1, math.MaxInt64); err != nil {
		return f, err
	}
	if f.FinishedFrom != 0 && f.FinishedBefore != 0 && f.FinishedBefore <= f.FinishedFrom {
		// An empty range is a mistake, as in the ledger's listings.
		return f, badRequest(CodeInvalidValue, "finished_before", "finished_before=%d: want it after finished_from=%d", f.FinishedBefore, f.FinishedFrom)
	}
	limit, err := httpjson.QueryInt(r, "limit", defaultPage, 1, maxLedgerPage)
	if err != nil {
		return f, err
	}
	f.Limit = int(limit)
	return f, nil
}

// finishedHint says how the job's latest history row ended, for the 404
// of a job Redis and the ledger no longer hold: ": it finished (succeeded
// at ...)", or "" when there is none (never enqueued, history off or past
// its retention) or SQL did not answer.
func (a *api) finishedHint(r *http.Request, topic, id string) string {
	rows, _, err := a.sh.History(r.Context(), ledger.HistoryFilter{Topic: topic, ID: id, Limit: 1})
	if err != nil || len(rows) == 0 {
		return ": never enqueued, or finished longer ago than its history keeps"
	}
	h := rows[0]
	return fmt.Sprintf(": it finished, %s at %s after %d attempt(s); see GET /v1/topics/%s/history?id=%s",
		h.Outcome, time.UnixMilli(h.FinishedAt).UTC().Format(time.RFC3339Nano), h.Attempts, topic, url.QueryEscape(id))
}

// listHistory handles GET /v1/topics/{topic}/history.
func (a *api) listHistory(w http.ResponseWriter, r *http.Request) error {
	topic := r.PathValue("topic")
	f, err := HistoryQuery(r, topic)
	if err != nil {
		return err
	}
	rows, next, err := a.sh.History(r.Context(), f)
	switch {
	case errors.Is(err, ledger.ErrBadCursor):
		return badRequest(CodeInvalidValue, "after", "after=%q: not a cursor of this listing (by id with id or prefix, else by time); give its next_after as it is", f.After)
	case err != nil:
		return fromSQL(err)
	}
	if rows == nil {
		rows = []ledger.HistoryRow{}
	}
	writeJSON(w, http.StatusOK, HistoryPage{Topic: topic, History: rows, NextAfter: next})
	return nil
}

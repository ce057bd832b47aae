package httpapi

import (
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
// finished for good. The payload is left out (its size stays): audit
// listings are for finding jobs, GET the job for its content. Times are Unix
// milliseconds.
type LedgerRow struct {
	ID          int64  `json:"id"`
	Topic       string `json:"topic"`
	JobID       string `json:"job_id"`
	State       string `json:"state"` // in_progress or retrying
	Attempt     int    `json:"attempt"`
	MaxAttempts int    `json:"max_attempts"`
	RunAt       int64  `json:"run_at"`
	ClaimedAt   int64  `json:"claimed_at"`
	LeaseUntil  int64  `json:"lease_until"`
	Worker      string `json:"worker"` // host:pid of the claiming process
	LastError   string `json:"last_error,omitempty"`
	UpdatedAt   int64  `json:"updated_at"`
	PayloadSize int    `json:"payload_size"`
}

// LedgerPage answers the audit routes.
type LedgerPage struct {
	Rows []LedgerRow `json:"rows"`
	// NextAfterID (stale only) is the after_id of the next page; absent
	// when this page was not full.
	NextAfterID int64 `json:"next_after_id,omitempty"`
}

func ledgerPage(rows []ledger.Entry) LedgerPage {
	p := LedgerPage{Rows: make([]LedgerRow, 0, len(rows))}
	for _, e := range rows {
		p.Rows = append(p.Rows, NewLedgerRow(e))
	}
	return p
}

// NewLedgerRow renders a ledger row as the API and the CLI show it: no
// payload, the last error as valid UTF-8.
func NewLedgerRow(e ledger.Entry) LedgerRow {
	return LedgerRow{
		ID: e.ID, Topic: e.Topic, JobID: e.JobID, State: e.State,
		Attempt: e.Attempt, MaxAttempts: e.MaxAttempts, RunAt: e.RunAt,
		ClaimedAt: e.ClaimedAt, LeaseUntil: e.LeaseUntil, Worker: validText(e.Worker),
		LastError: validText(e.LastError), UpdatedAt: e.UpdatedAt, PayloadSize: len(e.Payload),
	}
}

// ledgerInFlight handles GET /v1/ledger/inflight?topic=&limit=: the jobs
// workers hold or that wait for a retry, oldest first; no topic means all.
func (a *api) ledgerInFlight(w http.ResponseWriter, r *http.Request) error {
	topic := r.URL.Query().Get("topic")
	if topic != "" {
		if err := queue.ValidateTopic(topic); err != nil {
			return err
		}
	}
	limit, err := httpjson.QueryInt(r, "limit", defaultPage, 1, maxLedgerPage)
	if err != nil {
		return err
	}
	rows, err := a.l.InFlight(r.Context(), topic, int(limit))
	if err != nil {
		return fromSQL(err)
	}
	writeJSON(w, http.StatusOK, ledgerPage(rows))
	return nil
}

// ledgerStale handles GET /v1/ledger/stale?older_than=&after_id=&limit=:
// rows whose lease ended before older_than (Unix ms, default now), by id,
// after after_id. Page on by passing next_after_id back as after_id; every
// row stale throughout is listed once however rows come and go.
func (a *api) ledgerStale(w http.ResponseWriter, r *http.Request) error {
	olderThan, err := httpjson.QueryInt(r, "older_than", time.Now().UnixMilli(), 1, math.MaxInt64)
	if err != nil {
		return err
	}
	afterID, err := httpjson.QueryInt(r, "after_id", 0, 0, math.MaxInt64)
	if err != nil {
		return err
	}
	limit, err := httpjson.QueryInt(r, "limit", defaultPage, 1, maxLedgerPage)
	if err != nil {
		return err
	}
	rows, err := a.l.Stale(r.Context(), olderThan, afterID, int(limit))
	if err != nil {
		return fromSQL(err)
	}
	p := ledgerPage(rows)
	if len(rows) == int(limit) {
		p.NextAfterID = rows[len(rows)-1].ID
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

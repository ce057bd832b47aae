package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// JobView is a job as the API (GET, DELETE, listings) and the CLI show it,
// built by NewJobView only. Times are Unix milliseconds. Its text is safe to
// send as JSON and to print: the payload is shown as JSON only when it is
// valid UTF-8 JSON (else in base64), and the last error is valid UTF-8.
type JobView struct {
	Topic string `json:"topic"`
	// Partition is the partition holding the job, for a topic of several
	// (docs/design.md §7.1); "" otherwise.
	Partition string `json:"partition,omitempty"`
	ID        string `json:"id"`
	// State is waiting, retrying, in_flight or dead (queue.State);
	// cancelled in a DELETE's answer.
	State queue.State `json:"state"`
	// RunAt is when the job is due (waiting: its first run; retrying: its
	// next attempt) or was due.
	RunAt      int64 `json:"run_at"`
	LeaseUntil int64 `json:"lease_until,omitempty"` // in flight: when the lease ends
	DiedAt     int64 `json:"died_at,omitempty"`     // dead: time of death
	EnqueuedAt int64 `json:"enqueued_at,omitempty"`
	// Attempt counts the claims so far (1 while the first run is in
	// flight); MaxAttempts is how many are allowed: the job's own, capped
	// by its topic's configured limit (worker.topics.<t>.max_attempts),
	// which its next claim applies.
	Attempt     int `json:"attempt"`
	MaxAttempts int `json:"max_attempts"`
	// Priority is the job's priority within its topic, 0 (the default) to
	// 3 (docs/design.md §4.23).
	Priority int `json:"priority"`
	// OrderingKey is the job's ordering key (docs/design.md §4.24), absent
	// for none; Parked says a waiting job waits behind an earlier job of
	// its key.
	OrderingKey string `json:"ordering_key,omitempty"`
	Parked      bool   `json:"parked,omitempty"`
	LastError   string `json:"last_error,omitempty"`
	PayloadSize int    `json:"payload_size"`
	// The payload is Payload when it is valid UTF-8 JSON, else
	// PayloadBase64; neither when it is empty or left out (listings).
	Payload       json.RawMessage `json:"payload,omitempty"`
	PayloadBase64 string          `json:"payload_base64,omitempty"`
	// SQLOnly: a durable job that waits in the SQL ledger only (due beyond
	// the horizon; the relay loads it into Redis ahead of its due time).
	SQLOnly bool `json:"sql_only,omitempty"`
	// Retrying is State == retrying, kept for the clients of the release
	// before State said so (docs/design.md §4.1); it goes in the release
	// after next.
	Retrying bool `json:"retrying,omitempty"`
	// CancelRequestedAt, on a job in flight, is when a cancel of its run
	// was first asked (Unix ms): its handler's context is cancelled, and
	// it stays in flight until the handler returns ("cancel requested").
	CancelRequestedAt int64 `json:"cancel_requested_at,omitempty"`
	// TraceParent is the W3C traceparent its enqueue kept (tracing.enabled,
	// docs/design.md §4.21): its runs are spans of that trace. GET of one
	// job only; absent without one.
	TraceParent string `json:"trace_parent,omitempty"`
	// Ledger is the job's ledger row (worker, claim, lease, last error)
	// where the answer shows it: GET of one job, in_flight pages, and the
	// listings read from the ledger; absent when the job has no row.
	Ledger *LedgerRow `json:"ledger,omitempty"`
	// LedgerError says why Ledger is missing when SQL did not answer (GET
	// of one job still shows Redis's view).
	LedgerError string `json:"ledger_error,omitempty"`
	// Warning, in a cancel's answer, is what the operator should know about
	// the cancel's effect (Deps.CancelWarning): an order's close job comes
	// back from the orders sweeper, for one.
	Warning string `json:"warning,omitempty"`
}

// NewJobView renders a job; withPayload false leaves the payload out (its
// size stays), for listings that could otherwise reach gigabytes.
func NewJobView(info *queue.JobInfo, withPayload bool) JobView {
	j := info.Job
	v := JobView{
		Topic: j.Topic, Partition: j.Partition, ID: j.ID, State: info.State, TraceParent: j.TraceParent,
		RunAt: j.RunAt, EnqueuedAt: j.EnqueuedAt,
		Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, Priority: j.Priority, LastError: validText(j.LastError),
		OrderingKey: j.OrderingKey, Parked: info.Parked,
		PayloadSize: len(j.Payload), SQLOnly: info.SQLOnly,
		Retrying: info.State == queue.StateRetrying, CancelRequestedAt: info.CancelRequestedAt,
	}
	switch info.State {
	case queue.StateInFlight:
		v.LeaseUntil = info.Score
	case queue.StateDead:
		v.DiedAt = info.Score
	case queue.StateWaiting, queue.StateRetrying:
		v.RunAt = info.Score
	}
	if withPayload {
		v.Payload, v.PayloadBase64 = payloadView(j.Payload)
	}
	return v
}

// CapAttempts shows the job's max_attempts capped by its topic's attempt
// limit (0: none), which its next claim applies; its ledger row too.
func (v *JobView) CapAttempts(limit int) {
	if limit <= 0 {
		return
	}
	v.MaxAttempts = min(v.MaxAttempts, limit)
	if v.Ledger != nil {
		v.Ledger.MaxAttempts = min(v.Ledger.MaxAttempts, limit)
	}
}

// CapAttempts caps every job of the page as JobView.CapAttempts does, by
// its topic's limit (limit nil: none).
func (p *JobPage) CapAttempts(limit func(topic string) int) {
	if limit == nil {
		return
	}
	for i := range p.Jobs {
		p.Jobs[i].CapAttempts(limit(p.Jobs[i].Topic))
	}
}

// NewRowView renders a job from its ledger row alone (the job browser's
// listings of the ledger read summaries), in the row's state. The payload
// is left out (its size stays), the row is attached.
func NewRowView(s ledger.Summary) JobView {
	e := s.Entry
	row := newSummaryRow(s)
	v := JobView{
		Topic: row.Topic, Partition: row.Partition, ID: e.JobID, State: e.State, RunAt: e.RunAt, EnqueuedAt: e.EnqueuedAt,
		Attempt: e.Attempt, MaxAttempts: e.MaxAttempts, Priority: e.Priority, LastError: validText(e.LastError),
		OrderingKey: e.OrderingKey, PayloadSize: s.PayloadSize, Retrying: e.State == queue.StateRetrying, Ledger: &row,
	}
	if e.State == queue.StateInFlight {
		v.LeaseUntil = e.LeaseUntil
	}
	return v
}

// NewCancelledJobView renders a job just cancelled (it was waiting), as
// the answer of a cancel.
func NewCancelledJobView(j *queue.Job) JobView {
	v := NewJobView(&queue.JobInfo{State: queue.StateWaiting, Score: j.RunAt, Job: j}, true)
	v.State, v.Retrying = queue.StateCancelled, false
	return v
}

// NewCancelRequestedJobView renders a job a worker holds whose run's
// cancel was asked at (CancelRunning): in flight, with cancel_requested_at.
func NewCancelRequestedJobView(j *queue.Job, at int64) JobView {
	return NewJobView(&queue.JobInfo{State: queue.StateInFlight, Score: j.LeaseUntil, Job: j, CancelRequestedAt: at}, true)
}

// PayloadText is the payload for a person to read: the JSON as it is, or
// "base64:" and the bytes in base64; "" when empty or left out.
func (v JobView) PayloadText() string {
	switch {
	case len(v.Payload) > 0:
		return string(v.Payload)
	case v.PayloadBase64 != "":
		return "base64:" + v.PayloadBase64
	}
	return ""
}

// validText makes s valid UTF-8: an error message may quote bytes of a
// payload, and a terminal or a JSON client should not get them raw.
func validText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// payloadView returns p as a JSON value when it is one, else in base64;
// neither when it is empty. The UTF-8 check matters: encoding/json passes
// invalid UTF-8 inside strings, and the answer would then not be valid JSON.
func payloadView(p []byte) (asJSON json.RawMessage, asBase64 string) {
	switch {
	case len(p) == 0:
		return nil, ""
	case utf8.Valid(p) && json.Valid(p):
		return p, ""
	}
	return nil, base64.StdEncoding.EncodeToString(p)
}

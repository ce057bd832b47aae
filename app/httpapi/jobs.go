package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/httpjson"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// EnqueueRequest is the body of POST /v1/topics/{topic}/jobs and one
// element of a batch. Pointers tell "absent" from zero, so that "both given"
// can be refused and an explicit 0 is not mistaken for "use the default".
type EnqueueRequest struct {
	// ID is the idempotency key, e.g. "order_close:123".
	ID string `json:"id"`
	// Payload is any JSON value, stored as its exact bytes.
	Payload json.RawMessage `json:"payload,omitempty"`
	// PayloadBase64 is a binary payload, standard base64 with padding.
	PayloadBase64 *string `json:"payload_base64,omitempty" httpjson:"notext"`
	// DelayMs is how long from now (Redis's clock) the job waits.
	DelayMs *int64 `json:"delay_ms,omitempty"`
	// RunAt is the due time, Unix milliseconds.
	RunAt *int64 `json:"run_at,omitempty"`
	// MaxAttempts bounds the claims; absent means the queue's default.
	MaxAttempts *int `json:"max_attempts,omitempty"`
	// Priority is the job's priority within its topic, 0 (the default) to
	// 3: due jobs of a higher priority are claimed first.
	Priority int `json:"priority,omitempty"`
	// PartitionKey chooses the partition of a topic of several: jobs with
	// the same key land on the same one. Absent: the id chooses.
	PartitionKey string `json:"partition_key,omitempty"`
	// OrderingKey makes the job one of a sequence: jobs of the topic with
	// the same key run one at a time, in due order (enqueue order among
	// equal due times); a retrying job holds its key until it succeeds or
	// dies. On a topic of several partitions it is the partition key too.
	OrderingKey string `json:"ordering_key,omitempty"`
}

// EnqueueResponse answers an enqueue: 202 when the job was created, 200
// with Duplicate when the id was already known (nothing was written).
type EnqueueResponse struct {
	ID    string `json:"id"`
	Topic string `json:"topic"`
	// RunAt is the due time, Unix ms; for a duplicate, the waiting job's
	// own, absent when it is not waiting (in flight or dead).
	RunAt     int64 `json:"run_at,omitempty"`
	Duplicate bool  `json:"duplicate"`
	// Finished is set for a duplicate of a job that finished within the
	// topic's uniqueness window (queue.topics.<t>.unique_for).
	Finished *FinishedView `json:"finished,omitempty"`
}

// FinishedView is how a job whose id is still taken ended: outcome
// succeeded, cancelled, dead or purged, and taken_until (Unix ms), when
// the id is free again.
type FinishedView struct {
	Outcome    string `json:"outcome"`
	TakenUntil int64  `json:"taken_until"`
}

// NewFinishedView is f's view; nil for nil.
func NewFinishedView(f *queue.Finished) *FinishedView {
	if f == nil {
		return nil
	}
	return &FinishedView{Outcome: f.Outcome, TakenUntil: f.TakenUntil}
}

// newJob turns a request into the queue's NewJob. It refuses what the queue
// cannot tell from its zero values (two payload forms, delay and run_at
// both given, an explicit 0) and leaves range checks to the queue, which
// owns the limits.
func newJob(req *EnqueueRequest) (queue.NewJob, error) {
	j := queue.NewJob{ID: req.ID, PartitionKey: req.PartitionKey, OrderingKey: req.OrderingKey}
	if req.ID == "" {
		return j, badRequest(CodeMissingField, "id", "want the job's id, its idempotency key: 1-200 of [A-Za-z0-9_.:@/-]")
	}
	hasJSON := len(req.Payload) > 0 && string(req.Payload) != "null"
	switch {
	case hasJSON && req.PayloadBase64 != nil:
		return j, badRequest(CodeConflictingFields, "payload_base64", "give payload or payload_base64, not both")
	case hasJSON:
		j.Payload = req.Payload
	case req.PayloadBase64 != nil:
		p, err := base64.StdEncoding.DecodeString(*req.PayloadBase64)
		if err != nil {
			return j, badRequest(CodeInvalidPayload, "payload_base64", "not standard base64: %v", err)
		}
		j.Payload = p
	}
	if req.DelayMs != nil && req.RunAt != nil {
		return j, badRequest(CodeConflictingFields, "run_at", "give delay_ms or run_at, not both")
	}
	if req.DelayMs != nil {
		// A count that does not fit a duration would wrap (-2^63 ms to 0,
		// "now"): it is out of range like any other.
		d, ok := httpjson.Millis(*req.DelayMs)
		if !ok {
			return j, badRequest(CodeInvalidRunAt, "delay_ms", "delay_ms %d: out of range", *req.DelayMs)
		}
		j.Delay = d
	}
	if req.RunAt != nil {
		if *req.RunAt == 0 { // the queue reads 0 as "due now"
			return j, badRequest(CodeInvalidRunAt, "run_at", "run_at 0: want Unix milliseconds")
		}
		j.RunAt = *req.RunAt
	}
	if req.MaxAttempts != nil {
		if *req.MaxAttempts == 0 { // the queue reads 0 as "the default"
			return j, badRequest(CodeInvalidMaxAttempts, "max_attempts", "max_attempts 0: want at least 1 (leave it out for the default)")
		}
		j.MaxAttempts = *req.MaxAttempts
	}
	j.Priority = req.Priority
	return j, nil
}

// enqueue handles POST /v1/topics/{topic}/jobs.
func (a *api) enqueue(w http.ResponseWriter, r *http.Request) error {
	topic := r.PathValue("topic")
	if err := queue.ValidateTopic(topic); err != nil {
		return err
	}
	var req EnqueueRequest
	if err := a.decodeBody(r, &req, false); err != nil {
		return err
	}
	j, err := newJob(&req)
	if err != nil {
		return err
	}
	res, err := a.q.Enqueue(r.Context(), topic, j)
	if err != nil {
		return fromRedis(err)
	}
	if a.debug() {
		a.log.WithFields(logrus.Fields{
			"topic": topic, "id": res.ID, "run_at": res.RunAt,
			"duplicate": res.Duplicate, "payload_bytes": len(j.Payload),
		}).Debug("httpapi: enqueued")
	}
	status := http.StatusAccepted
	if res.Duplicate {
		status = http.StatusOK
	} else {
		w.Header().Set("Location", jobPath(topic, res.ID))
	}
	answer := EnqueueResponse{ID: res.ID, Topic: topic, RunAt: res.RunAt, Duplicate: res.Duplicate,
		Finished: NewFinishedView(res.Finished)}
	// The hot route's answer, without json.Encoder's reflection.
	var buf [128]byte
	if b, ok := answer.appendJSON(buf[:0]); ok {
		httpjson.WriteJSONBytes(w, status, b)
	} else {
		writeJSON(w, status, answer)
	}
	return nil
}

// jobPath is a job's URL path. The id's slashes are escaped too: an id
// such as "a//b" would otherwise be "cleaned" into another job's path.
func jobPath(topic, id string) string {
	return "/v1/topics/" + url.PathEscape(topic) + "/jobs/" + url.PathEscape(id)
}

// getJob handles GET /v1/topics/{topic}/jobs/{id...}.
func (a *api) getJob(w http.ResponseWriter, r *http.Request) error {
	topic, id := r.PathValue("topic"), r.PathValue("id")
	info, err := a.q.Find(r.Context(), a.ops, topic, id)
	if err != nil {
		return fromRedis(err)
	}
	if info.State == queue.StateUnknown || info.Job == nil {
		return newError(http.StatusNotFound, CodeNotFound, "", fmt.Sprintf("no job %q in topic %q", id, topic)+a.finishedHint(r, topic, id))
	}
	v := NewJobView(info, true)
	// The row next to Redis's view: which worker holds it, since when, and
	// what the ledger says, which is what an operator compares when the
	// two disagree. SQL down leaves it out, not the answer.
	switch e, err := a.sh.Row(r.Context(), topic, id); {
	case err == nil:
		row := NewLedgerRow(e)
		v.Ledger = &row
	case !errors.Is(err, ledger.ErrNotFound):
		a.log.WithError(err).WithFields(logrus.Fields{"topic": topic, "id": id}).Warn("httpapi: job shown without its ledger row")
		v.LedgerError = "sql is unavailable: the ledger row is not shown"
	}
	a.capped(&v)
	writeJSON(w, http.StatusOK, v)
	return nil
}

// cancelJob handles DELETE /v1/topics/{topic}/jobs/{id...}: a waiting job
// is removed (200, state cancelled); one a worker holds has its run
// cancelled (202, state in_flight with cancel_requested_at: its handler's
// context is cancelled wherever it runs, and the job ends cancelled when
// the handler returns an error); a dead one is not (409 job_dead).
// dataplane.Client.Cancel and CancelRunning do it, in both stores, in the
// order their doc comments give; a job Redis has lost is cancelled from
// its ledger row. A failed DELETE (503) is safe to repeat.
func (a *api) cancelJob(w http.ResponseWriter, r *http.Request) error {
	topic, id := r.PathValue("topic"), r.PathValue("id")
	job, err := a.q.Cancel(r.Context(), a.ops, topic, id)
	if errors.Is(err, queue.ErrInFlight) {
		return a.cancelRun(w, r, topic, id, err)
	}
	switch {
	case errors.Is(err, queue.ErrLedger):
		return fromSQL(err)
	case err != nil:
		return fromRedis(err)
	}
	a.log.WithFields(logrus.Fields{"topic": topic, "id": id, "attempt": job.Attempt}).Info("httpapi: job cancelled")
	v := NewCancelledJobView(job)
	a.capped(&v)
	if a.cancelWarn != nil {
		v.Warning = a.cancelWarn(topic, id)
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// cancelRun is cancelJob for a job a worker holds (Cancel answered
// inFlight): its run is cancelled (202). A job Redis does not hold as in
// flight (its data lost while the ledger says a worker holds it, or it
// settled between the two steps) keeps Cancel's answer, 409
// job_in_flight: a retry sees what it has become.
func (a *api) cancelRun(w http.ResponseWriter, r *http.Request, topic, id string, inFlight error) error {
	job, at, err := a.q.CancelRunning(r.Context(), a.ops, topic, id)
	switch {
	case errors.Is(err, queue.ErrNotFound):
		return fromRedis(inFlight)
	case errors.Is(err, queue.ErrLedger):
		return fromSQL(err)
	case err != nil:
		return fromRedis(err)
	}
	a.log.WithFields(logrus.Fields{"topic": topic, "id": id, "attempt": job.Attempt}).Info("httpapi: cancel of a running job asked")
	v := NewCancelRequestedJobView(job, at)
	a.capped(&v)
	writeJSON(w, http.StatusAccepted, v)
	return nil
}

// RescheduleRequest is the body of PATCH /v1/topics/{topic}/jobs/{id...}:
// exactly one of the three.
type RescheduleRequest struct {
	// RunAt is the new due time, Unix ms; one in the past means now.
	RunAt *int64 `json:"run_at,omitempty"`
	// DelayMs is the new due time as a delay from now, on Redis's clock.
	DelayMs *int64 `json:"delay_ms,omitempty"`
	// ShiftMs moves the due time it has, later (positive) or earlier.
	ShiftMs *int64 `json:"shift_ms,omitempty"`
}

// RescheduledView answers a reschedule: the job as it waits now (run_at is
// the accepted due time: it runs then or after, never before) and the due
// time it had.
type RescheduledView struct {
	JobView
	PreviousRunAt int64 `json:"previous_run_at"`
}

// NewRescheduledView renders what a Reschedule returned: the job waiting
// at its new due time, and the one it had.
func NewRescheduledView(r *queue.Rescheduled) RescheduledView {
	v := NewJobView(&queue.JobInfo{State: r.State, Score: r.RunAt, Job: r.Job, Parked: r.Parked}, true)
	return RescheduledView{JobView: v, PreviousRunAt: r.OldRunAt}
}

// when turns a reschedule request into the queue's When, refusing anything
// but exactly one field and counts that do not fit a duration.
func (req *RescheduleRequest) when() (queue.When, error) {
	given := 0
	for _, p := range []*int64{req.RunAt, req.DelayMs, req.ShiftMs} {
		if p != nil {
			given++
		}
	}
	switch {
	case given == 0:
		return queue.When{}, badRequest(CodeMissingField, "run_at", "give one of run_at, delay_ms or shift_ms")
	case given > 1:
		field := "delay_ms"
		if req.ShiftMs != nil {
			field = "shift_ms"
		}
		return queue.When{}, badRequest(CodeConflictingFields, field, "give only one of run_at, delay_ms or shift_ms")
	case req.RunAt != nil:
		return queue.RescheduleAt(*req.RunAt), nil
	}
	field, ms := "delay_ms", req.DelayMs
	if req.ShiftMs != nil {
		field, ms = "shift_ms", req.ShiftMs
	}
	d, ok := httpjson.Millis(*ms)
	if !ok {
		return queue.When{}, badRequest(CodeInvalidRunAt, field, "%s %d: out of range", field, *ms)
	}
	if field == "shift_ms" {
		return queue.RescheduleBy(d), nil
	}
	return queue.RescheduleIn(d), nil
}

// rescheduleJob handles PATCH /v1/topics/{topic}/jobs/{id...}: a waiting
// job's due time moves (docs/design.md §4.14); one a worker holds (409
// job_in_flight) or a dead one (409 job_dead) does not. dataplane.Client.
// Reschedule does it, in both stores, in the order its doc comment gives.
// It stays open on a read-only API, like cancel: the application moves its
// own jobs with it (the orders module's extend). A failed PATCH (503) is
// safe to repeat with run_at or delay_ms; with shift_ms, read the job first
// (the shift may have been applied).
func (a *api) rescheduleJob(w http.ResponseWriter, r *http.Request) error {
	topic, id := r.PathValue("topic"), r.PathValue("id")
	if err := queue.ValidateTopic(topic); err != nil {
		return err
	}
	if err := queue.ValidateID(id); err != nil {
		return err
	}
	var req RescheduleRequest
	if err := a.decodeBody(r, &req, false); err != nil {
		return err
	}
	to, err := req.when()
	if err != nil {
		return err
	}
	res, err := a.q.Reschedule(r.Context(), a.ops, topic, id, to)
	switch {
	case errors.Is(err, queue.ErrLedger):
		return fromSQL(err)
	case err != nil:
		return fromRedis(err)
	}
	a.log.WithFields(logrus.Fields{"topic": topic, "id": id, "attempt": res.Job.Attempt, "to": to.String(),
		"previous_run_at": res.OldRunAt, "run_at": res.RunAt, "remote": r.RemoteAddr}).Info("httpapi: job rescheduled")
	v := NewRescheduledView(res)
	a.capped(&v.JobView)
	writeJSON(w, http.StatusOK, v)
	return nil
}

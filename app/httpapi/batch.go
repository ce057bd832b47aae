package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/httpjson"
	"github.com/delayq/delayq/queue"
)

// BatchRequest is the body of POST /v1/topics/{topic}/jobs:batch.
type BatchRequest struct {
	Jobs []EnqueueRequest `json:"jobs"`
}

// batchBody is how a batch is decoded: each job is kept raw and decoded on
// its own, so that a job with a typo is reported as that job's error while
// the others go in.
type batchBody struct {
	Jobs []json.RawMessage `json:"jobs"`
}

// BatchResponse answers a batch: one result per job, in request order, and
// the counts.
type BatchResponse struct {
	Topic      string        `json:"topic"`
	Created    int           `json:"created"`
	Duplicates int           `json:"duplicates"`
	Invalid    int           `json:"invalid"`
	Results    []BatchResult `json:"results"`
}

// BatchResult is one job's outcome.
type BatchResult struct {
	Index int    `json:"index"`
	ID    string `json:"id"`
	// Status is created, duplicate or invalid (queue.BatchStatus).
	Status string `json:"status"`
	// RunAt is the due time, Unix ms (see EnqueueResponse.RunAt).
	RunAt int64 `json:"run_at,omitempty"`
	// Finished is set for a duplicate of a finished job whose id is
	// still taken (see EnqueueResponse.Finished).
	Finished *FinishedView `json:"finished,omitempty"`
	// Error says why an invalid job was refused; its field is the job's
	// field ("delay_ms"), not the path in the batch.
	Error *ErrorDetail `json:"error,omitempty"`
}

// enqueueBatch handles POST /v1/topics/{topic}/jobs:batch. The request is
// refused as a whole only for what concerns the whole: auth, content type,
// body size, a body that is not a {"jobs": [...]} object, a bad topic, or
// more jobs than the queue takes in one call. That last one is a 400
// batch_too_large naming the field "jobs", not a 413: 413 stays reserved
// for bodies over MaxBodyBytes, so a client can tell "too many jobs" (split
// by count) from "too many bytes" (split by size); and a thousand and one
// tiny jobs are not a large body. Per-job problems (a bad id, an unknown
// field, a delay out of range) make only that job invalid; the 200 answer
// lists every job's outcome. Nothing is written for invalid jobs.
func (a *api) enqueueBatch(w http.ResponseWriter, r *http.Request) error {
	topic := r.PathValue("topic")
	if err := queue.ValidateTopic(topic); err != nil {
		return err
	}
	var body batchBody
	if err := a.decodeBody(r, &body, false); err != nil {
		return err
	}
	if body.Jobs == nil {
		return badRequest(CodeMissingField, "jobs", `want {"jobs": [...]}`)
	}
	if limit := a.q.Config().MaxBatch; len(body.Jobs) > limit {
		return badRequest(CodeBatchTooLarge, "jobs", "%d jobs: limit is %d per batch", len(body.Jobs), limit)
	}

	resp := BatchResponse{Topic: topic, Results: make([]BatchResult, len(body.Jobs))}
	jobs := make([]queue.NewJob, 0, len(body.Jobs))
	at := make([]int, 0, len(body.Jobs)) // index in the request of each job sent to the queue
	payloadBytes := 0
	for i, raw := range body.Jobs {
		res := &resp.Results[i]
		res.Index = i
		j, err := decodeBatchJob(raw)
		res.ID = j.ID
		if err != nil {
			res.Status, res.Error = string(queue.BatchInvalid), &classify(err).ErrorDetail
			continue
		}
		jobs = append(jobs, j)
		at = append(at, i)
		payloadBytes += len(j.Payload)
	}
	out, err := a.q.EnqueueBatch(r.Context(), topic, jobs)
	if err != nil {
		return fromRedis(err)
	}
	for k, o := range out {
		res := &resp.Results[at[k]]
		res.Status, res.RunAt, res.Finished = string(o.Status), o.RunAt, NewFinishedView(o.Finished)
		if o.Err != nil {
			res.Error = &classify(o.Err).ErrorDetail
		}
	}
	for _, res := range resp.Results {
		switch queue.BatchStatus(res.Status) {
		case queue.BatchCreated:
			resp.Created++
		case queue.BatchDuplicate:
			resp.Duplicates++
		default:
			resp.Invalid++
		}
	}
	a.log.WithFields(logrus.Fields{
		"topic": topic, "jobs": len(resp.Results), "created": resp.Created,
		"duplicates": resp.Duplicates, "invalid": resp.Invalid, "payload_bytes": payloadBytes,
	}).Debug("httpapi: batch enqueued")
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// decodeBatchJob decodes one job of a batch as strictly as a single
// enqueue's body. The id is returned even when the job is invalid, when it
// could be read, so the result can name it.
func decodeBatchJob(raw json.RawMessage) (queue.NewJob, error) {
	var req EnqueueRequest
	if err := httpjson.Value(raw, &req); err != nil {
		return queue.NewJob{ID: req.ID}, err
	}
	j, err := newJob(&req)
	if err != nil {
		return j, fmt.Errorf("job %q: %w", req.ID, err)
	}
	return j, nil
}

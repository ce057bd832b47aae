package httpapi

import (
	"errors"
	"net/http"

	"github.com/delayq/delayq/internal/httpjson"
	"github.com/delayq/delayq/internal/unavailable"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// The error codes of the API. They are part of its contract: clients and the
// CLI branch on them, so a code is never renamed or reused for another
// meaning; new ones may be added. The codes every route shares (the orders
// module's too) come from internal/httpjson, which decides the rules of bad
// input once; the package doc lists them all.
const (
	// 400: bad input. Field names the JSON field or query parameter.
	CodeMalformedJSON      = httpjson.CodeMalformedJSON  // not JSON, truncated, trailing data, not an object (null included)
	CodeUnknownField       = httpjson.CodeUnknownField   // a JSON field or query parameter the route does not take
	CodeInvalidValue       = httpjson.CodeInvalidValue   // wrong JSON type, a value out of range, control characters in text (query parameters too)
	CodeMissingField       = httpjson.CodeMissingField   // a required field is absent
	CodeUnexpectedBody     = httpjson.CodeUnexpectedBody // a body sent to a route that takes none
	CodeConflictingFields  = "conflicting_fields"        // two fields that exclude each other (payload and payload_base64, delay_ms and run_at, id and all)
	CodeInvalidTopic       = "invalid_topic"             // queue.ErrInvalidTopic
	CodeInvalidID          = "invalid_id"                // queue.ErrInvalidID
	CodeInvalidPayload     = "invalid_payload"           // payload_base64 is not base64
	CodePayloadTooLarge    = "payload_too_large"         // queue.ErrPayloadTooLarge
	CodeInvalidRunAt       = "invalid_run_at"            // queue.ErrInvalidRunAt: delay_ms or run_at out of range
	CodeInvalidMaxAttempts = "invalid_max_attempts"      // queue.ErrInvalidMaxAttempts
	CodeInvalidPriority    = "invalid_priority"          // queue.ErrInvalidPriority
	CodeInvalidOrderingKey = "invalid_ordering_key"      // queue.ErrInvalidOrderingKey
	CodeBatchTooLarge      = "batch_too_large"           // queue.ErrBatchTooLarge: more jobs than Config.MaxBatch

	CodeUnauthorized         = "unauthorized"                    // 401: missing or wrong bearer token
	CodeReadOnly             = "read_only"                       // 403: the API runs read-only
	CodeNotFound             = httpjson.CodeNotFound             // 404: no such job, dead job or route
	CodeMethodNotAllowed     = httpjson.CodeMethodNotAllowed     // 405, with an Allow header
	CodeJobInFlight          = "job_in_flight"                   // 409: a worker holds the job; its handler may be running
	CodeJobDead              = "job_dead"                        // 409: the job is dead; requeue or purge it instead
	CodeJobContended         = "job_contended"                   // 409: a reschedule lost to other moves of the job too often; try again
	CodeBodyTooLarge         = httpjson.CodeBodyTooLarge         // 413: body over Deps.MaxBodyBytes
	CodeUnsupportedMediaType = httpjson.CodeUnsupportedMediaType // 415: a body that is not application/json
	CodeInternal             = httpjson.CodeInternal             // 500
	CodeBackendUnavailable   = "backend_unavailable"             // 503: Redis or SQL did not answer
	CodeNotConfigured        = "not_configured"                  // 503: the feature (recovery) is not wired in
	CodeNotReady             = "not_ready"                       // 503 from /readyz
	CodeOverloaded           = "overloaded"                      // 503: over ServerConfig.MaxConcurrent requests in flight
)

// ErrorResponse is the body of every error answer.
type ErrorResponse = httpjson.ErrorResponse

// ErrorDetail says what went wrong: a stable code, a message for humans and,
// for bad input, the field or query parameter at fault.
type ErrorDetail = httpjson.ErrorDetail

// apiError is an error a handler has already classified: it goes out as is.
type apiError = httpjson.Error

func newError(status int, code, field, msg string) *apiError {
	return httpjson.NewError(status, code, field, msg)
}

func badRequest(code, field, format string, args ...any) *apiError {
	return httpjson.BadRequest(code, field, format, args...)
}

// backendError tags an error with the backend it came from, so a 503 can say
// which one to look at ("redis", "sql", "recovery").
type backendError struct {
	backend string
	err     error
}

func (e *backendError) Error() string { return e.backend + ": " + e.err.Error() }
func (e *backendError) Unwrap() error { return e.err }

// fromRedis tags an error of a queue call: Redis's, unless the queue says
// the ledger failed (a durable topic's enqueue, a cancel's row delete).
func fromRedis(err error) error {
	if errors.Is(err, queue.ErrLedger) {
		return fromSQL(err)
	}
	return &backendError{backend: "redis", err: err}
}
func fromSQL(err error) error { return &backendError{backend: "sql", err: err} }

// classify turns any error a handler returned into the answer to send. The
// order matters: validation and "not found" first (they are the caller's
// business), then the backend's health, and only what is left is a 500.
func classify(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var ve *queue.ValidationError
	if errors.As(err, &ve) {
		code, field := validationCode(ve)
		return &apiError{Status: http.StatusBadRequest, ErrorDetail: ErrorDetail{Code: code, Field: field, Message: ve.Error()}, Cause: err}
	}
	switch {
	case errors.Is(err, queue.ErrNotFound), errors.Is(err, ledger.ErrNotFound):
		return &apiError{Status: http.StatusNotFound, ErrorDetail: ErrorDetail{Code: CodeNotFound, Message: "not found"}, Cause: err}
	case errors.Is(err, queue.ErrInFlight):
		return &apiError{Status: http.StatusConflict, ErrorDetail: ErrorDetail{Code: CodeJobInFlight,
			Message: "the job is in flight: a worker holds it and its handler may be running"}, Cause: err}
	case errors.Is(err, queue.ErrContended):
		return &apiError{Status: http.StatusConflict, ErrorDetail: ErrorDetail{Code: CodeJobContended,
			Message: "the job kept moving (other reschedules or claims) while this one tried; try again"}, Cause: err}
	case errors.Is(err, queue.ErrDead):
		return &apiError{Status: http.StatusConflict, ErrorDetail: ErrorDetail{Code: CodeJobDead,
			Message: "the job is dead: requeue or purge it instead"}, Cause: err}
	}
	if unavailable.Is(err) {
		backend := "a backend"
		var be *backendError
		if errors.As(err, &be) {
			backend = be.backend
		}
		return &apiError{Status: http.StatusServiceUnavailable, ErrorDetail: ErrorDetail{Code: CodeBackendUnavailable,
			Message: backend + " is unavailable; retry later"}, Cause: err}
	}
	return &apiError{Status: http.StatusInternalServerError, ErrorDetail: ErrorDetail{Code: CodeInternal,
		Message: "internal error; the server log has the details"}, Cause: err}
}

// validationCode maps a queue validation error to its code and to the name
// the API gives its field (the queue says "delay", the API "delay_ms").
func validationCode(ve *queue.ValidationError) (code, field string) {
	field = ve.Field
	switch field {
	case "delay":
		field = "delay_ms"
	case "shift":
		field = "shift_ms"
	}
	switch {
	case errors.Is(ve, queue.ErrInvalidTopic):
		return CodeInvalidTopic, field
	case errors.Is(ve, queue.ErrInvalidID):
		return CodeInvalidID, field
	case errors.Is(ve, queue.ErrPayloadTooLarge):
		return CodePayloadTooLarge, field
	case errors.Is(ve, queue.ErrInvalidRunAt):
		return CodeInvalidRunAt, field
	case errors.Is(ve, queue.ErrInvalidMaxAttempts):
		return CodeInvalidMaxAttempts, field
	case errors.Is(ve, queue.ErrInvalidPriority):
		return CodeInvalidPriority, field
	case errors.Is(ve, queue.ErrInvalidOrderingKey):
		return CodeInvalidOrderingKey, field
	case errors.Is(ve, queue.ErrBatchTooLarge):
		return CodeBatchTooLarge, field
	}
	return CodeInvalidValue, field
}

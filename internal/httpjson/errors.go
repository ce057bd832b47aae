package httpjson

import (
	"fmt"
	"net/http"
)

// The codes every route shares. They are part of the API's contract
// (app/httpapi re-exports them): a code is never renamed or reused for
// another meaning.
const (
	CodeMalformedJSON        = "malformed_json"         // 400: not JSON, truncated, trailing data, not an object
	CodeUnknownField         = "unknown_field"          // 400: a JSON field or query parameter the route does not take
	CodeInvalidValue         = "invalid_value"          // 400: wrong JSON type, a value out of range, control characters in text
	CodeMissingField         = "missing_field"          // 400: a required field is absent
	CodeUnexpectedBody       = "unexpected_body"        // 400: a body sent to a route that takes none
	CodeNotFound             = "not_found"              // 404
	CodeMethodNotAllowed     = "method_not_allowed"     // 405, with an Allow header
	CodeBodyTooLarge         = "body_too_large"         // 413
	CodeUnsupportedMediaType = "unsupported_media_type" // 415: a body that is not application/json
	CodeInternal             = "internal"               // 500
)

// ErrorResponse is the body of every error answer.
type ErrorResponse struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong: a stable code, a message for humans and,
// for bad input, the field or query parameter at fault.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// Error is an answer already decided: its status and detail go out as they
// are; Cause is for the log (and errors.Is/As), never sent.
type Error struct {
	Status int
	ErrorDetail
	Cause error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Cause)
	}
	return e.Code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

// NewError returns an answer with status, code, field and message.
func NewError(status int, code, field, msg string) *Error {
	return &Error{Status: status, ErrorDetail: ErrorDetail{Code: code, Message: msg, Field: field}}
}

// BadRequest returns a 400 with code and field, its message formatted.
func BadRequest(code, field, format string, args ...any) *Error {
	return NewError(http.StatusBadRequest, code, field, fmt.Sprintf(format, args...))
}

// MethodNotAllowed is the 405 of a route asked with a method it does not
// take; allow lists the ones it does ("GET, HEAD") and goes out as the
// Allow header.
func MethodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) *Error {
	w.Header().Set("Allow", allow)
	return NewError(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "",
		fmt.Sprintf("method %s not allowed on %s; allowed: %s", r.Method, r.URL.Path, allow))
}

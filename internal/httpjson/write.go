package httpjson

import (
	"encoding/json"
	"errors"
	"net/http"
)

// WriteJSON sends v with status. Answers are never cached: they describe a
// queue that changes under them.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	// An error here is the client going away mid-answer; nobody is left to
	// tell, and the access log has the status.
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError sends err in the error envelope, with the headers its status
// calls for: an *Error as it is, anything else as a 500 internal (the
// caller classifies and logs the errors it knows first). It first reads and
// discards what is left of r's body (see discardBody): a refused request's
// body is otherwise left unread, and a server that closes a connection with
// unread data makes the kernel reset it, which can destroy the answer
// before the client has read it.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = NewError(http.StatusInternalServerError, CodeInternal, "", "internal error; the server log has the details")
	}
	discardBody(r)
	if e.Status == http.StatusServiceUnavailable {
		// Backends usually come back within seconds; tell well-behaved
		// clients when to try again instead of letting them spin.
		w.Header().Set("Retry-After", "1")
	}
	WriteJSON(w, e.Status, ErrorResponse{Error: e.ErrorDetail})
}

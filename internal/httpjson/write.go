package httpjson

import (
	"encoding/json"
	"errors"
	"net/http"
)

// WriteJSON sends v with status. Answers are never cached: they describe a
// queue that changes under them.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	writeHeader(w, status)
	// An error here is the client going away mid-answer; nobody is left to
	// tell, and the access log has the status.
	_ = json.NewEncoder(w).Encode(v)
}

// WriteJSONBytes is WriteJSON for a body already encoded, as
// json.Encoder would (newline included): for a hot route that encodes its
// answer without reflection.
func WriteJSONBytes(w http.ResponseWriter, status int, body []byte) {
	writeHeader(w, status)
	_, _ = w.Write(body)
}

// writeHeader sends status with the headers of every JSON answer. The
// values share one allocation: Header.Set would make one per header.
func writeHeader(w http.ResponseWriter, status int) {
	h := w.Header()
	v := []string{"application/json; charset=utf-8", "nosniff", "no-store"}
	h["Content-Type"] = v[0:1:1]
	h["X-Content-Type-Options"] = v[1:2:2]
	h["Cache-Control"] = v[2:3:3]
	w.WriteHeader(status)
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

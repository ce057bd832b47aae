package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/sirupsen/logrus"
)

// writeJSON sends v with status. Answers are never cached: they describe a
// queue that changes under them.
func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	// An error here is the client going away mid-answer; nobody is left to
	// tell, and the access log has the status.
	_ = json.NewEncoder(w).Encode(v)
}

// writeError sends e in the error envelope, with the headers its status
// calls for.
func writeError(w http.ResponseWriter, e *apiError) {
	if e.status == http.StatusServiceUnavailable {
		// Backends usually come back within seconds; tell well-behaved
		// clients when to try again instead of letting them spin.
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.status, ErrorResponse{Error: e.ErrorDetail})
}

// fail answers err and logs it at a level that matches whose fault it is:
// the caller's mistakes at debug (they are the caller's to see), an
// unavailable backend at warn, anything else at error.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := classify(err)
	log := a.log.WithFields(logrus.Fields{
		"method": r.Method,
		"path":   r.URL.Path,
		"status": e.status,
		"code":   e.Code,
	})
	if e.cause != nil {
		log = log.WithError(e.cause)
	}
	switch {
	case errors.Is(r.Context().Err(), context.Canceled):
		// The client hung up; what we answer goes nowhere.
		log.Debug("httpapi: request cancelled by the client")
	case e.status >= 500 && e.status != http.StatusServiceUnavailable:
		log.Error("httpapi: request failed")
	case e.status >= 500:
		log.Warn("httpapi: backend unavailable")
	default:
		log.Debug("httpapi: request refused")
	}
	writeError(w, e)
}

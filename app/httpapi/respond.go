package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/httpjson"
)

// writeJSON sends v with status (httpjson.WriteJSON: never cached).
func writeJSON(w http.ResponseWriter, status int, v any) { httpjson.WriteJSON(w, status, v) }

// writeError sends e in the error envelope, after discarding what is left of
// r's body (httpjson.WriteError).
func writeError(w http.ResponseWriter, r *http.Request, e *apiError) { httpjson.WriteError(w, r, e) }

// fail answers err and logs it at a level that matches whose fault it is:
// the caller's mistakes at debug (they are the caller's to see), an
// unavailable backend at warn, anything else at error.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := classify(err)
	log := a.log.WithFields(logrus.Fields{
		"method": r.Method,
		"path":   r.URL.Path,
		"status": e.Status,
		"code":   e.Code,
	})
	if e.Cause != nil {
		log = log.WithError(e.Cause)
	}
	switch {
	case errors.Is(r.Context().Err(), context.Canceled):
		// The client hung up; what we answer goes nowhere.
		log.Debug("httpapi: request cancelled by the client")
	case e.Status >= 500 && e.Status != http.StatusServiceUnavailable:
		log.Error("httpapi: request failed")
	case e.Status >= 500:
		log.Warn("httpapi: backend unavailable")
	default:
		log.Debug("httpapi: request refused")
	}
	writeError(w, r, e)
}

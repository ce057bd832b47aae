package httpapi

import (
	"net/http"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/httpjson"
)

// RecoveryFailure answers a recovery run that failed: the usual error, and
// the report of how far the run got when the recoverer returned one.
type RecoveryFailure struct {
	Error  ErrorDetail `json:"error"`
	Report any         `json:"report,omitempty"`
}

// RecoveryReports answers GET /v1/recovery/reports.
type RecoveryReports struct {
	Reports any `json:"reports"`
}

// notConfigured is the answer of the recovery routes in a process that runs
// no recoverer: 503, since another process (or a later config) may run it.
func notConfigured() error {
	return newError(http.StatusServiceUnavailable, CodeNotConfigured, "", "this process runs no recoverer")
}

// runRecovery handles POST /v1/recovery/run?dry_run=true|false (default
// false): one recovery pass now, answered with its report. A dry run
// changes nothing and is allowed in read-only mode. The pass runs under the
// request's context: a client that gives up stops it between jobs, which is
// safe since each job's check-and-re-enqueue is one atomic step.
func (a *api) runRecovery(w http.ResponseWriter, r *http.Request) error {
	dryRun, err := httpjson.QueryBool(r, "dry_run", false)
	if err != nil {
		return err
	}
	if a.rec == nil {
		return notConfigured()
	}
	if !dryRun {
		if err := a.refuseReadOnly("a recovery run (a dry run is allowed)"); err != nil {
			return err
		}
	}
	report, err := a.rec.Run(r.Context(), dryRun)
	if err != nil {
		err = &backendError{backend: "recovery", err: err}
		if report == nil {
			return err
		}
		e := classify(err)
		a.log.WithFields(logrus.Fields{"dry_run": dryRun, "status": e.Status}).WithError(err).Warn("httpapi: recovery run on request failed")
		if e.Status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		writeJSON(w, e.Status, RecoveryFailure{Error: e.ErrorDetail, Report: report})
		return nil
	}
	a.log.WithFields(logrus.Fields{"dry_run": dryRun, "remote": r.RemoteAddr}).Info("httpapi: recovery run on request")
	writeJSON(w, http.StatusOK, report)
	return nil
}

// recoveryReports handles GET /v1/recovery/reports.
func (a *api) recoveryReports(w http.ResponseWriter, r *http.Request) error {
	if a.rec == nil {
		return notConfigured()
	}
	writeJSON(w, http.StatusOK, RecoveryReports{Reports: a.rec.Reports()})
	return nil
}

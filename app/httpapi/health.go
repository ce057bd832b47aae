package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
)

// readyTimeout bounds one readiness check: a probe that hangs is worse than
// one that says no.
const readyTimeout = 2 * time.Second

// Health answers the probes.
type Health struct {
	Status string `json:"status"` // "ok" (healthz) or "ready" (readyz)
}

// healthz handles GET /healthz: the process is up and serving HTTP. It
// checks no backend on purpose: a liveness probe that failed when Redis did
// would make the orchestrator restart every process at once for nothing.
func (a *api) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, Health{Status: "ok"})
}

// readyz handles GET /readyz: 200 when the backends answer, else 503 with
// the check's error, which names the backend that failed.
func (a *api) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := a.ready(ctx); err != nil {
		a.log.WithError(err).Warn("httpapi: not ready")
		writeError(w, r, newError(http.StatusServiceUnavailable, CodeNotReady, "", err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, Health{Status: "ready"})
}

// pingBackends is the readiness check when Deps.Ready is nil: Redis answers
// PING and the SQL pool answers a ping. Its error names the backends that
// failed and nothing else (the probe is unauthenticated; the details,
// addresses included, go to the log).
func (a *api) pingBackends(ctx context.Context) error {
	var failed []string
	if err := a.q.Ping(ctx); err != nil {
		a.log.WithError(err).Warn("httpapi: readiness: Redis does not answer")
		failed = append(failed, "redis")
	}
	if err := a.sh.Ping(ctx); err != nil {
		a.log.WithError(err).Warn("httpapi: readiness: SQL does not answer")
		failed = append(failed, "sql")
	}
	if len(failed) > 0 {
		return errors.New("unavailable: " + strings.Join(failed, ", "))
	}
	return nil
}

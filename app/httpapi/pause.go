package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"

	"github.com/delayq/delayq/queue"
)

// PauseResponse answers POST /v1/topics/{topic}/pause and /resume: the
// topic's state now, when and by whom it was last set (SQL's clock, Unix
// ms), and whether this call changed it (false: it was in that state
// already, and the who and when are the earlier call's).
type PauseResponse struct {
	Topic     string `json:"topic"`
	Paused    bool   `json:"paused"`
	ChangedAt int64  `json:"changed_at"`
	ChangedBy string `json:"changed_by"`
	Changed   bool   `json:"changed"`
}

// NewPauseResponse renders the state a Pause or Resume returned.
func NewPauseResponse(topic string, st queue.PauseState) PauseResponse {
	return PauseResponse{Topic: topic, Paused: st.Paused, ChangedAt: st.At, ChangedBy: st.By, Changed: st.Changed}
}

// pauseTopic handles POST /v1/topics/{topic}/pause.
func (a *api) pauseTopic(w http.ResponseWriter, r *http.Request) error {
	return a.setPaused(w, r, true)
}

// resumeTopic handles POST /v1/topics/{topic}/resume.
func (a *api) resumeTopic(w http.ResponseWriter, r *http.Request) error {
	return a.setPaused(w, r, false)
}

// setPaused pauses or resumes a topic: SQL first (the operator's intent,
// which survives a Redis data loss), then Redis (docs/design.md §4.13).
// Every call that reached SQL is logged at info as the audit line: topic,
// action, actor, remote address, time.
func (a *api) setPaused(w http.ResponseWriter, r *http.Request, paused bool) error {
	topic := r.PathValue("topic")
	if err := queue.ValidateTopic(topic); err != nil {
		return err
	}
	action, what := "resume", "resuming a topic"
	if paused {
		action, what = "pause", "pausing a topic"
	}
	if err := a.refuseReadOnly(what); err != nil {
		return err
	}
	st, err := a.q.SetPaused(r.Context(), a.l, a.log.WithField("remote", r.RemoteAddr), topic, actor(r), paused)
	switch {
	case err != nil && !errors.Is(err, queue.ErrNotApplied):
		return fromRedis(err) // SQL failed: nothing was written
	case err != nil:
		return &apiError{Status: http.StatusServiceUnavailable, ErrorDetail: ErrorDetail{Code: CodeBackendUnavailable,
			Message: "redis is unavailable: the " + action + " is saved in SQL and is applied to Redis when it answers; retry to confirm"}, Cause: err}
	}
	writeJSON(w, http.StatusOK, NewPauseResponse(topic, st))
	return nil
}

// actorKey is the context key of the authenticated caller's name.
type actorKey struct{}

// withTokenActor notes on an authenticated request who made it: "token:"
// and the first 8 hex digits of the SHA-256 of its bearer token (the token
// itself is never logged). authenticate calls it after the token checked.
func withTokenActor(r *http.Request) *http.Request {
	_, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	sum := sha256.Sum256([]byte(strings.TrimLeft(token, " ")))
	return r.WithContext(context.WithValue(r.Context(), actorKey{}, "token:"+hex.EncodeToString(sum[:4])))
}

// actor names who made a request, for audit lines: its token's
// fingerprint, or "anonymous" when auth is off. The remote address is
// logged next to it.
func actor(r *http.Request) string {
	if a, ok := r.Context().Value(actorKey{}).(string); ok {
		return a
	}
	return "anonymous"
}

// WithPause adds a topic's pause state, as Redis has it (the one workers
// obey), to its stats.
func WithPause(v TopicStats, p queue.PauseState) TopicStats {
	v.Paused = p.Paused
	if p.Paused {
		v.PausedAt, v.PausedBy = p.At, p.By
	}
	return v
}

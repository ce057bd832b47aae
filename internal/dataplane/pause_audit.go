package dataplane

import (
	"context"
	"errors"
	"time"

	"github.com/sirupsen/logrus"
)

// SetPaused pauses (or resumes) topic as who, and logs the audit line of
// every call that reached SQL on log (which carries the caller's own
// fields, the remote address of a request): topic, action, actor, time,
// changed. The API, the CLI on the backends directly and Engine.Pause and
// Resume all call it, so that every pause is audited alike. An
// error wrapping ErrNotApplied means the state is saved in SQL and
// not in Redis yet; any other error means nothing changed.
func (q *Client) SetPaused(ctx context.Context, store PauseStore, log logrus.FieldLogger, topic, who string, paused bool) (PauseState, error) {
	action, set := "resume", q.Resume
	if paused {
		action, set = "pause", q.Pause
	}
	st, err := set(ctx, store, topic, who)
	if err != nil && !errors.Is(err, ErrNotApplied) {
		return st, err
	}
	l := log.WithFields(logrus.Fields{"topic": topic, "action": action, "actor": who,
		"at": time.UnixMilli(st.At).UTC().Format(time.RFC3339Nano), "changed": st.Changed})
	if err != nil {
		l.WithError(err).Warn("audit: topic " + action + " saved in SQL, not applied to Redis yet")
		return st, err
	}
	l.Info("audit: topic " + action)
	return st, nil
}

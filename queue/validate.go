package queue

import (
	"fmt"
	"time"
)

// validName reports whether s is 1..max characters of [A-Za-z0-9_.-], plus
// [:@/] when ids is set. Braces are never allowed: they would break the
// {topic} hash tag.
func validName(s string, max int, ids bool) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-':
		case ids && (c == ':' || c == '@' || c == '/'):
		default:
			return false
		}
	}
	return true
}

// ValidateTopic checks a topic name: ^[A-Za-z0-9_.-]{1,64}$.
func ValidateTopic(topic string) error {
	if !validName(topic, 64, false) {
		return &ValidationError{Field: "topic", Kind: ErrInvalidTopic,
			Reason: fmt.Sprintf("%q: want 1-64 characters of [A-Za-z0-9_.-]", truncate(topic))}
	}
	return nil
}

// ValidateID checks a job id: ^[A-Za-z0-9_.:@/-]{1,200}$.
func ValidateID(id string) error {
	if !validName(id, 200, true) {
		return &ValidationError{Field: "id", Kind: ErrInvalidID,
			Reason: fmt.Sprintf("%q: want 1-200 characters of [A-Za-z0-9_.:@/-]", truncate(id))}
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// validate checks a new job and fills in its defaults. now is the local
// clock, used only for the coarse one-year bound; whether a job is due is
// decided by Redis's clock.
func (c *Client) validate(j *NewJob, now time.Time) error {
	if err := ValidateID(j.ID); err != nil {
		return err
	}
	if len(j.Payload) > c.cfg.MaxPayloadBytes {
		return &ValidationError{Field: "payload", Kind: ErrPayloadTooLarge,
			Reason: fmt.Sprintf("%d bytes: limit is %d", len(j.Payload), c.cfg.MaxPayloadBytes)}
	}
	if j.RunAt != 0 && j.Delay != 0 {
		return &ValidationError{Field: "run_at", Kind: ErrInvalidRunAt,
			Reason: "give either a delay or a due time, not both"}
	}
	if j.Delay < 0 || j.Delay > c.cfg.MaxDelay {
		return &ValidationError{Field: "delay", Kind: ErrInvalidRunAt,
			Reason: fmt.Sprintf("%s: want 0 to %s", j.Delay, c.cfg.MaxDelay)}
	}
	if j.RunAt != 0 {
		latest := now.Add(c.cfg.MaxDelay).UnixMilli()
		if j.RunAt < earliestRunAt || j.RunAt > latest {
			return &ValidationError{Field: "run_at", Kind: ErrInvalidRunAt,
				Reason: fmt.Sprintf("%d: want Unix milliseconds from %d (2001-01-01) to %d (now + %s)",
					j.RunAt, int64(earliestRunAt), latest, c.cfg.MaxDelay)}
		}
	}
	if j.MaxAttempts == 0 {
		j.MaxAttempts = c.cfg.DefaultMaxAttempts
	}
	if j.MaxAttempts < 1 || j.MaxAttempts > maxAttemptsLimit {
		return &ValidationError{Field: "max_attempts", Kind: ErrInvalidMaxAttempts,
			Reason: fmt.Sprintf("%d: want 1-%d", j.MaxAttempts, maxAttemptsLimit)}
	}
	return nil
}

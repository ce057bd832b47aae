package queue

import (
	"fmt"
)

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

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

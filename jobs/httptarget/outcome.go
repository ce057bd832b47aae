package httptarget

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// StatusError is an answer with a status that is not a success: what the
// job's error (and its dead letter) says about it.
type StatusError struct {
	Target     string        // the URL without its query
	Status     int           // the HTTP status
	Body       string        // the start of the body, sanitised
	Location   string        // a redirect's Location, sanitised
	RetryAfter time.Duration // the Retry-After honoured, capped; 0 if none
}

func (e *StatusError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: HTTP %d", e.Target, e.Status)
	if text := http.StatusText(e.Status); text != "" {
		b.WriteString(" " + text)
	}
	if e.Location != "" {
		fmt.Fprintf(&b, " to %s (redirects are not followed: fix the target URL)", e.Location)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	if e.Body != "" {
		b.WriteString(": " + e.Body)
	}
	return b.String()
}

// retryAfter reads a Retry-After value, delay-seconds or an HTTP-date
// (RFC 9110 §10.2.3), as a delay from now; a date past gives 0.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		// Beyond any cap anyway; keeps the multiplication from wrapping.
		return time.Duration(min(n, 1<<32)) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// sanitize makes b fit for an error message: valid UTF-8, control
// characters as spaces, trimmed.
func sanitize(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}

// failureReason is what a Failure says of err: for an answer its status
// (and the Retry-After honoured), not its body or Location, which the
// receiver wrote and may carry anything; else the error, which names the
// target without its query.
func failureReason(err error) string {
	var serr *StatusError
	if !errors.As(err, &serr) {
		return err.Error()
	}
	short := StatusError{Target: serr.Target, Status: serr.Status, RetryAfter: serr.RetryAfter}
	return strings.TrimPrefix(short.Error(), serr.Target+": ")
}

package httpapi

import (
	"net/http"
	"runtime/debug"
	"time"

	"github.com/sirupsen/logrus"
)

// recoverPanics turns a panicking handler (a module's, most likely) into a
// logged 500 with the JSON error shape, instead of net/http's bare dropped
// connection. http.ErrAbortHandler is let through: it is how a handler asks
// for exactly that drop.
func (a *api) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler {
				panic(p)
			}
			a.log.WithFields(logrus.Fields{
				"method": r.Method,
				"path":   r.URL.Path,
				"panic":  p,
				"stack":  string(debug.Stack()),
			}).Error("httpapi: handler panicked")
			// If the handler already sent its header this adds nothing the
			// client can parse, but net/http ignores the second WriteHeader.
			writeError(w, r, newError(http.StatusInternalServerError, CodeInternal, "", "internal error; the server log has the details"))
		}()
		next.ServeHTTP(w, r)
	})
}

// accessLog logs every request at debug level (one line per request at
// info would drown the logs of a busy queue): method, path, the route that
// matched, status and duration. Headers are never logged: one of them is the
// token.
func (a *api) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.debug() {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		a.log.WithFields(logrus.Fields{
			"method":      r.Method,
			"path":        r.URL.Path,
			"route":       r.Pattern,
			"status":      sw.status,
			"duration_ms": time.Since(start).Milliseconds(),
			"remote":      r.RemoteAddr,
		}).Debug("httpapi: request")
	})
}

// statusWriter remembers the status a handler sent, for the access log.
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (s *statusWriter) WriteHeader(status int) {
	if !s.wroteHeader {
		s.status, s.wroteHeader = status, true
	}
	s.ResponseWriter.WriteHeader(status)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	s.wroteHeader = true
	return s.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's flusher and
// deadlines through the wrapper.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// debug reports whether the logger logs at debug level, so that a hot
// path builds its fields only for a log line that is written: logrus
// builds the entry (a map and its values) before it looks at the level. A
// logger of another kind is assumed to log everything.
func (a *api) debug() bool {
	switch l := a.log.(type) {
	case *logrus.Logger:
		return l.IsLevelEnabled(logrus.DebugLevel)
	case *logrus.Entry:
		return l.Logger.IsLevelEnabled(logrus.DebugLevel)
	}
	return true
}

package httpapi

import (
	"net/http"
	"time"
)

// The defaults of ServerConfig.
const (
	// DefaultAddr listens on loopback only: exposing the API is a decision
	// an operator makes (with a token), not something a default does.
	DefaultAddr = "127.0.0.1:8080"
	// DefaultReadHeaderTimeout bounds how long a client may take to send
	// its headers: the slowloris guard.
	DefaultReadHeaderTimeout = 5 * time.Second
	// DefaultReadTimeout bounds reading a whole request, body included (a
	// 2 MiB body needs well under a second on any working link).
	DefaultReadTimeout = 15 * time.Second
	// DefaultWriteTimeout bounds a request from the end of its headers to
	// the end of the answer. It is longer than the read timeout because a
	// recovery run answers only when the pass is done.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultIdleTimeout is how long a keep-alive connection may wait for
	// its next request.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultMaxConcurrent caps the requests in flight. Each one holds at
	// most one Redis or SQL connection at a time, so this keeps a burst of
	// clients from queueing behind the backends' pools until everything
	// times out; beyond it the answer is an immediate 503 overloaded.
	DefaultMaxConcurrent = 1024
	// maxHeaderBytes bounds request headers: the API needs a token and a
	// path, not net/http's default megabyte.
	maxHeaderBytes = 64 << 10
)

// ServerConfig configures the HTTP server. A zero field means its default
// (the Default* constants); a negative duration or MaxConcurrent means no
// limit.
type ServerConfig struct {
	Addr              string
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	// MaxConcurrent caps requests in flight; the ones beyond get 503
	// overloaded at once. /healthz is never capped: a liveness probe that
	// failed under load would get a busy process restarted.
	MaxConcurrent int
}

// WithDefaults returns c with its zero fields set to the defaults, so that
// a program can show the configuration it actually runs with.
func (c ServerConfig) WithDefaults() ServerConfig {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&c.ReadTimeout, DefaultReadTimeout)
	def(&c.WriteTimeout, DefaultWriteTimeout)
	def(&c.IdleTimeout, DefaultIdleTimeout)
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	return c
}

// NewServer returns an http.Server for h (usually New's handler) with cfg's
// address, timeouts and concurrency cap. The caller runs ListenAndServe and,
// on SIGTERM, Shutdown.
func NewServer(cfg ServerConfig, h http.Handler) *http.Server {
	cfg = cfg.WithDefaults()
	if cfg.MaxConcurrent > 0 {
		h = &limiter{slots: make(chan struct{}, cfg.MaxConcurrent), next: h}
	}
	// net/http reads a negative timeout as none, like zero; ours maps zero
	// to the default, so negative is how to say none.
	return &http.Server{
		Addr:              cfg.Addr,
		Handler:           h,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

// limiter lets at most cap(slots) requests through at once and answers the
// others 503 right away: shedding load early beats making every request
// slow.
type limiter struct {
	slots chan struct{}
	next  http.Handler
}

func (l *limiter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" {
		l.next.ServeHTTP(w, r)
		return
	}
	select {
	case l.slots <- struct{}{}:
		defer func() { <-l.slots }()
		l.next.ServeHTTP(w, r)
	default:
		writeError(w, r, newError(http.StatusServiceUnavailable, CodeOverloaded, "", "too many requests in flight; retry shortly"))
	}
}

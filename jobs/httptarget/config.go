package httptarget

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
)

// Defaults of Config.
const (
	DefaultMethod        = http.MethodPost
	DefaultTimeout       = 10 * time.Second
	DefaultConcurrency   = 10
	DefaultRetryAfterCap = time.Hour
)

// Config is one topic's target. Only the operator's configuration makes
// one: nothing in a job names or changes it.
type Config struct {
	// URL is the endpoint, http or https, without credentials (they would
	// end up in logs and errors: send them as a header).
	URL string
	// Method is POST (the default), PUT or PATCH.
	Method string
	// Headers are extra static headers of every request. Hop-by-hop
	// headers and the ones delayq sets (Delayq-*, Idempotency-Key,
	// Content-Type, Content-Length, Host, User-Agent) are refused.
	Headers map[string]string
	// Timeout bounds one request, from dialling to the end of the answer's
	// body. Default 10s.
	Timeout time.Duration
	// SuccessStatuses are the statuses that complete the job: codes
	// ("204"), ranges ("200-299") or classes ("2xx"). Default 2xx.
	SuccessStatuses []string
	// PermanentStatuses are the statuses that bury the job at once, in the
	// same syntax. Default: 4xx but 408 and 429. A status in both lists is
	// a success.
	PermanentStatuses []string
	// Secret signs every request (Delayq-Signature) when not empty. Never
	// logged.
	Secret []byte
	// TLSCAFile is a PEM file of the CA certificates that sign the
	// target's certificate, instead of the system's roots.
	TLSCAFile string
	// AllowHosts, if not empty, are the only hosts a target may name:
	// "api.example.com", or "*.example.com" for any name under it.
	AllowHosts []string
	// Concurrency sizes the connection pool: the topic's handlers at
	// once. Default 10.
	Concurrency int
	// RetryAfterCap caps the delay a Retry-After asks for (a target must
	// not park a job for a year). Default 1h.
	RetryAfterCap time.Duration
	// Version is delayq's version, for the User-Agent; "" means dev.
	Version string
	// Observer, if set, hears every request's outcome.
	Observer Observer
	// Logger gets a debug line per request (never the payload or the
	// secret). Default: logrus's standard logger.
	Logger logrus.FieldLogger
}

// Observer hears the requests of a target, for metrics.
type Observer interface {
	// TargetRequest is one request of topic: its class (ClassTimeout,
	// ClassError or the status class "2xx", "4xx"...) and how long it took.
	TargetRequest(topic, class string, took time.Duration)
}

// FailureObserver is an Observer that also hears every request that did
// not succeed, for a view of a target's recent failures (the dashboard).
type FailureObserver interface {
	Observer
	TargetFailure(topic string, f Failure)
}

// Failure is a request that did not succeed, as an operator may be shown
// it: the answer's status or why there was none, never the payload, the
// answer's body or the secret.
type Failure struct {
	At      time.Time // when the request ended
	JobID   string
	Attempt int
	Status  int    // the answer's status; 0 when there was none
	Class   string // as TargetRequest's
	// Reason is "HTTP 500 Internal Server Error" (with the Retry-After
	// honoured, if any) for an answer, else why there was none (the
	// timeout, the connection error).
	Reason string
}

// Request classes besides the status classes.
const (
	ClassTimeout = "timeout" // the request's own timeout ran out
	ClassError   = "error"   // no answer: dial, TLS, reset, the job's context ended
)

// ConfigError is an invalid setting of a target. Field is the setting's
// name as the program's configuration spells it (url, method, headers,
// timeout, success_statuses, permanent_statuses, tls_ca_file, allow_hosts).
type ConfigError struct {
	Field  string
	Value  any
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("httptarget: %s = %v: %s", e.Field, e.Value, e.Reason)
}

// Check validates c without reading any file: what New would refuse
// (but an unreadable CA file), so the program's configuration can be
// checked before anything starts. It returns every problem, joined.
func (c Config) Check() error {
	_, err := c.normalize()
	return err
}

// settings are a checked Config with its defaults in.
type settings struct {
	Config
	url       *url.URL
	success   statusSet
	permanent statusSet
	headers   http.Header
}

// reservedHeaders are the headers delayq sets itself or that belong to
// the connection, not to the request (RFC 9110 §7.6.1).
var reservedHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
	"Host", "Content-Length", "Content-Type", "User-Agent", "Idempotency-Key",
}

func (c Config) normalize() (*settings, error) {
	var errs []error
	bad := func(field string, v any, format string, args ...any) {
		errs = append(errs, &ConfigError{Field: field, Value: v, Reason: fmt.Sprintf(format, args...)})
	}
	s := &settings{Config: c}
	if s.Method == "" {
		s.Method = DefaultMethod
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultTimeout
	}
	if s.Concurrency == 0 {
		s.Concurrency = DefaultConcurrency
	}
	if s.RetryAfterCap == 0 {
		s.RetryAfterCap = DefaultRetryAfterCap
	}
	if s.Version == "" {
		s.Version = "dev"
	}
	if s.Logger == nil {
		s.Logger = logrus.StandardLogger()
	}

	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		bad("url", `""`, "a target needs a URL")
	case err != nil:
		bad("url", c.URL, "not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		bad("url", c.URL, "want http:// or https://")
	case u.Hostname() == "":
		bad("url", c.URL, "no host")
	case u.User != nil:
		// The URL is in errors and logs; the credentials would be too.
		bad("url", "(has credentials)", "no credentials in the URL: send them in a header")
	case u.Fragment != "":
		bad("url", c.URL, "a target URL has no fragment")
	default:
		s.url = u
		if err := checkAllowed(u.Hostname(), c.AllowHosts); err != nil {
			bad("url", c.URL, "%v", err)
		}
	}
	for _, h := range c.AllowHosts {
		if !ValidHostPattern(h) {
			bad("allow_hosts", h, `want a host name or "*.domain"`)
		}
	}
	switch s.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		bad("method", c.Method, "want POST, PUT or PATCH")
	}
	if s.Timeout < 0 {
		bad("timeout", c.Timeout, "must be positive (0 means %s)", DefaultTimeout)
	}
	if s.Concurrency < 0 {
		bad("concurrency", c.Concurrency, "must be positive")
	}
	if s.RetryAfterCap < 0 {
		bad("retry_after_cap", c.RetryAfterCap, "must be positive")
	}
	s.headers = make(http.Header, len(c.Headers))
	for name, v := range c.Headers {
		canon := http.CanonicalHeaderKey(name)
		switch {
		case !validHeaderName(name):
			bad("headers", name, "not a header name")
		case slices.Contains(reservedHeaders, canon) || strings.HasPrefix(canon, "Delayq-"):
			bad("headers", name, "set by delayq or hop-by-hop: not configurable")
		case !validHeaderValue(v):
			// The value may be a credential: name the header only.
			bad("headers", name, "value has control characters")
		default:
			s.headers.Set(canon, v)
		}
	}
	if s.success, err = parseStatuses(c.SuccessStatuses); err != nil {
		bad("success_statuses", c.SuccessStatuses, "%v", err)
	} else if s.success == nil {
		s.success = statusSet{{200, 299}}
	}
	if s.permanent, err = parseStatuses(c.PermanentStatuses); err != nil {
		bad("permanent_statuses", c.PermanentStatuses, "%v", err)
	} else if s.permanent == nil {
		s.permanent = statusSet{{400, 407}, {409, 428}, {430, 499}}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// checkAllowed says whether host is in allow (empty: any host).
func checkAllowed(host string, allow []string) error {
	if len(allow) == 0 {
		return nil
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, a := range allow {
		a = strings.ToLower(a)
		if suffix, ok := strings.CutPrefix(a, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) {
				return nil
			}
		} else if host == a {
			return nil
		}
	}
	return fmt.Errorf("host %s is not in the allowed hosts", host)
}

// ValidHostPattern says whether h may be in Config.AllowHosts: a host
// name or address, or "*." and a domain.
func ValidHostPattern(h string) bool {
	h = strings.TrimPrefix(h, "*.")
	if h == "" || len(h) > 253 {
		return false
	}
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-.:[]", r)) {
			return false
		}
	}
	return true
}

// validHeaderName is RFC 9110's token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// statusSet is a set of HTTP statuses as inclusive ranges.
type statusSet [][2]int

func (s statusSet) has(code int) bool {
	for _, r := range s {
		if code >= r[0] && code <= r[1] {
			return true
		}
	}
	return false
}

// parseStatuses reads "204", "200-299" and "2xx" items; none gives nil.
func parseStatuses(items []string) (statusSet, error) {
	var out statusSet
	for _, it := range items {
		it = strings.TrimSpace(it)
		var lo, hi int
		var err error
		switch {
		case len(it) == 3 && strings.HasSuffix(strings.ToLower(it), "xx"):
			lo, err = strconv.Atoi(it[:1])
			lo *= 100
			hi = lo + 99
		case strings.Contains(it, "-"):
			a, b, _ := strings.Cut(it, "-")
			if lo, err = strconv.Atoi(a); err == nil {
				hi, err = strconv.Atoi(b)
			}
		default:
			lo, err = strconv.Atoi(it)
			hi = lo
		}
		if err != nil || lo < 100 || hi > 599 || lo > hi {
			return nil, fmt.Errorf("%q: want a status (204), a range (200-299) or a class (2xx), within 100-599", it)
		}
		out = append(out, [2]int{lo, hi})
	}
	return out, nil
}

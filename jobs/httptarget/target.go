package httptarget

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/delayq/delayq/queue"
	"github.com/sirupsen/logrus"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The headers of every request.
const (
	HeaderTopic          = "Delayq-Topic"
	HeaderJobID          = "Delayq-Job-Id"
	HeaderAttempt        = "Delayq-Attempt"
	HeaderDelivery       = "Delayq-Delivery" // queue.Job.Delivery: calls, not claims
	HeaderMaxAttempts    = "Delayq-Max-Attempts"
	HeaderDueAt          = "Delayq-Due-At" // Unix ms
	HeaderTimestamp      = "Delayq-Timestamp"
	HeaderSignature      = "Delayq-Signature"
	HeaderIdempotencyKey = "Idempotency-Key"
)

// errorBodyBytes is how much of a failed answer's body goes into the
// job's error.
const errorBodyBytes = 512

// drainBytes is how much of an answer's body is read to keep its
// connection for the next request; a longer body costs the connection.
const drainBytes = 64 << 10

// Target delivers jobs to one HTTP endpoint. It is a queue.Handler, safe
// for concurrent use by the topic's handlers.
type Target struct {
	s      *settings
	client *http.Client
	url    string // the URL, as every request names it
	target string // scheme://host/path, for errors and logs (no query)
	// macs are HMAC-SHA256 states keyed with the secret, reused: keying
	// one costs two SHA-256 blocks and a few allocations per request.
	macs sync.Pool
}

var _ queue.Handler = (*Target)(nil)

// New checks cfg and builds its target with a connection pool of its own.
// Errors are *ConfigError (joined), or the CA file's.
func New(cfg Config) (*Target, error) {
	s, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.TLSCAFile != "" {
		pem, err := os.ReadFile(s.TLSCAFile)
		if err != nil {
			return nil, &ConfigError{Field: "tls_ca_file", Value: s.TLSCAFile, Reason: err.Error()}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &ConfigError{Field: "tls_ca_file", Value: s.TLSCAFile, Reason: "no PEM certificate in it"}
		}
		tlsConf.RootCAs = pool
	}
	dialer := &net.Dialer{Timeout: s.Timeout, KeepAlive: 30 * time.Second}
	// One pool per target, as big as the topic's handlers: each handler
	// keeps its connection between jobs, and no more are opened.
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		TLSClientConfig:       tlsConf,
		ForceAttemptHTTP2:     true, // a custom TLS config turns it off otherwise
		MaxIdleConns:          s.Concurrency,
		MaxIdleConnsPerHost:   s.Concurrency,
		MaxConnsPerHost:       s.Concurrency,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   s.Timeout,
		ExpectContinueTimeout: time.Second,
	}
	t := &Target{s: s}
	t.client = &http.Client{
		Transport: tr,
		// A redirect is answered, not followed: the target is the
		// operator's URL and no other (handle buries the job).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	t.url = s.url.String()
	t.macs.New = func() any { return hmac.New(sha256.New, s.Secret) }
	u := *s.url
	u.RawQuery, u.ForceQuery = "", false
	t.target = u.String()
	return t, nil
}

// Close closes the idle connections of the target's pool.
func (t *Target) Close() { t.client.CloseIdleConnections() }

// URL is the target's URL without its query, as errors and logs show it.
func (t *Target) URL() string { return t.target }

// Method is the request's method (POST unless configured).
func (t *Target) Method() string { return t.s.Method }

// Handle delivers job: see the package documentation for the request and
// what each answer means.
func (t *Target) Handle(ctx context.Context, job *queue.Job) error {
	start := time.Now()
	status, class, err := t.deliver(ctx, job)
	took := time.Since(start)
	if t.s.Observer != nil {
		t.s.Observer.TargetRequest(job.Topic, class, took)
		if fo, ok := t.s.Observer.(FailureObserver); ok && err != nil {
			fo.TargetFailure(job.Topic, Failure{At: start.Add(took), JobID: job.ID, Attempt: job.Attempt,
				Status: status, Class: class, Reason: failureReason(err)})
		}
	}
	if t.debug() {
		t.s.Logger.WithFields(map[string]any{
			"topic": job.Topic, "job_id": job.ID, "attempt": job.Attempt,
			"target": t.target, "status": status, "class": class, "took": took,
		}).Debug("target called")
	}
	return err
}

// debug reports whether the logger logs at debug level, so that Handle
// builds the line's fields only when it is written: logrus builds the
// entry (a map and its values) before it looks at the level. A logger of
// another kind is assumed to log everything.
func (t *Target) debug() bool {
	switch l := t.s.Logger.(type) {
	case *logrus.Logger:
		return l.IsLevelEnabled(logrus.DebugLevel)
	case *logrus.Entry:
		return l.Logger.IsLevelEnabled(logrus.DebugLevel)
	}
	return true
}

// keepResult records a success's body as the job's result (its history
// row's) when it is JSON of at most queue.MaxResultBytes: a receiver can
// answer what it did ({"refund_id": ...}). Any other body is no result.
func (t *Target) keepResult(ctx context.Context, body io.Reader) {
	b, err := io.ReadAll(io.LimitReader(body, queue.MaxResultBytes+1))
	if err != nil || len(b) > queue.MaxResultBytes || !json.Valid(b) {
		return
	}
	// Outside a worker (Handle called directly) there is nowhere to keep it.
	_ = queue.RecordResult(ctx, json.RawMessage(b))
}

// deliver sends one request and turns its answer into the handler's
// result.
func (t *Target) deliver(ctx context.Context, job *queue.Job) (status int, class string, _ error) {
	rctx, cancel := context.WithTimeoutCause(ctx, t.s.Timeout, errTimeout)
	defer cancel()
	req, err := t.request(rctx, job)
	if err != nil {
		return 0, ClassError, queue.SkipRetry(err)
	}
	resp, err := t.client.Do(req)
	if err != nil {
		class, err := t.failure(rctx, ctx, err)
		return 0, class, err
	}
	defer resp.Body.Close()
	status = resp.StatusCode
	class = strconv.Itoa(status/100) + "xx"
	if t.s.success.has(status) {
		t.keepResult(ctx, resp.Body)
		_, _ = io.CopyN(io.Discard, resp.Body, drainBytes)
		return status, class, nil
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, errorBodyBytes))
	if err != nil && rctx.Err() != nil {
		// The answer started but did not finish in time.
		return status, ClassTimeout, fmt.Errorf("%s: %d %s, body cut by the timeout (%s)", t.target, status, http.StatusText(status), t.s.Timeout)
	}
	_, _ = io.CopyN(io.Discard, resp.Body, drainBytes)
	serr := &StatusError{Target: t.target, Status: status, Body: sanitize(head)}
	switch {
	case t.s.permanent.has(status):
		return status, class, queue.SkipRetry(serr)
	case status >= 300 && status < 400:
		serr.Location = sanitize([]byte(resp.Header.Get("Location")))
		return status, class, queue.SkipRetry(serr)
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		if d, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			serr.RetryAfter = min(d, t.s.RetryAfterCap)
			return status, class, queue.RetryAfter(serr, serr.RetryAfter)
		}
	}
	return status, class, serr
}

// errTimeout is the cause of a request's own timeout, told apart from the
// job's context ending (lease, shutdown).
var errTimeout = errors.New("target timeout")

// failure classifies a request that got no answer.
func (t *Target) failure(rctx, jobCtx context.Context, err error) (string, error) {
	if jobCtx.Err() == nil && errors.Is(context.Cause(rctx), errTimeout) {
		return ClassTimeout, fmt.Errorf("%s: no answer within %s: %w", t.target, t.s.Timeout, context.DeadlineExceeded)
	}
	// *url.Error repeats the full URL, query included: keep the cause.
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	return ClassError, fmt.Errorf("%s: %w", t.target, err)
}

// request builds job's request; its context is ctx.
func (t *Target) request(ctx context.Context, job *queue.Job) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, t.s.Method, t.url, bytes.NewReader(job.Payload))
	if err != nil {
		return nil, fmt.Errorf("%s: building the request: %w", t.target, err)
	}
	h := req.Header
	for name, v := range t.s.headers {
		h[name] = v
	}
	h.Set("User-Agent", "delayq/"+t.s.Version)
	if json.Valid(job.Payload) {
		h.Set("Content-Type", "application/json")
	} else {
		h.Set("Content-Type", "application/octet-stream")
	}
	h.Set(HeaderTopic, job.Topic)
	h.Set(HeaderJobID, job.ID)
	h.Set(HeaderAttempt, strconv.Itoa(job.Attempt))
	h.Set(HeaderDelivery, strconv.Itoa(max(job.Delivery, 1))) // a Job built by hand has none: its call is the first
	h.Set(HeaderMaxAttempts, strconv.Itoa(job.MaxAttempts))
	h.Set(HeaderDueAt, strconv.FormatInt(job.RunAt, 10))
	h.Set(HeaderIdempotencyKey, job.Topic+":"+job.ID)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	h.Set(HeaderTimestamp, ts)
	if len(t.s.Secret) > 0 {
		h.Set(HeaderSignature, t.sign(ts, job.Payload))
	}
	// The run's span (a worker with tracing on): the receiver's spans join
	// the job's trace. Nothing without one.
	if trace.SpanContextFromContext(ctx).IsValid() {
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
	}
	return req, nil
}

// sign is Sign with the target's secret, on a pooled HMAC state.
func (t *Target) sign(timestamp string, body []byte) string {
	m := t.macs.Get().(hash.Hash)
	defer t.macs.Put(m)
	m.Reset()
	return signWith(m, timestamp, body)
}

// Sign is the Delayq-Signature value of a request sent at timestamp (the
// Delayq-Timestamp value) with body: "v1=" and the lowercase hex of
// HMAC-SHA256(secret, timestamp + "." + body).
func Sign(secret []byte, timestamp string, body []byte) string {
	return signWith(hmac.New(sha256.New, secret), timestamp, body)
}

// signWith signs with m, an HMAC-SHA256 keyed with the secret and reset.
func signWith(m hash.Hash, timestamp string, body []byte) string {
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	var sum [sha256.Size]byte
	return "v1=" + hex.EncodeToString(m.Sum(sum[:0]))
}

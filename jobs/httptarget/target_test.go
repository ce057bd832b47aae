package httptarget_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/jobs/httptarget"
	"github.com/delayq/delayq/queue"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

// seen is one request a receiver got.
type seen struct {
	method string
	proto  int
	header http.Header
	body   []byte
	at     time.Time
}

// receiver is an httptest server that records requests and answers with
// answer.
type receiver struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
}

func newReceiver(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *receiver {
	t.Helper()
	rc := &receiver{}
	rc.Server = httptest.NewServer(rc.handler(answer))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) handler(answer func(w http.ResponseWriter, r *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, seen{method: r.Method, proto: r.ProtoMajor, header: r.Header.Clone(), body: body, at: time.Now()})
		rc.mu.Unlock()
		answer(w, r)
	}
}

func (rc *receiver) requests() []seen {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]seen(nil), rc.reqs...)
}

func status(code int, body string, header ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

// observed records the observer's calls.
type observed struct {
	mu      sync.Mutex
	classes []string
}

func (o *observed) TargetRequest(topic, class string, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.classes = append(o.classes, topic+"/"+class)
}

func (o *observed) count() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]int{}
	for _, c := range o.classes {
		out[c]++
	}
	return out
}

func (o *observed) last() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.classes) == 0 {
		return ""
	}
	return o.classes[len(o.classes)-1]
}

func newTarget(t *testing.T, cfg httptarget.Config) *httptarget.Target {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testenv.QuietLogger()
	}
	tg, err := httptarget.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(tg.Close)
	return tg
}

func job(payload string) *queue.Job {
	return &queue.Job{Topic: "hooks", ID: "j-1", Payload: []byte(payload), Attempt: 2, Delivery: 1, MaxAttempts: 5, RunAt: 1767225600123}
}

// hmacHex is the signature computed without the package's Sign.
func hmacHex(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "." + string(body)))
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

func TestRequestHeadersAndSignature(t *testing.T) {
	rc := newReceiver(t, status(200, "ok"))
	tg := newTarget(t, httptarget.Config{URL: rc.URL + "/hook?k=v", Secret: []byte("s3cret"), Version: "1.2.3",
		Headers: map[string]string{"x-team": "payments"}})
	payload := `{"order":"A-1","cents":100}`
	before := time.Now().Unix()
	for range 2 {
		if err := tg.Handle(testenv.Context(t), job(payload)); err != nil {
			t.Fatalf("Handle: %v", err)
		}
	}
	after := time.Now().Unix()
	reqs := rc.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	for _, r := range reqs {
		if r.method != "POST" || string(r.body) != payload {
			t.Errorf("request %s %q, want POST with the payload as is", r.method, r.body)
		}
		want := map[string]string{
			"Content-Type":        "application/json",
			"User-Agent":          "delayq/1.2.3",
			"Delayq-Topic":        "hooks",
			"Delayq-Job-Id":       "j-1",
			"Delayq-Attempt":      "2",
			"Delayq-Delivery":     "1",
			"Delayq-Max-Attempts": "5",
			"Delayq-Due-At":       "1767225600123",
			"Idempotency-Key":     "hooks:j-1",
			"X-Team":              "payments",
		}
		for k, v := range want {
			if got := r.header.Get(k); got != v {
				t.Errorf("%s = %q, want %q", k, got, v)
			}
		}
		ts := r.header.Get("Delayq-Timestamp")
		n, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || n < before || n > after {
			t.Errorf("Delayq-Timestamp = %q, want Unix seconds in [%d, %d]", ts, before, after)
		}
		if got, want := r.header.Get("Delayq-Signature"), hmacHex("s3cret", ts, r.body); got != want {
			t.Errorf("Delayq-Signature = %q, want %q", got, want)
		}
		if got := httptarget.Sign([]byte("s3cret"), ts, r.body); got != r.header.Get("Delayq-Signature") {
			t.Errorf("Sign = %q, differs from the header", got)
		}
	}
}

func TestRequestBinaryPayloadUnsignedPut(t *testing.T) {
	rc := newReceiver(t, status(204, ""))
	tg := newTarget(t, httptarget.Config{URL: rc.URL, Method: "PUT"})
	payload := "\x00\xffnot json"
	if err := tg.Handle(testenv.Context(t), job(payload)); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	r := rc.requests()[0]
	if r.method != "PUT" || string(r.body) != payload {
		t.Errorf("request %s %q, want PUT with the bytes as is", r.method, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/octet-stream" {
		t.Errorf("Content-Type = %q", ct)
	}
	if sig := r.header.Get("Delayq-Signature"); sig != "" {
		t.Errorf("Delayq-Signature = %q without a secret", sig)
	}
}

// kind is what a handler result means to the worker.
type kind string

const (
	done      kind = "done"
	permanent kind = "permanent"
	backoff   kind = "backoff"
	retryAt   kind = "retry-after"
)

func kindOf(err error) kind {
	var se *httptarget.StatusError
	switch {
	case err == nil:
		return done
	case errors.Is(err, queue.ErrSkipRetry):
		return permanent
	case errors.As(err, &se) && se.RetryAfter > 0:
		return retryAt
	}
	return backoff
}

func TestOutcomes(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	cases := []struct {
		name      string
		answer    func(http.ResponseWriter, *http.Request)
		cfg       httptarget.Config
		want      kind
		class     string
		retry     time.Duration // want about this Retry-After
		errSubstr string
	}{
		{name: "200", answer: status(200, "ok"), want: done, class: "2xx"},
		{name: "202", answer: status(202, ""), want: done, class: "2xx"},
		{name: "400 permanent with body", answer: status(400, `{"error":"bad order"}`), want: permanent, class: "4xx",
			errSubstr: `HTTP 400 Bad Request: {"error":"bad order"}`},
		{name: "404 permanent", answer: status(404, "no route"), want: permanent, class: "4xx", errSubstr: "HTTP 404"},
		{name: "408 retried", answer: status(408, ""), want: backoff, class: "4xx", errSubstr: "HTTP 408"},
		{name: "429 Retry-After seconds", answer: status(429, "slow down", "Retry-After", "7"), want: retryAt, class: "4xx", retry: 7 * time.Second},
		{name: "503 Retry-After date", answer: status(503, "", "Retry-After", date), want: retryAt, class: "5xx", retry: 90 * time.Second},
		{name: "503 Retry-After capped", answer: status(503, "", "Retry-After", "86400"), want: retryAt, class: "5xx",
			cfg: httptarget.Config{RetryAfterCap: time.Minute}, retry: time.Minute},
		{name: "503 without Retry-After", answer: status(503, "down"), want: backoff, class: "5xx", errSubstr: "HTTP 503 Service Unavailable: down"},
		{name: "429 bad Retry-After", answer: status(429, "", "Retry-After", "soon"), want: backoff, class: "4xx"},
		{name: "500", answer: status(500, "boom"), want: backoff, class: "5xx", errSubstr: "HTTP 500"},
		{name: "502 Retry-After ignored", answer: status(502, "", "Retry-After", "5"), want: backoff, class: "5xx"},
		{name: "302 redirect permanent", answer: status(302, "", "Location", "http://elsewhere.example/x"), want: permanent, class: "3xx",
			errSubstr: "to http://elsewhere.example/x (redirects are not followed"},
		{name: "success statuses configured", answer: status(200, ""), want: backoff, class: "2xx",
			cfg: httptarget.Config{SuccessStatuses: []string{"202", "204"}}},
		{name: "permanent statuses configured: 500", answer: status(500, ""), want: permanent, class: "5xx",
			cfg: httptarget.Config{PermanentStatuses: []string{"500-501", "410"}}},
		{name: "permanent statuses configured: 400 retried", answer: status(400, ""), want: backoff, class: "4xx",
			cfg: httptarget.Config{PermanentStatuses: []string{"5xx"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rc := newReceiver(t, c.answer)
			obs := &observed{}
			cfg := c.cfg
			cfg.URL, cfg.Observer = rc.URL+"/hook?token=hidden", obs
			tg := newTarget(t, cfg)
			err := tg.Handle(testenv.Context(t), job(`{}`))
			if got := kindOf(err); got != c.want {
				t.Fatalf("Handle = %v (%s), want %s", err, got, c.want)
			}
			if got := obs.last(); got != "hooks/"+c.class {
				t.Errorf("observed %q, want hooks/%s", got, c.class)
			}
			if err == nil {
				return
			}
			if c.errSubstr != "" && !strings.Contains(err.Error(), c.errSubstr) {
				t.Errorf("error %q does not say %q", err, c.errSubstr)
			}
			if strings.Contains(err.Error(), "hidden") {
				t.Errorf("error %q shows the URL's query", err)
			}
			var se *httptarget.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("error %v is no *StatusError", err)
			}
			if c.retry != 0 && (se.RetryAfter > c.retry || se.RetryAfter < c.retry-5*time.Second) {
				t.Errorf("RetryAfter = %s, want about %s", se.RetryAfter, c.retry)
			}
		})
	}
}

func TestErrorBodySanitised(t *testing.T) {
	body := "bad\x1b[31m\r\ninput\xff" + strings.Repeat("x", 1000)
	rc := newReceiver(t, status(422, body))
	tg := newTarget(t, httptarget.Config{URL: rc.URL})
	err := tg.Handle(testenv.Context(t), job(`{}`))
	var se *httptarget.StatusError
	if !errors.As(err, &se) || !errors.Is(err, queue.ErrSkipRetry) {
		t.Fatalf("Handle = %v, want a permanent *StatusError", err)
	}
	if !strings.HasPrefix(se.Body, "bad [31m  input\uFFFDxxx") {
		t.Errorf("Body = %q", se.Body)
	}
	if n := strings.Count(se.Body, "x"); n != 512-len("bad\x1b[31m\r\ninput\xff") {
		t.Errorf("Body has %d x, want the first 512 bytes only", n)
	}
	for _, r := range se.Body {
		if r < ' ' || r == 0x7f {
			t.Fatalf("Body %q has a control character", se.Body)
		}
	}
}

func TestHangingReceiverCutByTimeout(t *testing.T) {
	release := make(chan struct{})
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) }) // before rc.Close, which waits for handlers
	obs := &observed{}
	const timeout = 300 * time.Millisecond
	tg := newTarget(t, httptarget.Config{URL: rc.URL, Timeout: timeout, Observer: obs})
	start := time.Now()
	err := tg.Handle(testenv.Context(t), job(`{}`))
	took := time.Since(start)
	if kindOf(err) != backoff || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Handle = %v, want a retryable timeout", err)
	}
	if !strings.Contains(err.Error(), "no answer within 300ms") {
		t.Errorf("error %q does not say the timeout", err)
	}
	if took > timeout+5*time.Second {
		t.Errorf("Handle returned after %s, timeout %s", took, timeout)
	}
	if got := obs.last(); got != "hooks/timeout" {
		t.Errorf("observed %q, want hooks/timeout", got)
	}
}

func TestJobContextEndedIsNoTimeout(t *testing.T) {
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) })
	obs := &observed{}
	tg := newTarget(t, httptarget.Config{URL: rc.URL, Observer: obs})
	ctx, cancel := context.WithCancel(testenv.Context(t))
	go func() {
		testenv.Receive(testenv.Context(t), t, entered, "the request")
		cancel()
	}()
	err := tg.Handle(ctx, job(`{}`))
	if err == nil || kindOf(err) != backoff || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Handle = %v, want a retryable error that is no timeout", err)
	}
	if got := obs.last(); got != "hooks/error" {
		t.Errorf("observed %q, want hooks/error", got)
	}
}

func TestConnectionRefusedRetried(t *testing.T) {
	rc := newReceiver(t, status(200, ""))
	url := rc.URL
	rc.Close()
	obs := &observed{}
	tg := newTarget(t, httptarget.Config{URL: url + "/?secret=q", Observer: obs})
	err := tg.Handle(testenv.Context(t), job(`{}`))
	if err == nil || kindOf(err) != backoff {
		t.Fatalf("Handle = %v, want a retryable error", err)
	}
	if strings.Contains(err.Error(), "secret=q") {
		t.Errorf("error %q shows the URL's query", err)
	}
	if got := obs.last(); got != "hooks/error" {
		t.Errorf("observed %q, want hooks/error", got)
	}
}

// caFile writes the certificate of a TLS httptest server as a PEM file.
func caFile(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ca.pem")
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTLSWithCAAndHTTP2(t *testing.T) {
	rc := &receiver{}
	rc.Server = httptest.NewUnstartedServer(rc.handler(status(200, "")))
	rc.EnableHTTP2 = true
	rc.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake below
	rc.StartTLS()
	t.Cleanup(rc.Close)

	tg := newTarget(t, httptarget.Config{URL: rc.URL, TLSCAFile: caFile(t, rc.Server)})
	if err := tg.Handle(testenv.Context(t), job(`{}`)); err != nil {
		t.Fatalf("Handle over TLS with the CA: %v", err)
	}
	if got := rc.requests()[0].proto; got != 2 {
		t.Errorf("request over HTTP/%d, want HTTP/2", got)
	}

	// Without the CA the certificate is not trusted: retried (the operator
	// may fix the CA), never sent.
	plain := newTarget(t, httptarget.Config{URL: rc.URL})
	err := plain.Handle(testenv.Context(t), job(`{}`))
	if err == nil || kindOf(err) != backoff || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Handle without the CA = %v, want a retryable certificate error", err)
	}
	if n := len(rc.requests()); n != 1 {
		t.Errorf("%d requests reached the server, want 1", n)
	}
}

func TestConfigRefused(t *testing.T) {
	cases := []struct {
		cfg   httptarget.Config
		field string
	}{
		{httptarget.Config{}, "url"},
		{httptarget.Config{URL: "ftp://example.com/x"}, "url"},
		{httptarget.Config{URL: "http:///nohost"}, "url"},
		{httptarget.Config{URL: "https://user:pw@example.com/"}, "url"},
		{httptarget.Config{URL: "http://127.0.0.1:9/", AllowHosts: []string{"api.example.com", "*.example.org"}}, "url"},
		{httptarget.Config{URL: "http://example.com/", AllowHosts: []string{"http://example.com"}}, "allow_hosts"},
		{httptarget.Config{URL: "http://example.com/", Method: "GET"}, "method"},
		{httptarget.Config{URL: "http://example.com/", Method: "DELETE"}, "method"},
		{httptarget.Config{URL: "http://example.com/", Timeout: -time.Second}, "timeout"},
		{httptarget.Config{URL: "http://example.com/", Headers: map[string]string{"Connection": "close"}}, "headers"},
		{httptarget.Config{URL: "http://example.com/", Headers: map[string]string{"delayq-topic": "x"}}, "headers"},
		{httptarget.Config{URL: "http://example.com/", Headers: map[string]string{"Idempotency-Key": "x"}}, "headers"},
		{httptarget.Config{URL: "http://example.com/", Headers: map[string]string{"Transfer-Encoding": "chunked"}}, "headers"},
		{httptarget.Config{URL: "http://example.com/", Headers: map[string]string{"Bad Name": "x"}}, "headers"},
		{httptarget.Config{URL: "http://example.com/", Headers: map[string]string{"X-Key": "a\r\nInjected: 1"}}, "headers"},
		{httptarget.Config{URL: "http://example.com/", SuccessStatuses: []string{"2xx", "abc"}}, "success_statuses"},
		{httptarget.Config{URL: "http://example.com/", PermanentStatuses: []string{"499-400"}}, "permanent_statuses"},
		{httptarget.Config{URL: "http://example.com/", PermanentStatuses: []string{"700"}}, "permanent_statuses"},
		{httptarget.Config{URL: "http://example.com/", TLSCAFile: filepath.Join(t.TempDir(), "missing.pem")}, "tls_ca_file"},
	}
	for _, c := range cases {
		_, err := httptarget.New(c.cfg)
		if !slices.Contains(fieldsOf(err), c.field) {
			t.Errorf("New(%+v) = %v, want a ConfigError of %s", c.cfg, err, c.field)
		}
	}
	// A credential in a header value is never in the error.
	_, err := httptarget.New(httptarget.Config{URL: "http://example.com/", Headers: map[string]string{"X-Key": "tok3n\n"}})
	if err == nil || strings.Contains(err.Error(), "tok3n") {
		t.Errorf("error %v shows the header's value", err)
	}
}

// fieldsOf lists the fields of the ConfigErrors in err.
func fieldsOf(err error) []string {
	var ce *httptarget.ConfigError
	if errors.As(err, &ce) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			var out []string
			for _, e := range j.Unwrap() {
				out = append(out, fieldsOf(e)...)
			}
			return out
		}
		return []string{ce.Field}
	}
	return nil
}

func TestAllowHostsAccepted(t *testing.T) {
	for _, u := range []string{"https://api.example.com/x", "https://API.Example.com:8443/x", "https://a.b.example.org/"} {
		if err := (httptarget.Config{URL: u, AllowHosts: []string{"api.example.com", "*.example.org"}}).Check(); err != nil {
			t.Errorf("Check(%s) = %v", u, err)
		}
	}
	if err := (httptarget.Config{URL: "https://example.org/", AllowHosts: []string{"*.example.org"}}).Check(); err == nil {
		t.Error("*.example.org allowed example.org itself")
	}
}

// failures is an observer that records the failures too.
type failures struct {
	observed
	got []httptarget.Failure
}

func (f *failures) TargetFailure(_ string, fl httptarget.Failure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, fl)
}

// A FailureObserver hears each request that did not succeed with its
// status and a reason that holds neither the answer's body, nor a
// redirect's Location, nor the URL's query; a success is not a failure.
func TestFailureObserver(t *testing.T) {
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Delayq-Job-Id") {
		case "ok":
			w.WriteHeader(http.StatusOK)
		case "moved":
			w.Header().Set("Location", "http://elsewhere.example/?key=leak")
			w.WriteHeader(http.StatusFound)
		default:
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, "echo of the payload: card 4242")
		}
	})
	obs := &failures{}
	tg := newTarget(t, httptarget.Config{URL: rc.URL + "/hook?token=hidden", Observer: obs})
	ctx := testenv.Context(t)
	for _, id := range []string{"ok", "boom", "moved"} {
		j := job(`{"card":"4242"}`)
		j.ID = id
		_ = tg.Handle(ctx, j)
	}
	dead := newTarget(t, httptarget.Config{URL: "http://127.0.0.1:1/x?token=hidden", Observer: obs})
	_ = dead.Handle(ctx, job(`{}`))
	if len(obs.got) != 3 {
		t.Fatalf("failures %+v, want boom, moved and the refused connection", obs.got)
	}
	want := []struct {
		id, class, reason string
		status            int
	}{
		{"boom", "5xx", "HTTP 500 Internal Server Error", 500},
		{"moved", "3xx", "HTTP 302 Found", 302},
		{"", "error", "connect", 0},
	}
	for i, w := range want {
		f := obs.got[i]
		if (w.id != "" && f.JobID != w.id) || f.Class != w.class || f.Status != w.status || !strings.Contains(f.Reason, w.reason) ||
			f.At.IsZero() || f.Attempt != 2 {
			t.Errorf("failure %d: %+v, want job %s, class %s, status %d, a reason with %q", i, f, w.id, w.class, w.status, w.reason)
		}
		for _, leak := range []string{"4242", "leak", "hidden", "elsewhere"} {
			if strings.Contains(f.Reason, leak) {
				t.Errorf("failure %d: reason %q shows %q", i, f.Reason, leak)
			}
		}
	}
}

// TestDebugLine checks the per-request debug line: written, with its
// fields, when the logger logs at debug level; not at info.
func TestDebugLine(t *testing.T) {
	rc := newReceiver(t, status(204, ""))
	for _, level := range []logrus.Level{logrus.DebugLevel, logrus.InfoLevel} {
		logger, hook := logtest.NewNullLogger()
		logger.SetLevel(level)
		tg := newTarget(t, httptarget.Config{URL: rc.URL + "/?token=x", Logger: logrus.NewEntry(logger)})
		if err := tg.Handle(testenv.Context(t), job("{}")); err != nil {
			t.Fatalf("Handle: %v", err)
		}
		entries := hook.AllEntries()
		if level != logrus.DebugLevel {
			if len(entries) != 0 {
				t.Errorf("at %s: %d lines, want none", level, len(entries))
			}
			continue
		}
		if len(entries) != 1 || entries[0].Message != "target called" {
			t.Fatalf("at debug: %d lines, want one \"target called\"", len(entries))
		}
		f := entries[0].Data
		if f["topic"] != "hooks" || f["job_id"] != "j-1" || f["status"] != 204 || f["class"] != "2xx" || f["target"] != rc.URL+"/" {
			t.Errorf("fields = %v", f)
		}
	}
}

package httpapi_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/app/httpapi"
)

// The bad-input rules of the package doc, one case each, on the routes they
// were found on; nothing is written.
func TestBadInputRules(t *testing.T) {
	cases := []struct {
		name   string
		rq     req
		status int
		code   string
		field  string
	}{
		{"null purges nothing", req{method: "POST", path: "/v1/topics/t/dead/purge", body: `null`}, 400, httpapi.CodeMalformedJSON, ""},
		{"null enqueue", req{method: "POST", path: "/v1/topics/t/jobs", body: ` null `}, 400, httpapi.CodeMalformedJSON, ""},
		{"null requeue", req{method: "POST", path: "/v1/topics/t/dead/requeue", body: `null`}, 400, httpapi.CodeMalformedJSON, ""},
		{"a string body", req{method: "POST", path: "/v1/topics/t/dead/purge", body: `"x"`}, 400, httpapi.CodeMalformedJSON, ""},
		{"null job in a batch", req{method: "POST", path: "/v1/topics/t/jobs:batch", body: `null`}, 400, httpapi.CodeMalformedJSON, ""},
		{"empty dry_run", req{method: "POST", path: "/v1/recovery/run?dry_run="}, 400, httpapi.CodeInvalidValue, "dry_run"},
		{"dry_run 1", req{method: "POST", path: "/v1/recovery/run?dry_run=1"}, 400, httpapi.CodeInvalidValue, "dry_run"},
		{"dry_run twice", req{method: "POST", path: "/v1/recovery/run?dry_run=true&dry_run=false"}, 400, httpapi.CodeInvalidValue, "dry_run"},
		{"dry_run misspelt", req{method: "POST", path: "/v1/recovery/run?dryrun=true"}, 400, httpapi.CodeUnknownField, "dryrun"},
		{"unknown parameter", req{method: "GET", path: "/v1/topics/t/jobs?sate=dead"}, 400, httpapi.CodeUnknownField, "sate"},
		{"parameter on a route without any", req{method: "GET", path: "/v1/topics?x=1"}, 400, httpapi.CodeUnknownField, "x"},
		{"empty state", req{method: "GET", path: "/v1/topics/t/jobs?state="}, 400, httpapi.CodeInvalidValue, "state"},
		{"control character in a parameter", req{method: "GET", path: "/v1/ledger/inflight?topic=a%00b"}, 400, httpapi.CodeInvalidValue, "topic"},
		{"DELETE without an id", req{method: "DELETE", path: "/v1/topics/t/jobs"}, 405, httpapi.CodeMethodNotAllowed, ""},
		{"body on a GET", req{method: "GET", path: "/v1/topics/t", body: `{}`}, 400, httpapi.CodeUnexpectedBody, ""},
		{"chunked body on a DELETE", req{method: "DELETE", path: "/v1/topics/t/jobs/a", body: `{}`, chunked: true}, 400, httpapi.CodeUnexpectedBody, ""},
		{"body on a recovery run", req{method: "POST", path: "/v1/recovery/run", body: `{"dry_run":false}`}, 400, httpapi.CodeUnexpectedBody, ""},
		{"NUL in an id", req{method: "POST", path: "/v1/topics/t/jobs", body: `{"id":"a\u0000b"}`}, 400, httpapi.CodeInvalidValue, "id"},
		{"escape in an id", req{method: "POST", path: "/v1/topics/t/dead/requeue", body: `{"id":"a\u001b[2J"}`}, 400, httpapi.CodeInvalidValue, "id"},
		{"C1 control in an id", req{method: "POST", path: "/v1/topics/t/jobs", body: `{"id":"a\u009bb"}`}, 400, httpapi.CodeInvalidValue, "id"},
		{"invalid UTF-8 in an id", req{method: "POST", path: "/v1/topics/t/jobs", body: "{\"id\":\"a\xffb\"}"}, 400, httpapi.CodeInvalidValue, "id"},
		{"delay -2^63", req{method: "POST", path: "/v1/topics/t/jobs", body: `{"id":"a","delay_ms":-9223372036854775808}`}, 400, httpapi.CodeInvalidRunAt, "delay_ms"},
		{"delay wrapping to an hour", req{method: "POST", path: "/v1/topics/t/jobs", body: `{"id":"a","delay_ms":-288230376148111744}`}, 400, httpapi.CodeInvalidRunAt, "delay_ms"},
		{"run_at -2^63", req{method: "POST", path: "/v1/topics/t/jobs", body: `{"id":"a","run_at":-9223372036854775808}`}, 400, httpapi.CodeInvalidRunAt, "run_at"},
		{"purge before -2^63", req{method: "POST", path: "/v1/topics/t/dead/purge", body: `{"before":-9223372036854775808}`}, 400, httpapi.CodeInvalidValue, "before"},
		{"unclean path", req{method: "DELETE", path: "/v1/topics/t/jobs/a//b"}, 404, httpapi.CodeNotFound, ""},
	}
	e := newEnv(t, embedded)
	// A dead job that a wrong purge would delete.
	expect(t, e.post(t, "/v1/topics/t/jobs", `{"id":"dead:1"}`), http.StatusAccepted)
	if n := e.bury(t, "t", "boom"); n != 1 {
		t.Fatalf("buried %d", n)
	}
	before := e.keys(t)
	for _, c := range cases {
		r := e.sendNoRedirect(t, c.rq)
		t.Run(c.name, func(t *testing.T) { expectError(t, r, c.status, c.code, c.field) })
	}
	if after := e.keys(t); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Fatalf("keys before %v, after %v", before, after)
	}
	d := decode[httpapi.TopicStats](t, e.get(t, "/v1/topics/t"))
	if d.Dead != 1 || d.Due != 0 {
		t.Fatalf("after the refused requests: %+v; want the dead job alone", d)
	}
}

// sendNoRedirect is send, without following redirects: a redirect is an
// answer under test.
func (e *env) sendNoRedirect(t testing.TB, rq req) resp {
	t.Helper()
	cl := e.srv.Client()
	saved := cl.CheckRedirect
	cl.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	defer func() { cl.CheckRedirect = saved }()
	return e.send(t, rq)
}

// Every path of the API answers a method it does not take with 405, its
// methods in Allow, and never with a redirect.
func TestWrongMethods(t *testing.T) {
	e := newEnv(t, embedded)
	paths := map[string]string{ // path: Allow
		"/v1/topics/t/jobs":         "GET, HEAD, POST",
		"/v1/topics/t/jobs:batch":   "POST",
		"/v1/topics/t/jobs/a":       "DELETE, GET, HEAD, PATCH",
		"/v1/topics":                "GET, HEAD",
		"/v1/topics/t":              "GET, HEAD",
		"/v1/topics/t/dead":         "GET, HEAD",
		"/v1/topics/t/dead/requeue": "POST",
		"/v1/topics/t/dead/purge":   "POST",
		"/v1/ledger/inflight":       "GET, HEAD",
		"/v1/ledger/stale":          "GET, HEAD",
		"/v1/recovery/run":          "POST",
		"/v1/recovery/reports":      "GET, HEAD",
		"/v1/schedules":             "GET, HEAD",
	}
	for path, allow := range paths {
		for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
			if strings.Contains(allow, m) {
				continue
			}
			r := e.sendNoRedirect(t, req{method: m, path: path})
			if r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != allow {
				t.Errorf("%s %s: %d Allow %q %s; want 405 Allow %q", m, path, r.status, r.header.Get("Allow"), r.body, allow)
				continue
			}
			expectError(t, r, http.StatusMethodNotAllowed, httpapi.CodeMethodNotAllowed, "")
		}
	}
	for _, path := range []string{"/v1", "/v1/topics/t/jobs/a/../b", "/v1/topics//t"} {
		r := e.sendRaw(t, "GET", path, "")
		if r.status/100 == 3 {
			t.Errorf("GET %s: %d, a redirect", path, r.status)
		}
	}
}

// A client that writes its whole oversized body before reading the answer
// gets the 413, every time: the server reads what it refuses (up to
// httpjson.DiscardLimit) before it answers and closes, so the kernel has no
// unread data to answer with a reset. The same holds for a body on a route
// that takes none.
func TestOversizedBodyAlwaysAnswered(t *testing.T) {
	const maxBody = 64 << 10
	e := newEnv(t, embedded, func(s *setup) {
		s.qcfg.MaxPayloadBytes = 1024
		s.deps.MaxBodyBytes = maxBody
	})
	addr := strings.TrimPrefix(e.srv.URL, "http://")
	big := `{"id":"a","payload":"` + strings.Repeat("p", 4<<20) + `"}` // over what the socket buffers hold
	for _, c := range []struct {
		name, method, path, headers string
		status                      int
		code                        string
	}{
		{"announced", "POST", "/v1/topics/t/jobs", fmt.Sprintf("Content-Length: %d\r\n", len(big)), 413, httpapi.CodeBodyTooLarge},
		{"chunked", "POST", "/v1/topics/t/jobs", "Transfer-Encoding: chunked\r\n", 413, httpapi.CodeBodyTooLarge},
		{"bodyless route", "POST", "/v1/recovery/run", fmt.Sprintf("Content-Length: %d\r\n", len(big)), 400, httpapi.CodeUnexpectedBody},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i := 0; i < 50; i++ {
				conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
				body := big
				if strings.Contains(c.headers, "chunked") {
					body = fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(big), big)
				}
				msg := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%s\r\n%s", c.method, c.path, c.headers, body)
				if _, err := io.WriteString(conn, msg); err != nil {
					t.Fatalf("attempt %d: writing the request: %v", i, err)
				}
				res, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					t.Fatalf("attempt %d: reading the answer: %v", i, err)
				}
				b, err := io.ReadAll(res.Body)
				res.Body.Close()
				conn.Close()
				var er httpapi.ErrorResponse
				if err != nil || res.StatusCode != c.status || json.Unmarshal(b, &er) != nil || er.Error.Code != c.code {
					t.Fatalf("attempt %d: %d %s (%v); want %d %s", i, res.StatusCode, b, err, c.status, c.code)
				}
			}
		})
	}
	if ks := e.keys(t); len(ks) != 0 {
		t.Fatalf("wrote %v", ks)
	}
}

// With Expect: 100-continue, an announced oversized body is refused before
// the client sends it: the 413 comes instead of the 100 Continue.
func TestOversizedBodyRefusedBeforeContinue(t *testing.T) {
	e := newEnv(t, embedded, func(s *setup) {
		s.qcfg.MaxPayloadBytes = 1024
		s.deps.MaxBodyBytes = 4096
	})
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(e.srv.URL, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "POST /v1/topics/t/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\nExpect: 100-continue\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413 before the body", res.StatusCode)
	}
}

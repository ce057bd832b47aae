package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/httpjson"
	"github.com/delayq/delayq/internal/testenv"
)

// ordersModule stands in for a module such as the orders one.
func ordersModule() []httpapi.Module {
	return []httpapi.Module{
		{Pattern: "/v1/orders/", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"order":%q}`, strings.TrimPrefix(r.URL.Path, "/v1/orders/"))
		})},
		{Pattern: "POST /v1/boom", Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			panic("module bug")
		})},
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	const token = "tok-0123456789abcdef"
	e := newEnv(t, embedded, withToken(token), func(s *setup) { s.deps.Modules = ordersModule() })
	none, wrong, lower := ptr(""), ptr("Bearer nope"), ptr("bearer "+token)

	cases := []struct {
		name   string
		rq     req
		status int
	}{
		{"api without token", req{method: "GET", path: "/v1/topics", auth: none}, 401},
		{"api with wrong token", req{method: "GET", path: "/v1/topics", auth: wrong}, 401},
		{"api with token", req{method: "GET", path: "/v1/topics"}, 200},
		{"scheme in lower case", req{method: "GET", path: "/v1/topics", auth: lower}, 200},
		{"module without token", req{method: "GET", path: "/v1/orders/42", auth: none}, 401},
		{"module with wrong token", req{method: "GET", path: "/v1/orders/42", auth: wrong}, 401},
		{"module with token", req{method: "GET", path: "/v1/orders/42"}, 200},
		{"unknown route without token", req{method: "GET", path: "/v1/nope", auth: none}, 401},
		{"unknown route with token", req{method: "GET", path: "/v1/nope"}, 404},
		{"healthz needs no token", req{method: "GET", path: "/healthz", auth: none}, 200},
		{"readyz needs no token", req{method: "GET", path: "/readyz", auth: none}, 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.send(t, c.rq)
			expect(t, r, c.status)
			if c.status == http.StatusUnauthorized {
				expectError(t, r, 401, httpapi.CodeUnauthorized, "")
				want := `Bearer realm="delayq"`
				if c.rq.auth != none {
					want += `, error="invalid_token"`
				}
				if got := r.header.Get("WWW-Authenticate"); got != want {
					t.Fatalf("WWW-Authenticate %q, want %q", got, want)
				}
			}
		})
	}
	if r := e.get(t, "/v1/orders/42"); string(r.body) != `{"order":"42"}` {
		t.Fatalf("module answer %s", r.body)
	}
	// A panicking module gets a JSON 500, and the server lives on.
	expectError(t, e.post(t, "/v1/boom", ""), http.StatusInternalServerError, httpapi.CodeInternal, "")
	expect(t, e.get(t, "/v1/topics"), http.StatusOK)
	if !strings.Contains(e.logs.String(), "module bug") {
		t.Fatal("the panic was not logged")
	}
	if strings.Contains(e.logs.String(), token) {
		t.Fatal("the token appears in the log")
	}
}

// Two Authorization headers are refused whatever their order: which one
// counts would differ from one reader (a proxy, a log) to the next.
func TestTwoAuthorizationHeadersAreRefused(t *testing.T) {
	t.Parallel()
	const token = "tok-0123456789abcdef"
	e := newEnv(t, embedded, withToken(token))
	for _, pair := range [][2]string{{"Bearer " + token, "Bearer nope"}, {"Bearer nope", "Bearer " + token}} {
		r, err := http.NewRequestWithContext(testenv.Context(t), http.MethodGet, e.srv.URL+"/v1/topics", nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Add("Authorization", pair[0])
		r.Header.Add("Authorization", pair[1])
		res, err := e.srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"code":"invalid_value"`) ||
			!strings.Contains(string(body), `"field":"Authorization"`) {
			t.Errorf("%q then %q: %d %s", pair[0], pair[1], res.StatusCode, body)
		}
	}
}

// A key given twice in a body is refused, and nothing is written: with
// the last one kept, {"id":"a","id":"b"} would have enqueued b.
func TestDuplicateKeysAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, embedded)
	expectError(t, e.post(t, "/v1/topics/t/jobs", `{"id":"a","id":"b"}`), http.StatusBadRequest, httpjson.CodeMalformedJSON, "id")
	// In a batch, as any other bad job, it is that job's result.
	b := e.post(t, "/v1/topics/t/jobs:batch", `{"jobs":[{"id":"a","delay_ms":1,"delay_ms":2}]}`)
	expect(t, b, http.StatusOK)
	if !strings.Contains(string(b.body), `"invalid":1`) || !strings.Contains(string(b.body), `"field":"delay_ms"`) {
		t.Fatalf("batch with a key given twice: %s", b.body)
	}
	for _, id := range []string{"a", "b"} {
		expect(t, e.get(t, "/v1/topics/t/jobs/"+id), http.StatusNotFound)
	}
	// A JSON payload is the client's data, taken as it is.
	expect(t, e.post(t, "/v1/topics/t/jobs", `{"id":"c","payload":{"k":1,"k":2}}`), http.StatusAccepted)
}

// TestMuxErrorsAreJSON checks that ServeMux's own 404 and 405 come back in
// the API's error shape.
func TestMuxErrorsAreJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t, embedded)
	r := e.del(t, "/v1/topics")
	expectError(t, r, http.StatusMethodNotAllowed, httpapi.CodeMethodNotAllowed, "")
	if allow := r.header.Get("Allow"); !strings.Contains(allow, "GET") {
		t.Fatalf("Allow %q", allow)
	}
	expectError(t, e.send(t, req{method: "PUT", path: "/v1/topics/t/jobs", body: "{}"}), http.StatusMethodNotAllowed, httpapi.CodeMethodNotAllowed, "")
	expectError(t, e.post(t, "/healthz", ""), http.StatusMethodNotAllowed, httpapi.CodeMethodNotAllowed, "")
	expectError(t, e.get(t, "/nope"), http.StatusNotFound, httpapi.CodeNotFound, "")
	expectError(t, e.get(t, "/v1/nope"), http.StatusNotFound, httpapi.CodeNotFound, "")
	expectError(t, e.get(t, "/v1/topics/t/nope"), http.StatusNotFound, httpapi.CodeNotFound, "")
}

func TestNewRefusesBadDeps(t *testing.T) {
	t.Parallel()
	e := newEnv(t, embedded)
	ok := http.NotFoundHandler()
	cases := []struct {
		name string
		deps httpapi.Deps
	}{
		{"no queue", httpapi.Deps{Ledger: e.l}},
		{"no ledger", httpapi.Deps{Queue: e.q}},
		{"negative body limit", httpapi.Deps{Queue: e.q, Ledger: e.l, MaxBodyBytes: -1}},
		{"token with a newline", httpapi.Deps{Queue: e.q, Ledger: e.l, Token: "abcdefghijklmnopq\n"}},
		{"module outside /v1", httpapi.Deps{Queue: e.q, Ledger: e.l, Modules: []httpapi.Module{{Pattern: "/orders/", Handler: ok}}}},
		{"module with a host", httpapi.Deps{Queue: e.q, Ledger: e.l, Modules: []httpapi.Module{{Pattern: "example.com/v1/x", Handler: ok}}}},
		{"module without handler", httpapi.Deps{Queue: e.q, Ledger: e.l, Modules: []httpapi.Module{{Pattern: "/v1/x"}}}},
		{"module clashing with a route", httpapi.Deps{Queue: e.q, Ledger: e.l, Modules: []httpapi.Module{{Pattern: "GET /v1/topics", Handler: ok}}}},
	}
	for _, c := range cases {
		if _, err := httpapi.New(c.deps); err == nil {
			t.Errorf("%s: New succeeded", c.name)
		}
	}
	if _, err := httpapi.New(httpapi.Deps{Queue: e.q, Ledger: e.l, Modules: []httpapi.Module{{Pattern: "GET\t/v1/x/{id}", Handler: ok}}}); err != nil {
		t.Fatalf("a method pattern: %v", err)
	}
}

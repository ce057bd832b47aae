package httpapi_test

import (
	"io"
	"net/http"
	"testing"
)

// /metrics and the dashboard are served outside auth when set, the rest
// of the API still wants the token, and other paths keep their JSON 404.
func TestMetricsAndDashboardRoutes(t *testing.T) {
	t.Parallel()
	plain := func(body string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, body+" "+r.URL.Path)
		})
	}
	e := newEnv(t, embedded, withToken("a-long-enough-token-1234"), func(s *setup) {
		s.deps.Metrics = plain("metrics")
		s.deps.Dashboard = plain("dashboard")
	})
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(e.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for path, want := range map[string]string{
		"/metrics":             "metrics /metrics",
		"/":                    "dashboard /",
		"/dashboard/app.js":    "dashboard /dashboard/app.js",
		"/dashboard/sub/x.css": "dashboard /dashboard/sub/x.css",
	} {
		if code, body := get(path); code != http.StatusOK || body != want {
			t.Errorf("GET %s: %d %q, want 200 %q", path, code, body, want)
		}
	}
	if code, _ := get("/v1/topics"); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/topics without the token: %d, want 401", code)
	}
	if code, body := get("/nope"); code != http.StatusNotFound || body == "dashboard /nope" {
		t.Errorf("GET /nope: %d %q, want the API's 404", code, body)
	}
	resp, err := http.Post(e.srv.URL+"/metrics", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics: %d, want 405", resp.StatusCode)
	}

	bare := newEnv(t, embedded)
	for _, path := range []string{"/metrics", "/"} {
		resp, err := http.Get(bare.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s without the handler set: %d, want 404", path, resp.StatusCode)
		}
	}
}

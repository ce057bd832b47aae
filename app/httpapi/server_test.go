package httpapi_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/app/httpapi"
)

func TestServerDefaults(t *testing.T) {
	t.Parallel()
	s := httpapi.NewServer(httpapi.ServerConfig{}, http.NotFoundHandler())
	if s.Addr != "127.0.0.1:8080" || s.ReadHeaderTimeout != httpapi.DefaultReadHeaderTimeout ||
		s.ReadTimeout != httpapi.DefaultReadTimeout || s.WriteTimeout != httpapi.DefaultWriteTimeout ||
		s.IdleTimeout != httpapi.DefaultIdleTimeout || s.MaxHeaderBytes == 0 {
		t.Fatalf("server %+v", s)
	}
	cfg := httpapi.ServerConfig{Addr: ":9", ReadTimeout: -1, WriteTimeout: time.Second}.WithDefaults()
	if cfg.Addr != ":9" || cfg.ReadTimeout != -1 || cfg.WriteTimeout != time.Second ||
		cfg.IdleTimeout != httpapi.DefaultIdleTimeout || cfg.MaxConcurrent != httpapi.DefaultMaxConcurrent {
		t.Fatalf("config %+v", cfg)
	}
}

// TestServerMaxConcurrent holds one request inside the handler of a server
// capped at one: the next is refused at once with 503, /healthz still
// answers, and once the first is done requests go through again.
func TestServerMaxConcurrent(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			close(entered)
			<-release
		}
		w.WriteHeader(http.StatusNoContent)
	})
	srv := httpapi.NewServer(httpapi.ServerConfig{MaxConcurrent: 1}, h)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	client := &http.Client{Timeout: 30 * time.Second}
	get := func(path string) (int, string) {
		res, err := client.Get(base + path)
		if err != nil {
			t.Errorf("GET %s: %v", path, err)
			return 0, ""
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}

	blocked := make(chan int, 1)
	go func() { code, _ := get("/block"); blocked <- code }()
	<-entered
	if code, body := get("/other"); code != http.StatusServiceUnavailable || !strings.Contains(body, httpapi.CodeOverloaded) {
		t.Fatalf("over the cap: %d %s", code, body)
	}
	if code, _ := get("/healthz"); code != http.StatusNoContent {
		t.Fatalf("healthz over the cap: %d", code)
	}
	close(release)
	if code := <-blocked; code != http.StatusNoContent {
		t.Fatalf("held request: %d", code)
	}
	if code, _ := get("/other"); code != http.StatusNoContent {
		t.Fatalf("after the held request: %d", code)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
}

package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq/app/httpapi"
)

// emptyHTTPRate is the HTTP baseline: the same server settings, the same
// load generator and connections as the http scenario, against a handler
// that reads the body and answers 202 with a short JSON at once. It is the
// most the enqueue route can do on this machine in this minute: its ratio
// to it is what the API's own work (decoding, validation, the Redis call)
// costs.
func emptyHTTPRate(ctx context.Context, conns int, d time.Duration) (float64, error) {
	answer := []byte(`{"id":"j0","run_at":1764600000000}`)
	addr, stopServer, err := serveLoopback(ctx, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write(answer)
	}))
	if err != nil {
		return 0, err
	}
	defer stopServer()

	load, stop := context.WithTimeout(ctx, d)
	defer stop()
	body := []byte(`{"id":"j0","payload":` + payloadJSON + `}`)
	var n atomic.Int64
	var firstErr error
	var once sync.Once
	start := time.Now()
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			c := newRawClient(addr, "/")
			defer c.close()
			for load.Err() == nil {
				code, err := c.post(ctx, body)
				if err == nil && code != http.StatusAccepted {
					err = fmt.Errorf("HTTP %d", code)
				}
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, fmt.Errorf("bench: HTTP baseline: %w", firstErr)
	}
	return perSecond(int(n.Load()), time.Since(start)), nil
}

// serveLoopback serves h with the API's server settings on a free loopback
// port, and returns its address and the function that shuts it down.
func serveLoopback(ctx context.Context, h http.Handler) (addr string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("bench: listen on loopback: %w", err)
	}
	srv := httpapi.NewServer(httpapi.ServerConfig{Addr: ln.Addr().String()}, h)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	return ln.Addr().String(), func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-served
	}, nil
}

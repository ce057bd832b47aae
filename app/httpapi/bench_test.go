package httpapi_test

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// discardWriter is the least a handler can write to: the benchmark
// measures the handler, not a recorder.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(status int)      { w.status = status }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkEnqueue runs POST /v1/topics/{topic}/jobs through the whole
// handler (middleware, routing, decoding, the queue's Redis call, the
// answer) on the shared Redis, without net/http's connection handling. Its
// allocs/op and the CPU profile outside the Redis call are the handler's
// own cost.
func BenchmarkEnqueue(b *testing.B) {
	rdb, ns := testenv.Redis(b)
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns})
	if err != nil {
		b.Fatal(err)
	}
	l, err := ledger.New(testenv.SQLite(b), ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Deps{Queue: q, Ledger: l, Logger: testenv.QuietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	var body []byte
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		body = append(body[:0], `{"id":"j`...)
		body = strconv.AppendInt(body, int64(i), 10)
		body = append(body, `","payload":{"order_no":"202611300001","user":42}}`...)
		r, err := http.NewRequest(http.MethodPost, "/v1/topics/bench/jobs", io.NopCloser(bytes.NewReader(body)))
		if err != nil {
			b.Fatal(err)
		}
		r.ContentLength = int64(len(body))
		r.Header.Set("Content-Type", "application/json")
		w := &discardWriter{h: http.Header{}}
		h.ServeHTTP(w, r)
		if w.status != http.StatusAccepted {
			b.Fatalf("status %d", w.status)
		}
	}
}

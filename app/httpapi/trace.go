package httpapi

import (
	"net/http"

	"go.opentelemetry.io/otel/propagation"
)

// withTraceParent gives each request's context the span its W3C
// traceparent header names (queue.Config.Trace): the jobs a request
// enqueues (POST .../jobs, POST /v1/orders) keep it, and their runs are
// spans of that trace (docs/design.md §4.21). A header that is not a valid
// traceparent is ignored, as the W3C specification asks.
func withTraceParent(next http.Handler) http.Handler {
	tc := propagation.TraceContext{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Traceparent") != "" {
			r = r.WithContext(tc.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		}
		next.ServeHTTP(w, r)
	})
}

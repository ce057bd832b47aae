package httpapi

import "net/http"

// mountObservability registers the metrics and dashboard handlers that are
// set: GET /metrics, and GET / (that path only) with GET /dashboard/...
// Both stay outside auth; every other path outside /v1 keeps its JSON 404.
func mountObservability(root jsonMux, metrics, dashboard http.Handler) {
	if metrics != nil {
		root.Handle("GET /metrics", metrics)
	}
	if dashboard != nil {
		root.Handle("GET /{$}", dashboard)
		root.Handle("GET /dashboard/", dashboard)
	}
}

// Package httpjson is the one JSON dialect of delayq's HTTP API: how every
// /v1 route, the orders module's included, reads a request (a strict JSON
// body, or none; strict query parameters) and how it answers an error
// ({"error": {"code", "message", "field"}}). The rules are decided here, once,
// and documented for clients in app/httpapi's package doc.
//
// It lives under internal so that app/httpapi and the modules it mounts
// (jobs/orderclose, which must not import app/) share it without exporting
// it to users of the library packages.
package httpjson

package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/app/httpapi"
)

// TestBadRequests sends every kind of bad request the API must refuse and
// checks its status, its code, the field it names, and that nothing was
// written to Redis.
func TestBadRequests(t *testing.T) {
	const (
		token      = "s3cret-token-0123456789"
		maxPayload = 1024
		maxBody    = 4096
		maxBatch   = 10
	)
	yearAhead := time.Now().Add(366 * 24 * time.Hour).UnixMilli()
	cases := []struct {
		name   string
		rq     req
		status int
		code   string
		field  string
	}{
		{"malformed JSON", req{body: `{"id":`}, 400, httpapi.CodeMalformedJSON, ""},
		{"not JSON", req{body: `hello`}, 400, httpapi.CodeMalformedJSON, ""},
		{"not an object", req{body: `[{"id":"a"}]`}, 400, httpapi.CodeMalformedJSON, ""},
		{"trailing data", req{body: `{"id":"a"} {"id":"b"}`}, 400, httpapi.CodeMalformedJSON, ""},
		{"trailing garbage", req{body: `{"id":"a"}x`}, 400, httpapi.CodeMalformedJSON, ""},
		{"empty body", req{body: ``, ctype: ptr("application/json")}, 400, httpapi.CodeMalformedJSON, ""},
		{"unknown field", req{body: `{"id":"a","dealy_ms":5}`}, 400, httpapi.CodeUnknownField, "dealy_ms"},
		{"field name in another case", req{body: `{"id":"a","Delay_MS":5000}`}, 400, httpapi.CodeUnknownField, "Delay_MS"},
		{"id in upper case", req{body: `{"ID":"a"}`}, 400, httpapi.CodeUnknownField, "ID"},
		{"batch field in another case", req{path: "/v1/topics/t/jobs:batch", body: `{"Jobs":[{"id":"a"}]}`}, 400, httpapi.CodeUnknownField, "Jobs"},
		{"wrong type", req{body: `{"id":5}`}, 400, httpapi.CodeInvalidValue, "id"},
		{"fractional delay", req{body: `{"id":"a","delay_ms":1.5}`}, 400, httpapi.CodeInvalidValue, "delay_ms"},
		{"bad topic", req{path: "/v1/topics/bad%7Btopic/jobs", body: `{"id":"a"}`}, 400, httpapi.CodeInvalidTopic, "topic"},
		{"topic too long", req{path: "/v1/topics/" + strings.Repeat("t", 65) + "/jobs", body: `{"id":"a"}`}, 400, httpapi.CodeInvalidTopic, "topic"},
		{"bad id", req{body: `{"id":"has space"}`}, 400, httpapi.CodeInvalidID, "id"},
		{"missing id", req{body: `{"payload":1}`}, 400, httpapi.CodeMissingField, "id"},
		{"empty id", req{body: `{"id":""}`}, 400, httpapi.CodeMissingField, "id"},
		{"id too long", req{body: fmt.Sprintf(`{"id":%q}`, strings.Repeat("i", 201))}, 400, httpapi.CodeInvalidID, "id"},
		{"payload over the limit", req{body: fmt.Sprintf(`{"id":"a","payload":%q}`, strings.Repeat("p", maxPayload))}, 400, httpapi.CodePayloadTooLarge, "payload"},
		{"base64 payload over the limit", req{body: fmt.Sprintf(`{"id":"a","payload_base64":%q}`, strings.Repeat("AAAA", maxPayload/3+1))}, 400, httpapi.CodePayloadTooLarge, "payload"},
		{"bad base64", req{body: `{"id":"a","payload_base64":"!!"}`}, 400, httpapi.CodeInvalidPayload, "payload_base64"},
		{"both payloads", req{body: `{"id":"a","payload":{},"payload_base64":"AA=="}`}, 400, httpapi.CodeConflictingFields, "payload_base64"},
		{"negative delay", req{body: `{"id":"a","delay_ms":-1}`}, 400, httpapi.CodeInvalidRunAt, "delay_ms"},
		{"delay a year ahead", req{body: fmt.Sprintf(`{"id":"a","delay_ms":%d}`, int64(366*24*time.Hour/time.Millisecond))}, 400, httpapi.CodeInvalidRunAt, "delay_ms"},
		{"huge delay", req{body: `{"id":"a","delay_ms":9223372036854775807}`}, 400, httpapi.CodeInvalidRunAt, "delay_ms"},
		{"run_at a year ahead", req{body: fmt.Sprintf(`{"id":"a","run_at":%d}`, yearAhead)}, 400, httpapi.CodeInvalidRunAt, "run_at"},
		{"run_at in seconds", req{body: fmt.Sprintf(`{"id":"a","run_at":%d}`, time.Now().Unix())}, 400, httpapi.CodeInvalidRunAt, "run_at"},
		{"run_at zero", req{body: `{"id":"a","run_at":0}`}, 400, httpapi.CodeInvalidRunAt, "run_at"},
		{"delay and run_at", req{body: fmt.Sprintf(`{"id":"a","delay_ms":0,"run_at":%d}`, time.Now().UnixMilli())}, 400, httpapi.CodeConflictingFields, "run_at"},
		{"max_attempts 0", req{body: `{"id":"a","max_attempts":0}`}, 400, httpapi.CodeInvalidMaxAttempts, "max_attempts"},
		{"priority too high", req{body: `{"id":"a","priority":4}`}, 400, httpapi.CodeInvalidPriority, "priority"},
		{"negative priority", req{body: `{"id":"a","priority":-1}`}, 400, httpapi.CodeInvalidPriority, "priority"},
		{"fractional priority", req{body: `{"id":"a","priority":1.5}`}, 400, httpapi.CodeInvalidValue, "priority"},
		{"huge priority", req{body: `{"id":"a","priority":99999999999999999999}`}, 400, httpapi.CodeInvalidValue, "priority"},
		{"bad ordering key", req{body: `{"id":"a","ordering_key":"a|b"}`}, 400, httpapi.CodeInvalidOrderingKey, "ordering_key"},
		{"ordering key not a string", req{body: `{"id":"a","ordering_key":7}`}, 400, httpapi.CodeInvalidValue, "ordering_key"},
		{"ordering and partition keys differ", req{body: `{"id":"a","ordering_key":"k","partition_key":"p"}`}, 400, httpapi.CodeInvalidOrderingKey, "partition_key"},
		{"max_attempts too many", req{body: `{"id":"a","max_attempts":101}`}, 400, httpapi.CodeInvalidMaxAttempts, "max_attempts"},
		{"wrong content type", req{body: `{"id":"a"}`, ctype: ptr("text/plain")}, 415, httpapi.CodeUnsupportedMediaType, ""},
		{"form content type", req{body: `id=a`, ctype: ptr("application/x-www-form-urlencoded")}, 415, httpapi.CodeUnsupportedMediaType, ""},
		{"no content type", req{body: `{"id":"a"}`, ctype: ptr("")}, 415, httpapi.CodeUnsupportedMediaType, ""},
		{"missing token", req{body: `{"id":"a"}`, auth: ptr("")}, 401, httpapi.CodeUnauthorized, ""},
		{"wrong token", req{body: `{"id":"a"}`, auth: ptr("Bearer " + token + "x")}, 401, httpapi.CodeUnauthorized, ""},
		{"token prefix", req{body: `{"id":"a"}`, auth: ptr("Bearer " + token[:len(token)-1])}, 401, httpapi.CodeUnauthorized, ""},
		{"wrong scheme", req{body: `{"id":"a"}`, auth: ptr("Basic " + token)}, 401, httpapi.CodeUnauthorized, ""},
		{"oversized body", req{body: fmt.Sprintf(`{"id":"a","payload":%q}`, strings.Repeat("p", maxBody))}, 413, httpapi.CodeBodyTooLarge, ""},
		{"oversized chunked body", req{body: fmt.Sprintf(`{"id":"a","payload":%q}`, strings.Repeat("p", maxBody)), chunked: true}, 413, httpapi.CodeBodyTooLarge, ""},
		{"oversized trailing data", req{body: `{"id":"a"}` + strings.Repeat(" ", maxBody), chunked: true}, 413, httpapi.CodeBodyTooLarge, ""},
		{"bad id in path", req{method: "GET", path: "/v1/topics/t/jobs/has%20space"}, 400, httpapi.CodeInvalidID, "id"},
		{"cancel bad id", req{method: "DELETE", path: "/v1/topics/t/jobs/"}, 400, httpapi.CodeInvalidID, "id"},
		{"batch over the limit", req{path: "/v1/topics/t/jobs:batch", body: `{"jobs":[` + strings.Repeat(`{"id":"j"},`, maxBatch) + `{"id":"j"}]}`}, 400, httpapi.CodeBatchTooLarge, "jobs"},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, b, withToken(token), func(s *setup) {
				s.qcfg.MaxPayloadBytes = maxPayload
				s.qcfg.MaxBatch = maxBatch
				s.deps.MaxBodyBytes = maxBody
			})
			for _, c := range cases {
				rq := c.rq
				if rq.method == "" {
					rq.method = "POST"
				}
				if rq.path == "" {
					rq.path = "/v1/topics/t/jobs"
				}
				r := e.send(t, rq)
				if r.status != c.status {
					t.Errorf("%s: status %d, want %d; body %s", c.name, r.status, c.status, r.body)
					continue
				}
				t.Run(c.name, func(t *testing.T) {
					expectError(t, r, c.status, c.code, c.field)
					if c.status == http.StatusUnauthorized && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
						t.Errorf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
					}
				})
				if ks := e.keys(t); len(ks) != 0 {
					t.Fatalf("%s: wrote %v", c.name, ks)
				}
			}
			// The same env takes a good request: the refusals were the
			// requests' fault.
			expect(t, e.post(t, "/v1/topics/t/jobs", `{"id":"a","payload":"ok"}`), http.StatusAccepted)
			if strings.Contains(e.logs.String(), token) {
				t.Fatal("the token appears in the log")
			}
		})
	}
}

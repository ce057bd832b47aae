package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/delayq/delayq/app/httpapi"
)

func TestBatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		expect(t, e.post(t, "/v1/topics/t/jobs", `{"id":"old"}`), http.StatusAccepted)
		r := e.post(t, "/v1/topics/t/jobs:batch", `{"jobs":[
			{"id":"a","payload":{"x":1}},
			{"id":"old"},
			{"id":"bad id"},
			{"id":"typo","dealy_ms":5},
			{"id":"case","Delay_Ms":5},
			{"id":"neg","delay_ms":-1},
			{"id":"a"},
			{"id":"b64","payload_base64":"AAE="},
			{"id":"both","payload":1,"payload_base64":"AA=="},
			7
		]}`)
		expect(t, r, http.StatusOK)
		b := decode[httpapi.BatchResponse](t, r)
		type want struct{ id, status, code, field string }
		wants := []want{
			{"a", "created", "", ""},
			{"old", "duplicate", "", ""},
			{"bad id", "invalid", httpapi.CodeInvalidID, "id"},
			{"typo", "invalid", httpapi.CodeUnknownField, "dealy_ms"},
			{"case", "invalid", httpapi.CodeUnknownField, "Delay_Ms"},
			{"neg", "invalid", httpapi.CodeInvalidRunAt, "delay_ms"},
			{"a", "duplicate", "", ""}, // twice in one batch: the second is a duplicate
			{"b64", "created", "", ""},
			{"both", "invalid", httpapi.CodeConflictingFields, "payload_base64"},
			{"", "invalid", httpapi.CodeMalformedJSON, ""},
		}
		if b.Topic != "t" || len(b.Results) != len(wants) || b.Created != 2 || b.Duplicates != 2 || b.Invalid != 6 {
			t.Fatalf("batch %+v", b)
		}
		for i, w := range wants {
			res := b.Results[i]
			code, field := "", ""
			if res.Error != nil {
				code, field = res.Error.Code, res.Error.Field
			}
			if res.Index != i || res.ID != w.id || res.Status != w.status || code != w.code || field != w.field {
				t.Errorf("result %d = %+v (error %+v), want %+v", i, res, res.Error, w)
			}
			if (res.Status == "invalid") != (res.RunAt == 0) {
				t.Errorf("result %d: run_at %d", i, res.RunAt)
			}
		}
		if v := decode[httpapi.JobView](t, e.get(t, "/v1/topics/t/jobs/b64")); v.PayloadBase64 != "AAE=" {
			t.Fatalf("b64 job %+v", v)
		}
		expectError(t, e.get(t, "/v1/topics/t/jobs/neg"), http.StatusNotFound, httpapi.CodeNotFound, "")
	})
}

// TestBatchRefusedWhole covers what refuses a batch as a whole, with nothing
// written.
func TestBatchRefusedWhole(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		over := `{"jobs":[` + strings.Repeat(`{"id":"j"},`, 1000) + `{"id":"j"}]}`
		expectError(t, e.post(t, "/v1/topics/t/jobs:batch", over), http.StatusBadRequest, httpapi.CodeBatchTooLarge, "jobs")
		expectError(t, e.post(t, "/v1/topics/t/jobs:batch", `{}`), http.StatusBadRequest, httpapi.CodeMissingField, "jobs")
		expectError(t, e.post(t, "/v1/topics/t/jobs:batch", `{"jobs":{}}`), http.StatusBadRequest, httpapi.CodeInvalidValue, "jobs")
		expectError(t, e.post(t, "/v1/topics/t/jobs:batch", `{"id":"a"}`), http.StatusBadRequest, httpapi.CodeUnknownField, "id")
		expectError(t, e.post(t, "/v1/topics/b%7Bad/jobs:batch", `{"jobs":[{"id":"a"}]}`), http.StatusBadRequest, httpapi.CodeInvalidTopic, "topic")
		// Every job invalid: an answer per job, and still nothing written.
		r := e.post(t, "/v1/topics/t/jobs:batch", `{"jobs":[{"id":""},{"id":"x","run_at":5}]}`)
		expect(t, r, http.StatusOK)
		if b := decode[httpapi.BatchResponse](t, r); b.Invalid != 2 || b.Created != 0 {
			t.Fatalf("all invalid: %+v", b)
		}
		// An empty batch is a no-op, not an error.
		r = e.post(t, "/v1/topics/t/jobs:batch", `{"jobs":[]}`)
		expect(t, r, http.StatusOK)
		if b := decode[httpapi.BatchResponse](t, r); len(b.Results) != 0 {
			t.Fatalf("empty batch: %+v", b)
		}
		if ks := e.keys(t); len(ks) != 0 {
			t.Fatalf("refused batches wrote %v", ks)
		}
		// Exactly the limit goes in.
		full := `{"jobs":[` + strings.Repeat(`{"id":"j"},`, 999) + `{"id":"j"}]}`
		r = e.post(t, "/v1/topics/t/jobs:batch", full)
		expect(t, r, http.StatusOK)
		if b := decode[httpapi.BatchResponse](t, r); b.Created != 1 || b.Duplicates != 999 {
			t.Fatalf("full batch: created %d, duplicates %d", b.Created, b.Duplicates)
		}
	})
}

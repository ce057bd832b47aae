package httpapi_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/delayq/delayq/app/httpapi"
)

// An enqueue's priority reaches the queue (the job of priority 3 is
// claimed before older ones), every view of the job shows it, and a batch
// refuses a bad one per job, naming the field.
func TestEnqueueWithPriority(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		expect(t, e.post(t, "/v1/topics/p/jobs", `{"id":"low"}`), http.StatusAccepted)
		expect(t, e.post(t, "/v1/topics/p/jobs", `{"id":"urgent","priority":3}`), http.StatusAccepted)
		r := e.post(t, "/v1/topics/p/jobs:batch", `{"jobs":[{"id":"mid","priority":1},{"id":"bad","priority":9}]}`)
		expect(t, r, http.StatusOK)
		b := decode[httpapi.BatchResponse](t, r)
		if b.Created != 1 || b.Invalid != 1 || b.Results[1].Error == nil ||
			b.Results[1].Error.Code != httpapi.CodeInvalidPriority || b.Results[1].Error.Field != "priority" {
			t.Fatalf("batch %+v", b)
		}
		if v := decode[httpapi.JobView](t, e.get(t, "/v1/topics/p/jobs/urgent")); v.Priority != 3 {
			t.Fatalf("urgent shows priority %d", v.Priority)
		}
		page := decode[httpapi.JobPage](t, e.get(t, "/v1/topics/p/jobs?state=waiting"))
		got := map[string]int{}
		for _, v := range page.Jobs {
			got[v.ID] = v.Priority
		}
		if got["urgent"] != 3 || got["mid"] != 1 || got["low"] != 0 || len(got) != 3 {
			t.Fatalf("listing shows priorities %v", got)
		}
		var claimed []string
		for _, j := range e.claimAll(t, "p") {
			claimed = append(claimed, j.ID)
		}
		if !slices.Equal(claimed, []string{"urgent", "mid", "low"}) {
			t.Fatalf("claimed %v, want urgent, mid, low", claimed)
		}
	})
}

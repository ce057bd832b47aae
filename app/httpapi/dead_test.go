package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// enqueueAndBury puts n jobs d0..d(n-1) in topic's dead set through the
// API and the queue.
func enqueueAndBury(t *testing.T, e *env, topic string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		expect(t, e.post(t, "/v1/topics/"+topic+"/jobs", fmt.Sprintf(`{"id":"d%d","payload":{"i":%d}}`, i, i)), http.StatusAccepted)
	}
	if got := e.bury(t, topic, "boom"); got != n {
		t.Fatalf("buried %d, want %d", got, n)
	}
}

func TestDeadLetters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		enqueueAndBury(t, e, "t", 3)

		r := e.get(t, "/v1/topics/t/dead?limit=2")
		expect(t, r, http.StatusOK)
		p := decode[httpapi.JobPage](t, r)
		if p.Total != 3 || len(p.Jobs) != 2 || p.Offset != 0 || p.Limit != 2 || p.NextOffset != 2 {
			t.Fatalf("first page %+v", p)
		}
		for _, j := range p.Jobs {
			if j.State != "dead" || j.DiedAt == 0 || j.LastError != "boom" || j.Payload != nil || j.PayloadSize == 0 {
				t.Fatalf("dead job %+v", j)
			}
		}
		p = decode[httpapi.JobPage](t, e.get(t, "/v1/topics/t/dead?offset=2"))
		if len(p.Jobs) != 1 || p.NextOffset != 0 || p.Limit != 100 {
			t.Fatalf("last page %+v", p)
		}
		expectError(t, e.get(t, "/v1/topics/t/dead?limit=0"), http.StatusBadRequest, httpapi.CodeInvalidValue, "limit")
		expectError(t, e.get(t, "/v1/topics/t/dead?limit=1001"), http.StatusBadRequest, httpapi.CodeInvalidValue, "limit")
		expectError(t, e.get(t, "/v1/topics/t/dead?offset=-1"), http.StatusBadRequest, httpapi.CodeInvalidValue, "offset")

		// Requeue one, then the rest.
		r = e.post(t, "/v1/topics/t/dead/requeue", `{"id":"d0"}`)
		expect(t, r, http.StatusOK)
		if n := decode[httpapi.RequeueResponse](t, r); n.Requeued != 1 {
			t.Fatalf("requeue one: %+v", n)
		}
		if v := decode[httpapi.JobView](t, e.get(t, "/v1/topics/t/jobs/d0")); v.State != "waiting" || v.Attempt != 0 {
			t.Fatalf("requeued job %+v", v)
		}
		expectError(t, e.post(t, "/v1/topics/t/dead/requeue", `{"id":"d0"}`), http.StatusNotFound, httpapi.CodeNotFound, "id")
		expectError(t, e.post(t, "/v1/topics/t/dead/requeue", `{}`), http.StatusBadRequest, httpapi.CodeMissingField, "id")
		expectError(t, e.post(t, "/v1/topics/t/dead/requeue", `{"id":"d1","all":true}`), http.StatusBadRequest, httpapi.CodeConflictingFields, "all")
		expectError(t, e.post(t, "/v1/topics/t/dead/requeue", `{"id":"bad id"}`), http.StatusBadRequest, httpapi.CodeInvalidID, "id")
		r = e.post(t, "/v1/topics/t/dead/requeue", `{"all":true}`)
		expect(t, r, http.StatusOK)
		if n := decode[httpapi.RequeueResponse](t, r); n.Requeued != 2 {
			t.Fatalf("requeue all: %+v", n)
		}

		// Purge: a cut before the deaths keeps them; no body means now.
		e.bury(t, "t", "again")
		r = e.post(t, "/v1/topics/t/dead/purge", `{"before":1000}`)
		expect(t, r, http.StatusOK)
		if n := decode[httpapi.PurgeResponse](t, r); n.Purged != 0 || n.Before != 1000 {
			t.Fatalf("purge before 1000: %+v", n)
		}
		expectError(t, e.post(t, "/v1/topics/t/dead/purge", `{"before":-5}`), http.StatusBadRequest, httpapi.CodeInvalidValue, "before")
		r = e.send(t, req{method: "POST", path: "/v1/topics/t/dead/purge"}) // no body, no content type
		expect(t, r, http.StatusOK)
		if n := decode[httpapi.PurgeResponse](t, r); n.Purged != 3 || n.Before == 0 {
			t.Fatalf("purge all: %+v", n)
		}
		if s := decode[httpapi.TopicStats](t, e.get(t, "/v1/topics/t")); s.Dead != 0 || s.Due != 0 {
			t.Fatalf("stats after purge %+v", s)
		}
	})
}

// TestReadOnly checks that read-only mode refuses the state-changing
// operator routes, changes nothing, and still serves reads, dry runs and
// the data path.
func TestReadOnly(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			rec := &fakeRecovery{}
			e := newEnv(t, b, withReadOnly(), withRecovery(rec))
			readOnlyChecks(t, e)
			if runs := rec.runs(); len(runs) != 1 || !runs[0] {
				t.Fatalf("recovery runs %v, want one dry run and nothing else", runs)
			}
		})
	}
}

// readOnlyChecks is TestReadOnly on one env.
func readOnlyChecks(t *testing.T, e *env) {
	enqueueAndBury(t, e, "t", 2)
	expectError(t, e.post(t, "/v1/topics/t/dead/requeue", `{"all":true}`), http.StatusForbidden, httpapi.CodeReadOnly, "")
	expectError(t, e.post(t, "/v1/topics/t/dead/requeue", `{"id":"d0"}`), http.StatusForbidden, httpapi.CodeReadOnly, "")
	expectError(t, e.post(t, "/v1/topics/t/dead/purge", `{}`), http.StatusForbidden, httpapi.CodeReadOnly, "")
	expectError(t, e.del(t, "/v1/topics/t/dead/jobs/d0"), http.StatusForbidden, httpapi.CodeReadOnly, "")
	expectError(t, e.post(t, "/v1/recovery/run", ""), http.StatusForbidden, httpapi.CodeReadOnly, "")
	expectError(t, e.post(t, "/v1/recovery/run?dry_run=false", ""), http.StatusForbidden, httpapi.CodeReadOnly, "")
	expectError(t, e.post(t, "/v1/topics/t/pause", ""), http.StatusForbidden, httpapi.CodeReadOnly, "")
	if s := decode[httpapi.TopicStats](t, e.get(t, "/v1/topics/t")); s.Dead != 2 || s.Due != 0 {
		t.Fatalf("read-only mode changed the dead set: %+v", s)
	}
	expect(t, e.get(t, "/v1/topics/t/dead"), http.StatusOK)
	expect(t, e.post(t, "/v1/recovery/run?dry_run=true", ""), http.StatusOK)
	expect(t, e.post(t, "/v1/topics/t/jobs", `{"id":"new"}`), http.StatusAccepted)
}

// DELETE /v1/topics/{topic}/dead/jobs/{id...} deletes one dead job and
// marks its history row purged; a job that is not dead is 404 and left
// alone; a bad id is 400 naming it; read-only mode refuses it.
func TestDeleteDeadJob(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := testenv.Context(t)
		for _, id := range []string{"d:1", "d:2"} {
			expect(t, e.post(t, "/v1/topics/t/jobs", `{"id":"`+id+`"}`), http.StatusAccepted)
		}
		jobs := e.claimAll(t, "t")
		o := ledgerops.Of(e.l)
		if err := o.Record(ctx, jobs, "host:1"); err != nil {
			t.Fatal(err)
		}
		dead := make([]queue.DeadJob, len(jobs))
		for i, j := range jobs {
			dead[i] = queue.DeadJob{Job: j, Error: "boom"}
		}
		if err := o.Bury(ctx, dead); err != nil {
			t.Fatal(err)
		}
		if n, _, err := e.q.Bury(ctx, dead); err != nil || n != 2 {
			t.Fatalf("bury in Redis: %d, %v", n, err)
		}
		expect(t, e.post(t, "/v1/topics/t/jobs", `{"id":"alive","delay_ms":60000}`), http.StatusAccepted)

		r := e.del(t, "/v1/topics/t/dead/jobs/d:1")
		expect(t, r, http.StatusOK)
		if got := decode[httpapi.DeleteDeadResponse](t, r); got != (httpapi.DeleteDeadResponse{Topic: "t", ID: "d:1", Deleted: true}) {
			t.Fatalf("answer %+v", got)
		}
		if v := decode[httpapi.TopicStats](t, e.get(t, "/v1/topics/t")); v.Dead != 1 {
			t.Fatalf("dead after one delete: %d, want 1", v.Dead)
		}
		if p := decode[httpapi.HistoryPage](t, e.get(t, "/v1/topics/t/history?id=d:1")); len(p.History) != 1 || p.History[0].Outcome != "purged" {
			t.Fatalf("history of the deleted job: %+v", p)
		}
		if p := decode[httpapi.HistoryPage](t, e.get(t, "/v1/topics/t/history?id=d:2")); len(p.History) != 1 || p.History[0].Outcome != "dead" {
			t.Fatalf("history of the job left dead: %+v", p)
		}
		expectError(t, e.del(t, "/v1/topics/t/dead/jobs/d:1"), http.StatusNotFound, httpapi.CodeNotFound, "id")
		expectError(t, e.del(t, "/v1/topics/t/dead/jobs/alive"), http.StatusNotFound, httpapi.CodeNotFound, "id")
		if v := decode[httpapi.JobView](t, e.get(t, "/v1/topics/t/jobs/alive")); v.State != "waiting" {
			t.Fatalf("a waiting job after a refused delete: %+v", v)
		}
		expectError(t, e.del(t, "/v1/topics/t/dead/jobs/bad%20id"), http.StatusBadRequest, httpapi.CodeInvalidID, "id")
		expectError(t, e.del(t, "/v1/topics/bad%20topic/dead/jobs/d:2"), http.StatusBadRequest, httpapi.CodeInvalidTopic, "topic")
	})
}

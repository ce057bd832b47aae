package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// A finished job's history is read by topic, id, prefix and outcome; a
// GET of the job itself says how it finished instead of a bare 404; bad
// parameters are 400s naming them.
func TestJobHistory(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := testenv.Context(t)
		for _, id := range []string{"order:1", "order:2", "mail:1"} {
			expect(t, e.post(t, "/v1/topics/t/jobs", `{"id":"`+id+`"}`), http.StatusAccepted)
		}
		jobs := e.claimAll(t, "t")
		o := ledgerops.Of(e.l)
		if err := o.Record(ctx, jobs, "host:1"); err != nil {
			t.Fatal(err)
		}
		var done []queue.Ref
		for _, j := range jobs {
			if j.ID == "order:2" {
				if err := o.Bury(ctx, []queue.DeadJob{{Job: j, Error: "card declined"}}); err != nil {
					t.Fatal(err)
				}
				continue
			}
			done = append(done, j.Ref())
		}
		if err := o.Complete(ctx, done); err != nil {
			t.Fatal(err)
		}
		if _, err := e.q.Ack(ctx, done); err != nil { // and Redis, as the worker does
			t.Fatal(err)
		}
		expect(t, e.post(t, "/v1/topics/t/jobs", `{"id":"order:3","delay_ms":60000}`), http.StatusAccepted)
		expect(t, e.del(t, "/v1/topics/t/jobs/order:3"), http.StatusOK)

		p := decode[httpapi.HistoryPage](t, e.get(t, "/v1/topics/t/history?id=order:1"))
		if len(p.History) != 1 || p.History[0].Outcome != "succeeded" || p.History[0].Worker != "host:1" || p.History[0].Attempts != 1 ||
			p.History[0].FirstClaimedAt == 0 || p.History[0].FinishedAt == 0 {
			t.Fatalf("history of order:1: %+v", p)
		}
		p = decode[httpapi.HistoryPage](t, e.get(t, "/v1/topics/t/history?prefix=order:"))
		var got []string
		for _, h := range p.History {
			got = append(got, h.JobID+"="+h.Outcome)
		}
		if strings.Join(got, ",") != "order:1=succeeded,order:2=dead,order:3=cancelled" {
			t.Fatalf("prefix order: %v", got)
		}
		if p := decode[httpapi.HistoryPage](t, e.get(t, "/v1/topics/t/history?outcome=dead")); len(p.History) != 1 || p.History[0].LastError != "" && p.History[0].JobID != "order:2" {
			t.Fatalf("dead: %+v", p)
		}
		if p := decode[httpapi.HistoryPage](t, e.get(t, "/v1/topics/t/history?limit=2")); len(p.History) != 2 || p.NextAfter == "" {
			t.Fatalf("by time, limit 2: %+v", p)
		}
		if p := decode[httpapi.HistoryPage](t, e.get(t, "/v1/topics/other/history")); len(p.History) != 0 {
			t.Fatalf("other topic: %+v", p)
		}
		// The job page of a finished job says how it ended.
		nf := expectError(t, e.get(t, "/v1/topics/t/jobs/order:1"), http.StatusNotFound, httpapi.CodeNotFound, "")
		if !strings.Contains(nf.Message, "succeeded at") {
			t.Errorf("404 of a finished job says %q", nf.Message)
		}
		nf = expectError(t, e.get(t, "/v1/topics/t/jobs/never"), http.StatusNotFound, httpapi.CodeNotFound, "")
		if !strings.Contains(nf.Message, "never enqueued") {
			t.Errorf("404 of an unknown job says %q", nf.Message)
		}

		timeCursor := decode[httpapi.HistoryPage](t, e.get(t, "/v1/topics/t/history?limit=1")).NextAfter
		for q, field := range map[string]string{
			"outcome=done":                      "outcome",
			"id=a&prefix=b":                     "prefix",
			"id=a%20b":                          "id",
			"limit=0":                           "limit",
			"finished_from=-1":                  "finished_from",
			"finished_from=5&finished_before=3": "finished_before",
			"finished_from=5&finished_before=5": "finished_before",
			"prefix=order:&after=" + timeCursor: "after",
			"nope=1":                            "nope",
		} {
			r := e.get(t, "/v1/topics/t/history?"+q)
			if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"field":"`+field+`"`) {
				t.Errorf("?%s: %d %s; want 400 naming %s", q, r.status, r.body, field)
			}
		}
	})
}

// GET /v1/workers lists the registry; a topic's stats count its live
// workers, and flag one with jobs due and none.
func TestWorkersAndConsumers(t *testing.T) {
	e := newEnv(t, backends[0])
	ctx := testenv.Context(t)
	expect(t, e.post(t, "/v1/topics/emails/jobs", `{"id":"w:1"}`), http.StatusAccepted)
	expect(t, e.post(t, "/v1/topics/sms/jobs", `{"id":"s:1"}`), http.StatusAccepted)
	if l := decode[httpapi.WorkerList](t, e.get(t, "/v1/workers")); len(l.Workers) != 0 {
		t.Fatalf("workers %+v", l)
	}
	now, err := e.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	entry := fmt.Sprintf(`{"id":"h:1","host":"h","pid":7,"started_at":%d,"heartbeat":%d,"every_ms":5000,"topics":[{"topic":"sms","concurrency":4,"in_flight":1}]}`,
		now.UnixMilli(), now.UnixMilli())
	if err := e.rdb.HSet(ctx, e.ns+":workers", "h:1", entry).Err(); err != nil {
		t.Fatal(err)
	}
	l := decode[httpapi.WorkerList](t, e.get(t, "/v1/workers"))
	if len(l.Workers) != 1 || l.Workers[0].State != "live" || l.Workers[0].PID != 7 || len(l.Workers[0].Topics) != 1 {
		t.Fatalf("workers %+v", l)
	}
	for topic, want := range map[string]string{"emails": `"consumers":0,"unconsumed":true`, "sms": `"consumers":1,"unconsumed":false`} {
		if r := e.get(t, "/v1/topics/"+topic); !strings.Contains(string(r.body), want) {
			t.Errorf("%s stats %s, want %s", topic, r.body, want)
		}
	}
	list := decode[httpapi.TopicList](t, e.get(t, "/v1/topics"))
	for _, s := range list.Topics {
		if s.Unconsumed != (s.Topic == "emails") {
			t.Errorf("list: %s unconsumed %v", s.Topic, s.Unconsumed)
		}
	}
}

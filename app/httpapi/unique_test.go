package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// withUniqueFor gives topic a uniqueness window.
func withUniqueFor(topic string, w time.Duration) func(*setup) {
	return func(s *setup) { s.qcfg.TopicUniqueFor = map[string]time.Duration{topic: w} }
}

// An enqueue of a finished job's id inside the topic's uniqueness window
// answers 200 duplicate with how the job ended and until when its id is
// taken, alone and in a batch; the topic's stats show the window.
func TestEnqueueInsideTheUniquenessWindow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		expect(t, e.post(t, "/v1/topics/pay/jobs", `{"id":"a"}`), http.StatusAccepted)
		jobs := e.claimAll(t, "pay")
		if n, err := e.q.Ack(testenv.Context(t), []queue.Ref{jobs[0].Ref()}); err != nil || n != 1 {
			t.Fatalf("ack = %d, %v", n, err)
		}
		r := e.post(t, "/v1/topics/pay/jobs", `{"id":"a"}`)
		expect(t, r, http.StatusOK)
		got := decode[httpapi.EnqueueResponse](t, r)
		now := time.Now().UnixMilli()
		if !got.Duplicate || got.Finished == nil || got.Finished.Outcome != "succeeded" ||
			got.Finished.TakenUntil < now+50*60*1000 || got.Finished.TakenUntil > now+61*60*1000 {
			t.Fatalf("enqueue of a finished job's id: %+v %+v", got, got.Finished)
		}
		b := decode[httpapi.BatchResponse](t, e.post(t, "/v1/topics/pay/jobs:batch", `{"jobs":[{"id":"a"},{"id":"b"}]}`))
		if b.Created != 1 || b.Duplicates != 1 || b.Results[0].Finished == nil || b.Results[0].Finished.Outcome != "succeeded" ||
			b.Results[1].Finished != nil {
			t.Fatalf("batch: %+v", b)
		}
		st := decode[httpapi.TopicStats](t, e.get(t, "/v1/topics/pay"))
		if st.UniqueForMs != time.Hour.Milliseconds() {
			t.Fatalf("topic stats: unique_for_ms %d", st.UniqueForMs)
		}
		if st := decode[httpapi.TopicStats](t, e.get(t, "/v1/topics/other")); st.UniqueForMs != 0 {
			t.Fatalf("a topic without a window: unique_for_ms %d", st.UniqueForMs)
		}
	}, withUniqueFor("pay", time.Hour))
}

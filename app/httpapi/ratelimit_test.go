package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/queue"
)

// The topic stats show the rate limits the configuration gives the API,
// in the list and for one topic; a topic without one has no rate_limit.
func TestTopicStatsShowRateLimit(t *testing.T) {
	limits := map[string]queue.RateLimit{"sms": {PerSecond: 500, Burst: 50}}
	forEachBackend(t, func(t *testing.T, e *env) {
		expect(t, e.post(t, "/v1/topics/sms/jobs", `{"id":"1"}`), http.StatusAccepted)
		expect(t, e.post(t, "/v1/topics/mail/jobs", `{"id":"1"}`), http.StatusAccepted)
		s := decode[httpapi.TopicStats](t, e.get(t, "/v1/topics/sms"))
		if s.RateLimit == nil || *s.RateLimit != (httpapi.RateLimitView{PerSecond: 500, Burst: 50}) {
			t.Fatalf("sms stats %+v, rate limit %+v", s, s.RateLimit)
		}
		r := e.get(t, "/v1/topics/mail")
		if s := decode[httpapi.TopicStats](t, r); s.RateLimit != nil || strings.Contains(string(r.body), "rate_limit") {
			t.Fatalf("mail has a rate limit: %s", r.body)
		}
		list := decode[httpapi.TopicList](t, e.get(t, "/v1/topics"))
		for _, s := range list.Topics {
			if (s.Topic == "sms") != (s.RateLimit != nil) {
				t.Fatalf("list: %s rate limit %+v", s.Topic, s.RateLimit)
			}
		}
		if r := e.get(t, "/v1/topics/sms"); !strings.Contains(string(r.body), `"rate_limit":{"per_second":500,"burst":50}`) {
			t.Fatalf("sms JSON %s", r.body)
		}
	}, func(s *setup) { s.deps.RateLimits = limits })
}

// A topic's configured attempt limit is what a job's claim applies, so a
// job's views show max_attempts capped by it before any claim: GET of one
// job, the job browser, a reschedule's and a cancel's answers. A job that
// asked for fewer keeps its own; a topic without a limit shows the job's.
// (Before, an HTTP-target topic with max_attempts 3 showed 0/25.)
func TestJobViewsShowTheTopicsAttemptLimit(t *testing.T) {
	limit := func(topic string) int {
		if topic == "hook" {
			return 3
		}
		return 0
	}
	forEachBackend(t, func(t *testing.T, e *env) {
		expect(t, e.post(t, "/v1/topics/hook/jobs", `{"id":"a","delay_ms":60000}`), http.StatusAccepted)
		expect(t, e.post(t, "/v1/topics/hook/jobs", `{"id":"b","delay_ms":60000,"max_attempts":2}`), http.StatusAccepted)
		expect(t, e.post(t, "/v1/topics/mail/jobs", `{"id":"a","delay_ms":60000}`), http.StatusAccepted)
		for path, want := range map[string]int{"/v1/topics/hook/jobs/a": 3, "/v1/topics/hook/jobs/b": 2, "/v1/topics/mail/jobs/a": 25} {
			if v := decode[httpapi.JobView](t, e.get(t, path)); v.MaxAttempts != want {
				t.Errorf("GET %s: max_attempts %d, want %d", path, v.MaxAttempts, want)
			}
		}
		p := decode[httpapi.JobPage](t, e.get(t, "/v1/topics/hook/jobs?state=waiting"))
		if len(p.Jobs) != 2 || p.Jobs[0].MaxAttempts != 3 || p.Jobs[1].MaxAttempts != 2 {
			t.Errorf("browser page %+v", p.Jobs)
		}
		if v := decode[httpapi.RescheduledView](t, e.patch(t, "/v1/topics/hook/jobs/a", `{"delay_ms":120000}`)); v.MaxAttempts != 3 {
			t.Errorf("reschedule answers max_attempts %d", v.MaxAttempts)
		}
		if v := decode[httpapi.JobView](t, e.del(t, "/v1/topics/hook/jobs/a")); v.MaxAttempts != 3 {
			t.Errorf("cancel answers max_attempts %d", v.MaxAttempts)
		}
	}, func(s *setup) { s.deps.AttemptLimit = limit })
}

// A cancel's answer carries the warning Deps.CancelWarning gives for its
// job, and none for others.
func TestCancelAnswerCarriesTheWarning(t *testing.T) {
	e := newEnv(t, embedded, func(s *setup) {
		s.deps.CancelWarning = func(topic, id string) string {
			if topic == "order_close" {
				return "comes back: " + id
			}
			return ""
		}
	})
	for topic, want := range map[string]string{"order_close": "comes back: x", "mail": ""} {
		expect(t, e.post(t, "/v1/topics/"+topic+"/jobs", `{"id":"x","delay_ms":60000}`), http.StatusAccepted)
		r := e.del(t, "/v1/topics/"+topic+"/jobs/x")
		if v := decode[httpapi.JobView](t, r); v.Warning != want || (want == "") == strings.Contains(string(r.body), "warning") {
			t.Errorf("cancel on %s: %s", topic, r.body)
		}
	}
}

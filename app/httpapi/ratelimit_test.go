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

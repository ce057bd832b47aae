package dashboard

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// GET /v1/dashboard/minutes reads a topic's per-minute counts from Redis:
// the last hours, one value per minute, the backlog null where nobody
// sampled it; bad parameters are 400 naming them, Redis down is 503.
func TestMinutesRoute(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	now := time.Now().Unix() / 60
	for _, m := range []dataplane.MinuteCounts{
		{Minute: now - 1, Enqueued: 4, Done: 3, Retried: 2, Dead: 1, Backlog: 9},
		{Minute: now - 90, Done: 7, Backlog: -1}, // outside one hour, inside two
	} {
		if err := q.AddMinute(ctx, "mail", m); err != nil {
			t.Fatal(err)
		}
	}
	serve := func(q MinuteReader) *httptest.Server {
		d, err := New(Config{Source: &fakeSource{}, Minutes: q, Logger: testenv.QuietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(d.MinutesHandler())
		t.Cleanup(srv.Close)
		return srv
	}
	srv := serve(q)
	get := func(srv *httptest.Server, query string) (int, []byte) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/v1/dashboard/minutes" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	read := func(query string) Minutes {
		t.Helper()
		code, b := get(srv, query)
		var m Minutes
		if code != 200 || json.Unmarshal(b, &m) != nil {
			t.Fatalf("%s: %d %s", query, code, b)
		}
		return m
	}
	m := read("?topic=mail&hours=1")
	if m.Topic != "mail" || m.Hours != 1 || m.EveryMs != 60000 || len(m.T) != 60 || len(m.Done) != 60 || len(m.Backlog) != 60 {
		t.Fatalf("one hour: %+v", m)
	}
	// The request may fall in the next minute: the minute written is found
	// by its time.
	if m.T[59] < now*60000 || m.T[59] > (now+1)*60000 || m.T[59]-m.T[0] != 59*60000 {
		t.Errorf("t from %d to %d, want the last 60 minutes to %d", m.T[0], m.T[59], now*60000)
	}
	i := slices.Index(m.T, (now-1)*60000)
	if i < 0 || m.Enqueued[i] != 4 || m.Done[i] != 3 || m.Retried[i] != 2 || m.Dead[i] != 1 || m.Backlog[i] != float64(9) {
		t.Fatalf("the minute written (at %d): %+v", i, m)
	}
	if m.Backlog[0] != nil || m.Done[0] != 0 {
		t.Errorf("a minute nobody wrote: done %d, backlog %v; want 0 and null", m.Done[0], m.Backlog[0])
	}
	sum := func(xs []int64) (n int64) {
		for _, x := range xs {
			n += x
		}
		return n
	}
	if d := sum(read("?topic=mail&hours=2").Done); d != 10 {
		t.Errorf("done over two hours: %d, want 10", d)
	}
	if m := read("?topic=mail"); len(m.T) != 24*60 || m.Hours != 24 {
		t.Errorf("the default: %d minutes, %d hours; want a day", len(m.T), m.Hours)
	}
	for query, field := range map[string]string{
		"":                       "topic",
		"?hours=3":               "topic",
		"?topic=bad%20topic":     "topic",
		"?topic=mail&hours=0":    "hours",
		"?topic=mail&hours=25":   "hours",
		"?topic=mail&hours=x":    "hours",
		"?topic=mail&hours=":     "hours",
		"?topic=mail&hour=3":     "hour",
		"?topic=mail&topic=mail": "topic",
	} {
		code, b := get(srv, query)
		var e struct {
			Error struct{ Code, Field string }
		}
		if code != 400 || json.Unmarshal(b, &e) != nil || e.Error.Field != field {
			t.Errorf("%q: %d %s; want 400 naming %s", query, code, b, field)
		}
	}

	// Redis down: 503, retryable.
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { down.Close() })
	dq, err := dataplane.New(down, queue.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(serve(dq).URL + "/v1/dashboard/minutes?topic=mail")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !json.Valid(b) {
		t.Errorf("Redis down: %d %v %s; want 503 with Retry-After", resp.StatusCode, resp.Header, b)
	}
}

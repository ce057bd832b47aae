package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq/app/metrics"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/jobs/httptarget"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/recovery"
)

type fakeSource struct {
	live    map[string]metrics.TopicSample
	state   metrics.State
	relay   *metrics.RelayState // nil: no relay runs
	targets map[string]metrics.TargetState
	err     error
	reads   atomic.Int64    // State calls
	sample  testenv.Counter // SampleLive calls
}

func (f *fakeSource) SampleLive() map[string]metrics.TopicSample {
	f.sample.Add(1)
	return f.live
}

func (f *fakeSource) State(context.Context) (metrics.State, error) {
	f.reads.Add(1)
	return f.state, f.err
}

func (f *fakeSource) Targets() map[string]metrics.TargetState { return f.targets }

func (f *fakeSource) RelayState() (metrics.RelayState, bool) {
	if f.relay == nil {
		return metrics.RelayState{}, false
	}
	return *f.relay, true
}

// Nobody watching, the sampler keeps the live totals and leaves Redis and
// the ledger alone.
func TestSamplerReadsStateOnlyWhenWatched(t *testing.T) {
	for _, watched := range []bool{false, true} {
		src := &fakeSource{}
		h := newHistory(10)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); h.run(ctx, src, time.Millisecond, func() bool { return watched }) }()
		src.sample.WaitAtLeast(testenv.Context(t), t, 5, "5 samples")
		cancel()
		<-done
		if reads := src.reads.Load(); (reads > 0) != watched {
			t.Errorf("watched %t: %d state reads in %d samples", watched, reads, src.sample.Load())
		}
	}
}

// The history turns cumulative totals into rates per second, keeps the
// gauges read at each sample, and says null where a value is unknown.
func TestHistoryRatesAndGaps(t *testing.T) {
	h := newHistory(3)
	t0 := time.Unix(1700000000, 0)
	ok := metrics.State{HasLedger: true, LedgerRows: 4, StaleRows: 1,
		Topics: []queue.Stats{{Topic: "a", Due: 9, DueNow: 2, InFlight: 1, Dead: 3}}}
	h.add(t0, map[string]metrics.TopicSample{"a": {Completed: 10, Enqueued: 4}}, ok, nil) // the baseline
	h.add(t0.Add(2*time.Second), map[string]metrics.TopicSample{
		"a": {Completed: 30, Enqueued: 8, Started: 2, LatenessAvg: 3 * time.Millisecond, LatenessMax: 5 * time.Millisecond},
		"b": {Dead: 2}, // new since the baseline
	}, ok, nil)
	h.add(t0.Add(4*time.Second), map[string]metrics.TopicSample{"a": {Completed: 30, Enqueued: 8}, "b": {Dead: 2}},
		metrics.State{RedisErr: errors.New("down")}, nil)

	series, ledger := h.series()
	if ledger != nil {
		t.Errorf("ledger %+v after a reading without it, want null", ledger)
	}
	if len(series) != 2 || series[0].Topic != "a" || series[1].Topic != "b" {
		t.Fatalf("series %+v", series)
	}
	a := series[0]
	if len(a.T) != 2 || a.T[0] != t0.Add(2*time.Second).UnixMilli() {
		t.Errorf("a.t %v", a.T)
	}
	if a.Completed[0] != 10 || a.Enqueued[0] != 2 || a.Completed[1] != 0 {
		t.Errorf("rates: completed %v, enqueued %v", a.Completed, a.Enqueued)
	}
	if a.LateAvgMs[0] != 3.0 || a.LateMaxMs[0] != 5.0 || a.LateAvgMs[1] != nil {
		t.Errorf("lateness avg %v, max %v", a.LateAvgMs, a.LateMaxMs)
	}
	if a.Due[0] != int64(9) || a.Overdue[0] != int64(2) || a.InFlight[0] != int64(1) || a.Due[1] != nil {
		t.Errorf("gauges: due %v overdue %v in flight %v", a.Due, a.Overdue, a.InFlight)
	}
	if b := series[1]; b.Dead[0] != 1 || b.Due[0] != int64(0) {
		t.Errorf("b: dead %v, due %v (not in the topics set: nothing waits)", b.Dead, b.Due)
	}
	for i := 0; i < 5; i++ {
		h.add(t0.Add(time.Duration(6+2*i)*time.Second), nil, ok, nil)
	}
	series, ledger = h.series()
	if len(series[0].T) != 3 {
		t.Errorf("%d points kept, want the last 3", len(series[0].T))
	}
	if ledger == nil || ledger.Rows != 4 || ledger.Stale != 1 {
		t.Errorf("ledger %+v", ledger)
	}
}

// The page carries the configuration, the assets are embedded, and the
// series endpoint answers JSON.
func TestPageAssetsAndSeries(t *testing.T) {
	src := &fakeSource{live: map[string]metrics.TopicSample{"a": {Completed: 1}}, state: metrics.State{}}
	d, err := New(Config{Source: src, Auth: true, ReadOnly: true, Orders: true, StaleAfter: 90 * time.Second,
		SampleEvery: 10 * time.Millisecond, History: time.Second, Logger: testenv.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	defer func() { cancel(); <-done }()

	srv := httptest.NewServer(d.Handler())
	defer srv.Close()
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, page := get("/")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("GET /: %d %v", resp.StatusCode, resp.Header)
	}
	for _, want := range []string{`data-auth="true"`, `data-read-only="true"`, `data-orders="true"`, `data-workers="false"`, `data-stale-after-ms="90000"`, `src="/dashboard/app.js"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	for _, ref := range []string{`src="http`, `href="http`, `src="//`, `href="//`} {
		if strings.Contains(page, ref) {
			t.Errorf("the page loads from another origin: %s", ref)
		}
	}
	for path, ctype := range map[string]string{"/dashboard/app.js": "text/javascript", "/dashboard/app.css": "text/css"} {
		resp, body := get(path)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) || len(body) < 1000 {
			t.Errorf("GET %s: %d %s, %d bytes", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
		if strings.Contains(body, "http://") || strings.Contains(body, "https://") {
			t.Errorf("%s refers to another origin", path)
		}
	}
	if resp, _ := get("/dashboard/nope.js"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET an unknown asset: %d", resp.StatusCode)
	}

	series := httptest.NewServer(d.SeriesHandler())
	defer series.Close()
	// The sampler adds its first point with the second sample (a rate needs
	// two), before it takes the third.
	src.sample.WaitAtLeast(testenv.Context(t), t, 3, "three samples")
	sresp, err := http.Get(series.URL)
	if err != nil {
		t.Fatal(err)
	}
	var s Series
	err = json.NewDecoder(sresp.Body).Decode(&s)
	sresp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if s.EveryMs != 10 || s.HistoryMs != 1000 {
		t.Fatalf("series %+v", s)
	}
	if len(s.Topics) != 1 || s.Topics[0].Topic != "a" || len(s.Topics[0].T) == 0 {
		t.Fatalf("no point sampled: %+v", s)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("no source accepted")
	}
	if _, err := New(Config{Source: &fakeSource{}, SampleEvery: time.Minute, History: time.Second}); err == nil {
		t.Error("history shorter than a sample accepted")
	}
}

// The series carry the relay of this process (null without one) and each
// topic's relay pushes as of the last sample.
func TestSeriesRelay(t *testing.T) {
	ok := time.UnixMilli(1700000000123)
	for _, relay := range []*metrics.RelayState{nil, {
		Totals: recovery.RelayTotals{Passes: 9, Failed: 2, LastPass: ok.Add(time.Second), LastReload: ok}, LastOK: ok, Every: 200 * time.Millisecond,
	}} {
		src := &fakeSource{relay: relay, live: map[string]metrics.TopicSample{"dur": {Loaded: 4, Relayed: 1, Reloaded: 7}, "plain": {}}}
		d, err := New(Config{Source: src, Logger: testenv.QuietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		d.history.add(t0, src.live, metrics.State{}, nil)
		d.history.add(t0.Add(time.Second), src.live, metrics.State{}, nil)
		rec := httptest.NewRecorder()
		d.SeriesHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/dashboard/series", nil))
		var s Series
		if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
			t.Fatal(err)
		}
		if relay == nil {
			if s.Relay != nil || !strings.Contains(rec.Body.String(), `"relay":null`) {
				t.Errorf("no relay: %s", rec.Body.String())
			}
			continue
		}
		want := relayView{EveryMs: 200, Passes: 9, Failed: 2, LastPass: ok.Add(time.Second).UnixMilli(), LastOK: ok.UnixMilli(), LastReload: ok.UnixMilli()}
		if s.Relay == nil || *s.Relay != want {
			t.Errorf("relay %+v, want %+v", s.Relay, want)
		}
		if len(s.Topics) != 2 || s.Topics[0].Topic != "dur" || s.Topics[0].Loaded != 4 || s.Topics[0].Relayed != 1 || s.Topics[0].Reloaded != 7 ||
			s.Topics[1].Loaded+s.Topics[1].Relayed+s.Topics[1].Reloaded != 0 {
			t.Errorf("topics %+v", s.Topics)
		}
	}
}

// A topic with a target carries it in the series: method, URL and the
// latest failures, with times in Unix ms; other topics carry null.
func TestSeriesTarget(t *testing.T) {
	at := time.UnixMilli(1700000000123)
	src := &fakeSource{live: map[string]metrics.TopicSample{"hooks": {}, "plain": {}},
		targets: map[string]metrics.TargetState{"hooks": {Method: "POST", URL: "http://127.0.0.1:9/hook", Failures: []httptarget.Failure{
			{At: at, JobID: "j1", Attempt: 2, Status: 500, Class: "5xx", Reason: "HTTP 500 Internal Server Error"}}}}}
	d, err := New(Config{Source: src, Logger: testenv.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	d.history.add(t0, src.live, metrics.State{}, nil)
	d.history.add(t0.Add(time.Second), src.live, metrics.State{}, nil)
	rec := httptest.NewRecorder()
	d.SeriesHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/dashboard/series", nil))
	var s Series
	if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Topics) != 2 || s.Topics[1].Target != nil {
		t.Fatalf("topics %+v, want hooks and plain without a target", s.Topics)
	}
	want := failureView{At: at.UnixMilli(), JobID: "j1", Attempt: 2, Status: 500, Class: "5xx", Reason: "HTTP 500 Internal Server Error"}
	if tg := s.Topics[0].Target; tg == nil || tg.Method != "POST" || tg.URL != "http://127.0.0.1:9/hook" || len(tg.Failures) != 1 || tg.Failures[0] != want {
		t.Errorf("hooks' target %+v, want POST http://127.0.0.1:9/hook with %+v", tg, want)
	}
}

package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// The fuzz server's limits are small, so that short inputs cross them.
const (
	fuzzNS         = "fz"
	fuzzMaxPayload = 1024
	fuzzMaxBody    = 4096
	fuzzMaxBatch   = 5
	fuzzDeadline   = 10 * time.Second
)

// fuzzServer is the real API handler on an in-process miniredis and a
// SQLite ledger. It is built once per fuzzing process: the fuzzer runs a
// process's inputs one at a time, so they can share it, and building it per
// input (SQLite migration included) would cost more than the input itself.
// The miniredis is this process's own, never the shared Redis, so
// resetting it with FlushAll touches nobody else.
type fuzzServer struct {
	mr    *miniredis.Miniredis
	q     *dataplane.Client
	h     http.Handler
	clean string // state right after reset
}

// newFuzzServer builds the server and seeds it with one waiting job, t/dup,
// so that duplicates are reachable.
func newFuzzServer(tb testing.TB) *fuzzServer {
	tb.Helper()
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(mr.Close)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	tb.Cleanup(func() { _ = rdb.Close() })
	q, err := dataplane.New(rdb, queue.Config{Namespace: fuzzNS, MaxPayloadBytes: fuzzMaxPayload, MaxBatch: fuzzMaxBatch})
	if err != nil {
		tb.Fatal(err)
	}
	l, err := ledger.New(testenv.SQLite(tb), ledger.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	if err := l.Migrate(testenv.Context(tb)); err != nil {
		tb.Fatal(err)
	}
	// Debug level so the logging of every path runs; the output goes
	// nowhere, as thousands of inputs a second would drown a terminal.
	log := logrus.New()
	log.SetOutput(io.Discard)
	log.SetLevel(logrus.DebugLevel)
	h, err := httpapi.New(httpapi.Deps{Queue: q, Ledger: l, MaxBodyBytes: fuzzMaxBody, Logger: log})
	if err != nil {
		tb.Fatal(err)
	}
	s := &fuzzServer{mr: mr, q: q, h: h}
	s.reset(tb)
	return s
}

// reset empties the miniredis and seeds t/dup again.
func (s *fuzzServer) reset(tb testing.TB) {
	tb.Helper()
	s.mr.FlushAll()
	if _, err := s.q.Enqueue(testenv.Context(tb), "t", queue.NewJob{ID: "dup", Delay: time.Hour}); err != nil {
		tb.Fatal(err)
	}
	s.clean = s.state(true)
}

// before returns the state an input starts from, resetting first when the
// previous input wrote something (so state stays small and inputs do not
// depend on each other's leftovers).
func (s *fuzzServer) before(tb testing.TB) string {
	if st := s.state(true); st != s.clean {
		s.reset(tb)
	}
	return s.clean
}

// state renders every key and its full contents (miniredis's Dump
// truncates long values). The topics set is left out unless withTopics:
// the queue re-adds a topic to it every few seconds even for a duplicate,
// which writes no job.
func (s *fuzzServer) state(withTopics bool) string {
	var b strings.Builder
	keys := s.mr.Keys()
	slices.Sort(keys)
	for _, k := range keys {
		if k == fuzzNS+":topics" && !withTopics {
			continue
		}
		fmt.Fprintf(&b, "%q %s:", k, s.mr.Type(k))
		switch s.mr.Type(k) {
		case "string":
			v, _ := s.mr.Get(k)
			fmt.Fprintf(&b, " %q", v)
		case "hash":
			fields, _ := s.mr.HKeys(k)
			slices.Sort(fields)
			for _, f := range fields {
				fmt.Fprintf(&b, " %q=%q", f, s.mr.HGet(k, f))
			}
		case "set":
			members, _ := s.mr.Members(k)
			slices.Sort(members)
			fmt.Fprintf(&b, " %q", members)
		case "zset":
			m, _ := s.mr.SortedSet(k)
			members := make([]string, 0, len(m))
			for member := range m {
				members = append(members, member)
			}
			slices.Sort(members)
			for _, member := range members {
				fmt.Fprintf(&b, " %q=%v", member, m[member])
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// jobIDs returns the ids in topic's job hash.
func (s *fuzzServer) jobIDs(topic string) []string {
	ids, _ := s.mr.HKeys(fuzzNS + ":{" + topic + "}:job")
	return ids
}

// dueCount returns how many jobs of topic wait.
func (s *fuzzServer) dueCount(topic string) int {
	ids, _ := s.mr.ZMembers(fuzzNS + ":{" + topic + "}:due")
	return len(ids)
}

// post sends body to path through the handler and fails the input if the
// handler does not return in time. chunked hides the body's length, as a
// streaming client would, so only the read limit stops a large one.
func (s *fuzzServer) post(t *testing.T, target string, body []byte, ctype string, chunked bool) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	if chunked {
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body)))
		r.ContentLength = -1
	}
	if ctype != "" {
		r.Header.Set("Content-Type", ctype)
	}
	w := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.h.ServeHTTP(w, r)
	}()
	select {
	case <-done:
	case <-time.After(fuzzDeadline):
		t.Fatalf("POST %s: the handler did not return within %s", target, fuzzDeadline)
	}
	return w
}

// errorStatus is the status each error code the API documents (errors.go)
// goes with. Codes missing here (401, 403, 409, 5xx) cannot be right for
// an enqueue to a healthy backend without auth.
var errorStatus = map[string]int{
	httpapi.CodeMalformedJSON:        400,
	httpapi.CodeUnknownField:         400,
	httpapi.CodeInvalidValue:         400,
	httpapi.CodeMissingField:         400,
	httpapi.CodeConflictingFields:    400,
	httpapi.CodeInvalidTopic:         400,
	httpapi.CodeInvalidID:            400,
	httpapi.CodeInvalidPayload:       400,
	httpapi.CodePayloadTooLarge:      400,
	httpapi.CodeInvalidRunAt:         400,
	httpapi.CodeInvalidMaxAttempts:   400,
	httpapi.CodeInvalidPriority:      400,
	httpapi.CodeBatchTooLarge:        400,
	httpapi.CodeNotFound:             404,
	httpapi.CodeMethodNotAllowed:     405,
	httpapi.CodeBodyTooLarge:         413,
	httpapi.CodeUnsupportedMediaType: 415,
}

// decodeStrict decodes exactly one JSON value into a T, refusing unknown
// fields, so an answer that drifts from its documented shape fails.
func decodeStrict[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("answer %q is not a %T: %v", body, v, err)
	}
	if dec.More() {
		t.Fatalf("answer %q: more than one JSON value", body)
	}
	return v
}

// checkError fails unless w is an error answer as errors.go documents it:
// JSON, a known code that goes with the status, and a message.
func checkError(t *testing.T, w *httptest.ResponseRecorder) httpapi.ErrorDetail {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("status %d with Content-Type %q; body %q", w.Code, ct, w.Body.Bytes())
	}
	e := decodeStrict[httpapi.ErrorResponse](t, w.Body.Bytes()).Error
	if want, ok := errorStatus[e.Code]; !ok || want != w.Code || e.Message == "" {
		t.Fatalf("status %d with error %+v: want a known code of that status, and a message", w.Code, e)
	}
	return e
}

// checkStatus fails on a 5xx (nothing here is the backend's fault, so a
// 5xx is a bug turned into an answer: a panic, an unclassified error) and
// on a redirect for a path that is already clean (ServeMux redirects only
// unclean ones, such as an empty or "." topic).
func checkStatus(t *testing.T, w *httptest.ResponseRecorder, target string) {
	t.Helper()
	p, _, _ := strings.Cut(target, "?")
	switch {
	case w.Code >= 500:
		t.Fatalf("POST %s: status %d; body %q", target, w.Code, w.Body.Bytes())
	case w.Code >= 300 && w.Code < 400 && path.Clean(p) == p:
		t.Fatalf("POST %s: redirect %d for a clean path", target, w.Code)
	case w.Code < 200 || (w.Code >= 300 && w.Code < 400 && w.Header().Get("Location") == ""):
		t.Fatalf("POST %s: status %d", target, w.Code)
	}
}

// topicPath is the path of a topic's route; the topic is escaped the way a
// client would escape it.
func topicPath(topic, route string) string {
	return "/v1/topics/" + url.PathEscape(topic) + route
}

// enqueueSeeds are the f.Add seeds of both enqueue targets; testdata/fuzz
// holds more.
var enqueueSeeds = []struct {
	topic, body, ctype string
	chunked            bool
}{
	{"t", `{"id":"a","payload":{"x":1},"delay_ms":1000}`, "application/json", false},
	{"t", `{"id":"dup"}`, "application/json; charset=utf-8", false},
	{"t", `{"id":"b","payload_base64":"AAE=","max_attempts":3}`, "application/json", true},
	{"t", `{"id":"a","dealy_ms":5}`, "application/json", false},
	{"b{ad", `{"id":"a"}`, "application/json", false},
	{"", `{"id":"a"}`, "application/json", false},
	{"t", `{"id":"a"}`, "text/plain", false},
	{"t", `{"id":"a"} x`, "application/json", false},
	{"t", "{\"id\":\"\x00\"}", "application/json", false},
	{"t", `{"jobs":[{"id":"a"},{"id":"dup"},{"id":"bad id"},7,null]}`, "application/json", false},
}

// FuzzEnqueue posts arbitrary bodies, topics and content types to
// POST /v1/topics/{topic}/jobs. Properties: the handler returns; no 5xx;
// an error answer is the documented JSON with a known code; a refusal
// writes nothing to Redis; a 202 created exactly the job it names, waiting
// at the run_at it answers; a 200 is a duplicate that wrote no job.
func FuzzEnqueue(f *testing.F) {
	for _, s := range enqueueSeeds {
		f.Add(s.topic, []byte(s.body), s.ctype, s.chunked)
	}
	s := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, topic string, body []byte, ctype string, chunked bool) {
		before := s.before(t)
		target := topicPath(topic, "/jobs")
		w := s.post(t, target, body, ctype, chunked)
		checkStatus(t, w, target)
		switch {
		case w.Code >= 300:
			if w.Code >= 400 {
				checkError(t, w)
			}
			if after := s.state(true); after != before {
				t.Fatalf("POST %s %q: status %d, yet Redis changed:\nbefore %s\nafter  %s", target, body, w.Code, before, after)
			}
		case w.Code == http.StatusAccepted:
			res := decodeStrict[httpapi.EnqueueResponse](t, w.Body.Bytes())
			if res.Topic != topic || res.Duplicate || queue.ValidateID(res.ID) != nil || res.RunAt <= 0 {
				t.Fatalf("POST %s %q: 202 with %+v", target, body, res)
			}
			if loc := w.Header().Get("Location"); loc != topicPath(topic, "/jobs/"+url.PathEscape(res.ID)) {
				t.Fatalf("POST %s: Location %q for job %q", target, loc, res.ID)
			}
			info, err := s.q.Get(testenv.Context(t), topic, res.ID)
			if err != nil || info.State != queue.StateWaiting || info.Score != res.RunAt ||
				info.Job.MaxAttempts < 1 || info.Job.MaxAttempts > 100 || len(info.Job.Payload) > fuzzMaxPayload {
				t.Fatalf("POST %s %q: 202 %+v, but the queue has %+v (%v)", target, body, res, info, err)
			}
		case w.Code == http.StatusOK:
			res := decodeStrict[httpapi.EnqueueResponse](t, w.Body.Bytes())
			if res.Topic != topic || !res.Duplicate {
				t.Fatalf("POST %s %q: 200 with %+v", target, body, res)
			}
			if after := s.state(false); after != s.stateWithoutTopics(before) {
				t.Fatalf("POST %s %q: a duplicate changed Redis:\nbefore %s\nafter  %s", target, body, before, after)
			}
		default:
			t.Fatalf("POST %s: status %d", target, w.Code)
		}
	})
}

// stateWithoutTopics drops the topics set's line from a state.
func (s *fuzzServer) stateWithoutTopics(st string) string {
	var b strings.Builder
	for line := range strings.Lines(st) {
		if !strings.HasPrefix(line, fmt.Sprintf("%q ", fuzzNS+":topics")) {
			b.WriteString(line)
		}
	}
	return b.String()
}

// FuzzEnqueueBatch posts arbitrary bodies, topics and content types to
// POST /v1/topics/{topic}/jobs:batch. batch.go documents that a batch is
// refused whole only for whole-request problems (content type, size, shape,
// topic, count), and otherwise answers 200 with one result per job, in
// order, where invalid jobs write nothing and the others are created or
// duplicates. Properties: the handler returns; no 5xx; an error answer is
// the documented JSON and wrote nothing; a 200 has one result per job with
// consistent counts; Redis gained exactly the created jobs, each waiting at
// its answered run_at; an invalid job's id gained nothing.
func FuzzEnqueueBatch(f *testing.F) {
	for _, s := range enqueueSeeds {
		f.Add(s.topic, []byte(s.body), s.ctype, s.chunked)
	}
	s := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, topic string, body []byte, ctype string, chunked bool) {
		before := s.before(t)
		var known []string
		if queue.ValidateTopic(topic) == nil {
			known = s.jobIDs(topic)
		}
		dueBefore := s.dueCount(topic)
		target := topicPath(topic, "/jobs:batch")
		w := s.post(t, target, body, ctype, chunked)
		checkStatus(t, w, target)
		if w.Code >= 300 {
			if w.Code >= 400 {
				checkError(t, w)
			}
			if after := s.state(true); after != before {
				t.Fatalf("POST %s %q: status %d, yet Redis changed:\nbefore %s\nafter  %s", target, body, w.Code, before, after)
			}
			return
		}
		if w.Code != http.StatusOK {
			t.Fatalf("POST %s: status %d", target, w.Code)
		}
		// The request's job count, read here without the handler's code.
		var sent struct{ Jobs []json.RawMessage }
		if err := json.Unmarshal(body, &sent); err != nil {
			t.Fatalf("POST %s %q: 200 for a body that is not JSON: %v", target, body, err)
		}
		res := decodeStrict[httpapi.BatchResponse](t, w.Body.Bytes())
		if res.Topic != topic || len(res.Results) != len(sent.Jobs) ||
			res.Created+res.Duplicates+res.Invalid != len(res.Results) {
			t.Fatalf("POST %s %q: 200 with %+v for %d jobs", target, body, res, len(sent.Jobs))
		}
		var created []string
		counts := map[string]int{}
		for i, r := range res.Results {
			counts[r.Status]++
			switch {
			case r.Index != i:
				t.Fatalf("result %d has index %d", i, r.Index)
			case r.Status == string(queue.BatchInvalid):
				if r.Error == nil || errorStatus[r.Error.Code] != 400 || r.Error.Message == "" || r.RunAt != 0 {
					t.Fatalf("invalid result %d: %+v (error %+v)", i, r, r.Error)
				}
			case r.Status == string(queue.BatchCreated), r.Status == string(queue.BatchDuplicate):
				if r.Error != nil || r.RunAt <= 0 {
					t.Fatalf("result %d: %+v (error %+v)", i, r, r.Error)
				}
				if r.Status == string(queue.BatchCreated) {
					if slices.Contains(known, r.ID) || slices.Contains(created, r.ID) {
						t.Fatalf("result %d: id %q created, but it existed already", i, r.ID)
					}
					created = append(created, r.ID)
				}
			default:
				t.Fatalf("result %d: status %q", i, r.Status)
			}
		}
		if counts["created"] != res.Created || counts["duplicate"] != res.Duplicates || counts["invalid"] != res.Invalid {
			t.Fatalf("counts %+v do not match the results %v", res, counts)
		}
		after := s.jobIDs(topic)
		if len(after) != len(known)+res.Created || s.dueCount(topic) != dueBefore+res.Created {
			t.Fatalf("batch created %d jobs, but the job hash went from %d to %d ids and due from %d to %d",
				res.Created, len(known), len(after), dueBefore, s.dueCount(topic))
		}
		for _, r := range res.Results {
			switch {
			case r.Status == string(queue.BatchCreated):
				info, err := s.q.Get(testenv.Context(t), topic, r.ID)
				if err != nil || info.State != queue.StateWaiting || info.Score != r.RunAt {
					t.Fatalf("created %+v, but the queue has %+v (%v)", r, info, err)
				}
			case r.Status == string(queue.BatchInvalid) && !slices.Contains(known, r.ID) && !slices.Contains(created, r.ID):
				if slices.Contains(after, r.ID) {
					t.Fatalf("invalid job %q was written", r.ID)
				}
			}
		}
	})
}

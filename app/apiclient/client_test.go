package apiclient_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/delayq/delayq/app/apiclient"
	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// api serves the real API handler on miniredis and SQLite; the client's
// contract is with that handler, not with a mock of it.
func api(t *testing.T, token string) (*httptest.Server, *dataplane.Client) {
	t.Helper()
	srv, q, _ := apiAndLedger(t, token)
	return srv, q
}

// apiAndLedger is api with the ledger the handler reads.
func apiAndLedger(t *testing.T, token string) (*httptest.Server, *dataplane.Client, *ledger.Ledger) {
	t.Helper()
	rdb, ns := testenv.MiniRedis(t)
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(testenv.SQLite(t), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Migrate(testenv.Context(t)); err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Deps{Queue: q, Ledger: l, Token: token, Logger: testenv.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, q, l
}

func newClient(t *testing.T, base, token string) *apiclient.Client {
	t.Helper()
	c, err := apiclient.New(base, apiclient.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEnqueueGetCancelAndTheirErrors(t *testing.T) {
	srv, q := api(t, "")
	c := newClient(t, srv.URL+"/", "")
	payload := "\x00binary\xff" // bytes that are not JSON come back as they were sent
	req := httpapi.EnqueueRequest{ID: "a/b//c", DelayMs: ptr(int64(3_600_000))}
	b64 := base64.StdEncoding.EncodeToString([]byte(payload))
	req.PayloadBase64 = &b64
	res, err := c.Enqueue(testenv.Context(t), "mail", req)
	if err != nil || res.Duplicate || res.RunAt == 0 || res.ID != "a/b//c" {
		t.Fatalf("enqueue: %+v, %v", res, err)
	}
	if res, err = c.Enqueue(testenv.Context(t), "mail", req); err != nil || !res.Duplicate {
		t.Fatalf("second enqueue: %+v, %v", res, err)
	}
	v, err := c.Job(testenv.Context(t), "mail", "a/b//c")
	if err != nil || v.State != "waiting" || v.PayloadBase64 != b64 {
		t.Fatalf("job: %+v, %v", v, err)
	}
	if s, err := c.TopicStats(testenv.Context(t), "mail"); err != nil || s.Due != 1 {
		t.Fatalf("stats: %+v, %v", s, err)
	}
	if all, err := c.Topics(testenv.Context(t)); err != nil || len(all) != 1 || all[0].Topic != "mail" {
		t.Fatalf("topics: %+v, %v", all, err)
	}
	if v, err = c.Cancel(testenv.Context(t), "mail", "a/b//c"); err != nil || v.State != "cancelled" {
		t.Fatalf("cancel: %+v, %v", v, err)
	}
	for name, err := range map[string]error{
		"get":         second(c.Job(testenv.Context(t), "mail", "a/b//c")),
		"cancel":      second(c.Cancel(testenv.Context(t), "mail", "a/b//c")),
		"requeue":     second(c.RequeueDead(testenv.Context(t), "mail", httpapi.RequeueRequest{ID: "nope"})),
		"delete dead": second(c.DeleteDead(testenv.Context(t), "mail", "a/b//c")),
	} {
		var ae *apiclient.Error
		if !errors.Is(err, queue.ErrNotFound) || !errors.As(err, &ae) || ae.Status != 404 {
			t.Errorf("%s of a job that is gone: %v, want a 404 matching queue.ErrNotFound", name, err)
		}
	}

	// In flight: the run's cancel is asked (202), the job shown held.
	if _, err := q.Enqueue(testenv.Context(t), "mail", queue.NewJob{ID: "busy"}); err != nil {
		t.Fatal(err)
	}
	if cl, err := q.Claim(testenv.Context(t), "mail", 1, time.Minute); err != nil || len(cl.Jobs) != 1 {
		t.Fatalf("claim: %+v, %v", cl, err)
	}
	v, err = c.Cancel(testenv.Context(t), "mail", "busy")
	if err != nil || v.State != queue.StateInFlight || v.CancelRequestedAt <= 0 {
		t.Fatalf("cancel in flight: %+v, %v; want in_flight with its cancel asked", v, err)
	}

	// Bad input: 400 is queue.ErrInvalid, with the API's code and field.
	_, err = c.Enqueue(testenv.Context(t), "bad topic", httpapi.EnqueueRequest{ID: "x"})
	var ae *apiclient.Error
	if !errors.Is(err, queue.ErrInvalid) || !errors.As(err, &ae) || ae.Code != httpapi.CodeInvalidTopic {
		t.Fatalf("bad topic: %v", err)
	}
}

func TestToken(t *testing.T) {
	srv, _ := api(t, "the-token-of-this-test")
	if _, err := newClient(t, srv.URL, "").Topics(testenv.Context(t)); !errors.Is(err, apiclient.ErrUnauthorized) {
		t.Fatalf("no token: %v, want ErrUnauthorized", err)
	}
	if _, err := newClient(t, srv.URL, "wrong").Topics(testenv.Context(t)); !errors.Is(err, apiclient.ErrUnauthorized) {
		t.Fatalf("wrong token: %v, want ErrUnauthorized", err)
	}
	if _, err := newClient(t, srv.URL, "the-token-of-this-test").Topics(testenv.Context(t)); err != nil {
		t.Fatalf("right token: %v", err)
	}
}

// Nothing listening: ErrUnreachable (nothing was sent).
func TestUnreachable(t *testing.T) {
	addr := testenv.RefusedAddr(t) // a port closed again could be another test's server by now
	_, err := newClient(t, "http://"+addr, "").Enqueue(testenv.Context(t), "mail", httpapi.EnqueueRequest{ID: "x"})
	if !errors.Is(err, apiclient.ErrUnreachable) {
		t.Fatalf("closed port: %v, want ErrUnreachable", err)
	}
}

// Another server on the address: its 404 page is not "job not found", and
// its 200 page is not a success.
func TestNotTheAPI(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, "<html>hello</html>")
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, srv.URL, "")
	if _, err := c.Job(testenv.Context(t), "mail", "x"); err == nil || errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("a foreign 404: %v, want an error that is not ErrNotFound", err)
	}
	if _, err := c.Enqueue(testenv.Context(t), "mail", httpapi.EnqueueRequest{ID: "x"}); err == nil {
		t.Fatal("a foreign 200 page taken for an enqueue")
	}
}

func TestNewRefusesBadURLs(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8080", "ftp://h:1", "http://"} {
		if _, err := apiclient.New(u, apiclient.Options{}); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func second[T any](_ T, err error) error { return err }

// Ledger sends every filter and pages with the cursor the API gave.
func TestLedger(t *testing.T) {
	srv, _, l := apiAndLedger(t, "")
	c := newClient(t, srv.URL, "")
	ctx := testenv.Context(t)
	rows := []ledger.Entry{
		{Topic: "mail", JobID: "late", State: queue.StateWaiting, RunAt: 3000, Payload: []byte{}},
		{Topic: "mail", JobID: "early", State: queue.StateWaiting, RunAt: 1000, Payload: []byte{}},
		{Topic: "mail", JobID: "mid", State: queue.StateWaiting, RunAt: 2000, Payload: []byte{}},
		{Topic: "other", JobID: "mid", State: queue.StateWaiting, RunAt: 2000, Payload: []byte{}},
		{Topic: "mail", JobID: "failing", State: queue.StateRetrying, RunAt: 2000, Payload: []byte{}},
	}
	if err := l.DB().WithContext(ctx).Table(l.LedgerTable()).Create(&rows).Error; err != nil {
		t.Fatal(err)
	}
	f := ledger.ListFilter{State: queue.StateWaiting, Topic: "mail", DueAfter: 500, DueBefore: 3000, Limit: 1}
	var got []string
	for {
		p, err := c.Ledger(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Rows {
			got = append(got, r.JobID)
		}
		if p.NextCursor == "" {
			break
		}
		cur, err := ledger.ParseCursor(p.NextCursor)
		if err != nil {
			t.Fatal(err)
		}
		f.After = &cur
	}
	if fmt.Sprint(got) != "[early mid]" {
		t.Errorf("pages: %v, want [early mid]", got)
	}
	if p, err := c.Ledger(ctx, ledger.ListFilter{Limit: 10}); err != nil || len(p.Rows) != len(rows) || p.NextCursor != "" {
		t.Errorf("everything: %+v, %v", p, err)
	}
	var ae *apiclient.Error
	if _, err := c.Ledger(ctx, ledger.ListFilter{State: "dead", Limit: 1}); !errors.Is(err, queue.ErrInvalid) ||
		!errors.As(err, &ae) || ae.Field != "state" {
		t.Errorf("bad state: %v", err)
	}
}

// An enqueue's priority reaches the job (EnqueueRequest is the API's own
// type), one job's view and a listing show it, and one out of range is
// queue.ErrInvalid naming the field.
func TestEnqueueWithPriority(t *testing.T) {
	srv, _ := api(t, "")
	c := newClient(t, srv.URL, "")
	ctx := testenv.Context(t)
	for id, p := range map[string]int{"urgent": queue.MaxPriority, "plain": 0} {
		if _, err := c.Enqueue(ctx, "mail", httpapi.EnqueueRequest{ID: id, Priority: p, DelayMs: ptr(int64(3_600_000))}); err != nil {
			t.Fatalf("enqueue %s: %v", id, err)
		}
	}
	if v, err := c.Job(ctx, "mail", "urgent"); err != nil || v.Priority != queue.MaxPriority {
		t.Fatalf("job: priority %d, %v; want %d", v.Priority, err, queue.MaxPriority)
	}
	p, err := c.Jobs(ctx, "mail", httpapi.JobQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, v := range p.Jobs {
		got[v.ID] = v.Priority
	}
	if len(got) != 2 || got["urgent"] != queue.MaxPriority || got["plain"] != 0 {
		t.Fatalf("listing shows priorities %v", got)
	}
	_, err = c.Enqueue(ctx, "mail", httpapi.EnqueueRequest{ID: "bad", Priority: queue.MaxPriority + 1})
	var ae *apiclient.Error
	if !errors.Is(err, queue.ErrInvalid) || !errors.As(err, &ae) || ae.Code != httpapi.CodeInvalidPriority || ae.Field != "priority" {
		t.Fatalf("priority %d: %v, want invalid_priority naming the field", queue.MaxPriority+1, err)
	}
}

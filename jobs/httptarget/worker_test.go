package httptarget_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/jobs/httptarget"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// End to end: a real worker on Redis and MariaDB delivers enqueued jobs to
// a receiver; a 503 with Retry-After is retried at that time (not after
// the topic's backoff of a minute), a 400 buries the job at once with the
// status and the body in its dead letter, and a receiver that hangs is cut
// by the timeout and the job retried with the backoff of its topic.
func TestWorkerDeliversRetriesAndBuries(t *testing.T) {
	release := make(chan struct{})
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		switch id := r.Header.Get("Delayq-Job-Id"); {
		case id == "hang" && r.Header.Get("Delayq-Attempt") == "1":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case id == "busy" && r.Header.Get("Delayq-Attempt") == "1":
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
		case id == "bad":
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"unknown invoice"}`))
		case id == "ok":
			_, _ = w.Write([]byte(`{"invoice": "ok", "sent": true}`)) // its history row's result
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	t.Cleanup(func() { close(release) }) // before the receiver's Close, which waits for it
	rdb, ns := testenv.Redis(t)
	db := testenv.MySQL(t)
	led, err := ledger.New(db, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	if err := led.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	w, err := dataplane.NewWorker(q, ledgerops.Of(led), queue.WorkerConfig{MaxIdle: 100 * time.Millisecond, Logger: testenv.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	obs := &observed{}
	tg := newTarget(t, httptarget.Config{URL: rc.URL + "/hook", Secret: []byte("k"), Concurrency: 4, Observer: obs})
	if err := w.Handle("invoices", tg, queue.TopicConfig{Concurrency: 4,
		Backoff: queue.Backoff{Base: time.Minute, Cap: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	slow := newTarget(t, httptarget.Config{URL: rc.URL + "/slow", Timeout: 300 * time.Millisecond, Observer: obs})
	if err := w.Handle("slow", slow, queue.TopicConfig{Backoff: queue.Backoff{Base: 100 * time.Millisecond, Cap: time.Second}}); err != nil {
		t.Fatal(err)
	}
	testenv.Start(t, w.Run)
	if _, err := q.Enqueue(ctx, "slow", queue.NewJob{ID: "hang", Payload: []byte(`{}`), MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}

	for _, id := range []string{"ok", "busy", "bad"} {
		if _, err := q.Enqueue(ctx, "invoices", queue.NewJob{ID: id, Payload: []byte(`{"id":"` + id + `"}`), MaxAttempts: 5}); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(id string) func() bool {
		return func() bool {
			info, err := q.Get(ctx, "invoices", id)
			return err == nil && info.State == queue.StateUnknown
		}
	}
	testenv.WaitFor(ctx, t, "ok to be done", gone("ok"))
	testenv.WaitFor(ctx, t, "busy to be done after its Retry-After", gone("busy"))
	// A success's JSON body is the job's result; an empty one is none.
	for id, want := range map[string]string{"ok": `{"invoice":"ok","sent":true}`, "busy": ""} {
		rows, _, err := led.History(ctx, ledger.HistoryFilter{Topic: "invoices", ID: id, Limit: 1})
		if err != nil || len(rows) != 1 || string(rows[0].Result) != want {
			t.Errorf("history of %s: %+v %v, want one row with result %q", id, rows, err, want)
		}
	}
	testenv.WaitFor(ctx, t, "hang to be done on its second attempt", func() bool {
		info, err := q.Get(ctx, "slow", "hang")
		return err == nil && info.State == queue.StateUnknown
	})
	var dead []ledger.DeadLetter
	testenv.WaitFor(ctx, t, "bad's dead letter", func() bool {
		dead, err = led.DeadLetters(ctx, "invoices", 0, time.Now().Add(time.Hour).UnixMilli(), 10)
		return err == nil && len(dead) == 1
	})
	if d := dead[0]; d.JobID != "bad" || d.Attempts != 1 ||
		!strings.Contains(d.LastError, "HTTP 400 Bad Request") || !strings.Contains(d.LastError, `{"error":"unknown invoice"}`) {
		t.Errorf("dead letter %+v, want bad after one attempt with the status and the body", d)
	}
	if info, err := q.Get(ctx, "invoices", "bad"); err != nil || info.State != queue.StateDead {
		t.Errorf("bad: %+v %v, want dead", info, err)
	}

	byJob := map[string][]seen{}
	for _, r := range rc.requests() {
		id := r.header.Get("Delayq-Job-Id")
		byJob[id] = append(byJob[id], r)
	}
	if len(byJob["ok"]) != 1 || len(byJob["bad"]) != 1 || len(byJob["busy"]) != 2 || len(byJob["hang"]) != 2 {
		t.Fatalf("requests per job: ok %d, busy %d, bad %d, hang %d; want 1, 2, 1, 2",
			len(byJob["ok"]), len(byJob["busy"]), len(byJob["bad"]), len(byJob["hang"]))
	}
	for i, r := range byJob["busy"] {
		if a := r.header.Get("Delayq-Attempt"); a != []string{"1", "2"}[i] {
			t.Errorf("busy request %d: attempt %s", i, a)
		}
		if d := r.header.Get("Delayq-Delivery"); d != []string{"1", "2"}[i] {
			t.Errorf("busy request %d: delivery %s", i, d)
		}
		if k := r.header.Get("Idempotency-Key"); k != "invoices:busy" {
			t.Errorf("busy request %d: Idempotency-Key %q", i, k)
		}
		if sig := r.header.Get("Delayq-Signature"); sig != hmacHex("k", r.header.Get("Delayq-Timestamp"), r.body) {
			t.Errorf("busy request %d: signature %q", i, sig)
		}
	}
	// Retry-After: 1 against a backoff of a minute.
	if gap := byJob["busy"][1].at.Sub(byJob["busy"][0].at); gap < 800*time.Millisecond || gap > 30*time.Second {
		t.Errorf("busy retried after %s, want about the 1s of its Retry-After", gap)
	}
	if got := obs.count(); got["invoices/2xx"] != 2 || got["invoices/5xx"] != 1 || got["invoices/4xx"] != 1 ||
		got["slow/timeout"] != 1 || got["slow/2xx"] != 1 {
		t.Errorf("observed %v", got)
	}
}

package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"gorm.io/driver/mysql"

	"github.com/delayq/delayq/app/cli"
	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/queue/engine"
)

// One job walked through every state of queue.State, on a durable topic
// and on a redis topic served by `delayq serve` and handled by an engine
// of the test's own, shows the same state name at every step in the
// API's GET of the job, its listing, `delayq get`, `delayq jobs`, `delayq
// ledger list` (its row) and the dashboard's job page and listing
// (docs/design.md §4.1): waiting (in SQL only, on the durable topic),
// in_flight, retrying, in_flight again, dead, waiting after a requeue, and
// unknown once it succeeded.
func TestOneJobShowsOneStateEverywhere(t *testing.T) {
	needBrowser(t)
	t.Setenv("DELAYQ_HTTP_TOKEN", testToken) // the CLI's token for the API
	rdb, ns := testenv.Redis(t)
	dsn := testenv.MySQLDSN(t)
	api := startServe(t, ns, dsn, false, "http://127.0.0.1:1/unused")
	// invoices is durable in startServe's config; mail is a redis topic
	// no worker of serve's handles.
	const durableTopic, redisTopic = "invoices", "mail"

	// The handler reports each claim and returns what the test hands it.
	started := make(chan int) // the claim's attempt
	outcome := make(chan error)
	store := ledger.Must(ledger.Open(mysql.Open(dsn), ledger.Options{}))
	eng := engine.Must(engine.New(rdb, store, engine.Config{
		Queue:      queue.Config{Namespace: ns}.WithDurableTopics(durableTopic),
		NoRecovery: true, NoPeriodic: true, Logger: testenv.QuietLogger(),
	}))
	handler := queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		select {
		case started <- j.Attempt:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case err := <-outcome:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	for _, topic := range []string{durableTopic, redisTopic} {
		if err := eng.Handle(topic, handler, queue.TopicConfig{Lease: time.Minute, MaxAttempts: 5}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(testenv.Context(t))
	ran := make(chan error, 1)
	go func() { ran <- eng.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("engine: %v", err)
		}
	})
	browser := newBrowser(t)
	tab, _ := newTab(t, browser)
	openDashboard(t, tab, api.url)

	w := walk{t: t, api: api, tab: tab, store: store, started: started, outcome: outcome}
	t.Run("durable", func(t *testing.T) { w.t = t; w.through(durableTopic, "walk:1", true) })
	t.Run("redis", func(t *testing.T) { w.t = t; w.through(redisTopic, "walk:2", false) })
}

// walk takes one job through every state.
type walk struct {
	t       *testing.T
	api     *server
	tab     context.Context
	store   *ledger.Ledger
	started chan int
	outcome chan error
}

func (w walk) through(topic, id string, durable bool) {
	t, api, tab := w.t, w.api, w.tab
	claimed := func(what string) int {
		t.Helper()
		select {
		case a := <-w.started:
			return a
		case <-testenv.ContextTimeout(t, time.Minute).Done():
			t.Fatalf("no claim of %s: %s", id, what)
		}
		return 0
	}
	waitState := func(want queue.State) {
		t.Helper()
		testenv.WaitFor(testenv.Context(t), t, fmt.Sprintf("%s %s in the API", id, want), func() bool {
			var v httpapi.JobView
			code := api.call(t, "GET", "/v1/topics/"+topic+"/jobs/"+id, "", &v)
			return code == 404 && want == queue.StateUnknown || code == 200 && v.State == want
		})
	}
	// A waiting job has a row on a durable topic only.
	waitingRow := queue.State("")
	firstListing := "waiting"
	if durable {
		waitingRow, firstListing = queue.StateWaiting, "waiting_sql"
	}

	// 1. Due in two hours, beyond the one-hour horizon: on a durable
	// topic, in SQL only.
	api.do(t, "POST", "/v1/topics/"+topic+"/jobs", `{"id":"`+id+`","delay_ms":7200000}`, nil)
	sameEverywhere(t, api, tab, topic, id, queue.StateWaiting, waitingRow, firstListing)

	// 2. Moved to now: the engine's worker claims it and holds it.
	api.do(t, "PATCH", "/v1/topics/"+topic+"/jobs/"+id, `{"delay_ms":0}`, nil)
	if a := claimed("after the reschedule to now"); a != 1 {
		t.Fatalf("first claim: attempt %d", a)
	}
	sameEverywhere(t, api, tab, topic, id, queue.StateInFlight, queue.StateInFlight, "in_flight")

	// 3. It fails and waits an hour for its retry.
	w.outcome <- queue.RetryAfter(errors.New("walk: try again"), time.Hour)
	waitState(queue.StateRetrying)
	sameEverywhere(t, api, tab, topic, id, queue.StateRetrying, queue.StateRetrying, "retrying")
	sameEverywhere(t, api, tab, topic, id, queue.StateRetrying, queue.StateRetrying, "waiting") // the due set holds it too

	// 4. Its retry moved to now; this attempt gives up for good.
	api.do(t, "PATCH", "/v1/topics/"+topic+"/jobs/"+id, `{"delay_ms":0}`, nil)
	if a := claimed("after the retry moved to now"); a != 2 {
		t.Fatalf("second claim: attempt %d", a)
	}
	sameEverywhere(t, api, tab, topic, id, queue.StateInFlight, queue.StateInFlight, "in_flight")
	w.outcome <- queue.SkipRetry(errors.New("walk: give up"))
	waitState(queue.StateDead)
	sameEverywhere(t, api, tab, topic, id, queue.StateDead, "", "dead")

	// 5. Requeued on a paused topic: it waits, with a fresh set of attempts
	// (a durable topic's requeue is a new job: its waiting row first).
	api.do(t, "POST", "/v1/topics/"+topic+"/pause", "", nil)
	api.do(t, "POST", "/v1/topics/"+topic+"/dead/requeue", `{"id":"`+id+`"}`, nil)
	waitState(queue.StateWaiting)
	if durable {
		if e, err := w.store.Row(testenv.Context(t), topic, id); err != nil || e.State != queue.StateWaiting || e.Attempt != 0 {
			t.Fatalf("the requeued job's row: %+v, %v; want waiting, attempt 0", e, err)
		}
	}
	sameEverywhere(t, api, tab, topic, id, queue.StateWaiting, waitingRow, "waiting")

	// 6. Resumed, it runs and succeeds: no trace anywhere.
	api.do(t, "POST", "/v1/topics/"+topic+"/resume", "", nil)
	if a := claimed("after the resume"); a != 1 {
		t.Fatalf("claim after the requeue: attempt %d", a)
	}
	w.outcome <- nil
	waitState(queue.StateUnknown)
	sameEverywhere(t, api, tab, topic, id, queue.StateUnknown, "", "")
}

// sameEverywhere checks that job id of topic is in state want in the API,
// the CLI (get, jobs --state listing) and the dashboard (the job's page,
// the listing), and that its ledger row is in state row ("" for none) in
// GET of the job, `delayq ledger list` and the dashboard's job page.
// listing "" means the job is in none (unknown).
func sameEverywhere(t *testing.T, api *server, tab context.Context, topic, id string, want, row queue.State, listing string) {
	t.Helper()
	step := fmt.Sprintf("%s as %s (row %q)", id, want, row)

	// The API: GET of the job, with its row.
	var v httpapi.JobView
	code := api.call(t, "GET", "/v1/topics/"+topic+"/jobs/"+id, "", &v)
	switch {
	case want == queue.StateUnknown && code != 404:
		t.Fatalf("%s: GET answered %d %+v, want 404", step, code, v)
	case want != queue.StateUnknown && (v.State != want || ledgerState(v.Ledger) != row):
		t.Fatalf("%s: GET shows %s, row %q", step, v.State, ledgerState(v.Ledger))
	}

	// The CLI, through the API.
	flags := []string{"--api", api.url, "--json"}
	out, exit := runCLI(t, append([]string{"get", topic, id}, flags...)...)
	if want == queue.StateUnknown {
		if exit != cli.ExitNotFound {
			t.Fatalf("%s: delayq get exited %d: %s", step, exit, out)
		}
	} else {
		var got httpapi.JobView
		if exit != 0 || json.Unmarshal(out, &got) != nil || got.State != want {
			t.Fatalf("%s: delayq get exited %d: %s", step, exit, out)
		}
	}
	out, exit = runCLI(t, append([]string{"ledger", "list", "--topic", topic}, flags...)...)
	var lp httpapi.LedgerPage
	if exit != 0 || json.Unmarshal(out, &lp) != nil {
		t.Fatalf("%s: delayq ledger list exited %d: %s", step, exit, out)
	}
	var rowInList queue.State
	for _, r := range lp.Rows {
		if r.JobID == id {
			rowInList = r.State
		}
	}
	if rowInList != row {
		t.Fatalf("%s: delayq ledger list shows the row as %q", step, rowInList)
	}
	if listing != "" {
		out, exit = runCLI(t, append([]string{"jobs", topic, "--state", listing}, flags...)...)
		var jp httpapi.JobPage
		if exit != 0 || json.Unmarshal(out, &jp) != nil {
			t.Fatalf("%s: delayq jobs --state %s exited %d: %s", step, listing, exit, out)
		}
		var inList queue.State
		for _, j := range jp.Jobs {
			if j.ID == id {
				inList = j.State
			}
		}
		if inList != want {
			t.Fatalf("%s: delayq jobs --state %s shows it as %q", step, listing, inList)
		}
	}

	// The dashboard: the job's page (its state and its row's), then the
	// listing's row.
	goHash(t, tab, "#/topics/"+topic+"/jobs/"+id)
	pageState := string(want)
	if want == queue.StateUnknown {
		pageState = "gone"
	}
	poll(t, tab, jobShown(id, pageState), step+" on its page")
	shown, err := chromedp.Run(tab, chromedp.Evaluate[string](`(() => {
		const f = (n) => { const d = document.querySelector('#job-body:not([hidden]) dd[data-field="' + n + '"]'); return d ? d.textContent.split(' (')[0] : ''; };
		return f('state') + '|' + f('row_state');
	})()`))
	if err != nil {
		t.Fatalf("%s: read the page's states: %v", step, err)
	}
	wantShown := string(want) + "|" + string(row)
	if want == queue.StateUnknown {
		wantShown = "|"
	}
	if shown != wantShown {
		t.Fatalf("%s: the dashboard's job page shows state|row %q, want %q", step, shown, wantShown)
	}
	if listing != "" {
		goHash(t, tab, "#/topics/"+topic+"/jobs?state="+listing)
		poll(t, tab, fmt.Sprintf(`document.body.dataset.view === 'jobs' && document.body.dataset.viewState === 'ready' &&
			document.querySelector('#jobs-tabs button.active').dataset.tab === %q &&
			!!document.querySelector('#jobs-table tr[data-id=%q]')`, listing, id), step+" in the dashboard's "+listing+" listing")
		cell, err := chromedp.Run(tab, chromedp.Evaluate[string](fmt.Sprintf(
			`document.querySelector('#jobs-table tr[data-id=%q]').dataset.state + '|' + document.querySelector('#jobs-table tr[data-id=%q] td:nth-child(2)').textContent`, id, id)))
		if err != nil {
			t.Fatalf("%s: read the listing's state: %v", step, err)
		}
		if cell != string(want)+"|"+string(want) {
			t.Fatalf("%s: the dashboard's %s listing shows %q", step, listing, cell)
		}
	}
}

// ledgerState is a job view's row state, "" without a row.
func ledgerState(r *httpapi.LedgerRow) queue.State {
	if r == nil {
		return ""
	}
	return r.State
}

// runCLI runs delayq's CLI in this process and returns its output and
// exit code.
func runCLI(t *testing.T, args ...string) ([]byte, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Main(testenv.Context(t), args, &out, &errOut, "test")
	if code != 0 {
		out.Write(errOut.Bytes())
	}
	return bytes.TrimSpace(out.Bytes()), code
}

// call is do that answers the status instead of failing on a 4xx.
func (s *server) call(t *testing.T, method, path, body string, out any) int {
	t.Helper()
	code, b := s.raw(t, method, path, body)
	if code < 300 && out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %s: %v", method, path, b, err)
		}
	}
	if code >= 500 {
		t.Fatalf("%s %s: %d %s", method, path, code, strings.TrimSpace(string(b)))
	}
	return code
}

package dashboard_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.opentelemetry.io/otel/trace"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// fits is a predicate's opposite: what lies beyond the viewport's right
// edge on the page shown, "" when nothing does (the document's scrollWidth
// and every rendered element's right edge).
const fits = `(() => {
	const vw = document.documentElement.clientWidth;
	const bad = [];
	for (const d of [document.documentElement, document.body]) {
		if (d.scrollWidth > vw) bad.push(d.tagName + ' scrollWidth ' + d.scrollWidth + ' > ' + vw);
	}
	for (const e of document.querySelectorAll('body *')) {
		if (e.getClientRects().length === 0) continue; // not rendered
		const r = e.getBoundingClientRect();
		if (r.right > vw + 0.5) bad.push(e.tagName + (e.id ? '#' + e.id : '') + '.' + e.className + ' right edge ' + Math.round(r.right));
	}
	return vw + ':' + bad.slice(0, 8).join('; ');
})()`

// The dashboard's pages in headless Chromium at 1280 px wide against
// `delayq serve`: each page (topics, a topic with its 24-hour charts, its
// dead tab, a job, dead letters, workers, schedules, recovery) fits the
// width; back, forward and reload keep the page; a walk from the topics
// to a topic, to one of its jobs, cancels that job; on the dead-letters
// page a selection of jobs across topics is requeued, another deleted,
// each checked in Redis.
func TestDashboardPagesInBrowser(t *testing.T) {
	needBrowser(t)
	rdb, ns := testenv.Redis(t)
	dsn := testenv.MySQLDSN(t)
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	// mail and sms have no worker: their jobs stay where the test puts them.
	mustEnqueue(t, q, "mail", queue.NewJob{ID: "mail:page:1", Payload: []byte(`{"to":"a@example.com"}`), Delay: time.Hour})
	longID := "mail:long:" + strings.Repeat("x", 180)
	for _, id := range []string{"mail:dead:a", "mail:dead:b", "mail:dead:c", longID} {
		deadJob(t, q, "mail", id, "smtp: 550 "+strings.Repeat("mailbox unavailable ", 12))
	}
	deadJob(t, q, "sms", "sms:dead:1", "gateway timeout")
	// The last 24 hours of mail as the processes' flushes leave them.
	minute := time.Now().Unix()/60 - 5
	if err := q.AddMinute(ctx, "mail", dataplane.MinuteCounts{Minute: minute, Enqueued: 50, Done: 42, Dead: 2, Backlog: 3}); err != nil {
		t.Fatal(err)
	}

	api := startServe(t, ns, dsn, false, "http://127.0.0.1:1/unused")
	// serve's own counts reach the per-minute hashes (its flush, every
	// 5 s): a job enqueued through its API, and the backlog it samples.
	api.do(t, "POST", "/v1/topics/mail/jobs", `{"id":"mail:api:1","delay_ms":3600000}`, nil)
	testenv.WaitFor(ctx, t, "serve's enqueue and backlog in mail's per-minute counts", func() bool {
		now := time.Now().Unix() / 60
		ms, err := q.Minutes(ctx, "mail", now-2, now)
		if err != nil {
			t.Fatal(err)
		}
		var enq int64
		sampled := false
		for _, m := range ms {
			enq += m.Enqueued
			sampled = sampled || m.Backlog >= 0
		}
		return enq >= 1 && sampled
	})
	browser := newBrowser(t)
	tab, console := newTab(t, browser)
	mustDo(t, tab, "a 1280 px wide window", chromedp.EmulateViewport(1280, 900))
	openDashboard(t, tab, api.url)

	// Every page fits 1280 px.
	for _, p := range []struct{ hash, ready string }{
		{"#/", `document.body.dataset.view === 'overview' && !!document.querySelector('#topics tr[data-topic="mail"]')`},
		{"#/topics/mail", `document.body.dataset.view === 'jobs' && document.body.dataset.viewState === 'ready' &&
			document.querySelector('#topic-name').textContent === 'mail' &&
			document.querySelector('#topic-settings [data-field="uniqueness_window"]').textContent.startsWith('90 min: ')`},
		{"#/topics/mail/jobs?state=dead", `document.body.dataset.view === 'jobs' && document.body.dataset.viewState === 'ready' &&
			document.querySelector('#jobs-tabs button.active').dataset.tab === 'dead'`},
		{"#/topics/mail/jobs/mail%3Apage%3A1", jobShown("mail:page:1", "waiting")},
		{"#/dead", `document.body.dataset.view === 'dead' && document.querySelectorAll('#dead tr[data-id]').length === 5`},
		{"#/workers", `document.body.dataset.view === 'workers' && document.querySelectorAll('#workers tr[data-state="live"]').length === 1 &&
			/^notify \d+\/7: hooks ×2, order_close ×1$/.test(document.querySelector('#workers .worker-pool[data-pool="notify"]')?.textContent)`},
		{"#/schedules", `document.body.dataset.view === 'schedules' && !!document.querySelector('#schedule-list tr[data-schedule="new-year"]')`},
		{"#/recovery", `document.body.dataset.view === 'recovery' && !document.querySelector('#page-recovery').hidden`},
	} {
		goHash(t, tab, p.hash)
		poll(t, tab, p.ready, "the page "+p.hash)
		waitRefreshes(t, tab, 1) // drawn with the data of a refresh
		got, err := chromedp.Run(tab, chromedp.Evaluate[string](fits))
		if err != nil {
			t.Fatal(err)
		}
		if got != "1280:" {
			t.Errorf("%s at 1280 px: %s", p.hash, got)
		}
		// A screenshot of each page in the test's artifacts (go test -artifacts).
		png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		name := strings.Trim(strings.NewReplacer("#", "", "/", "-", "?", "-", "=", "-", "%3A", "-").Replace(p.hash), "-")
		if name == "" {
			name = "topics"
		}
		if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "page-"+name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
		// Only this page shows, and the nav bar says which.
		shown, err := chromedp.Run(tab, chromedp.Evaluate[int](`[...document.querySelectorAll('main > .page')].filter((e) => e.getClientRects().length > 0).length`))
		if err != nil || shown != 1 {
			t.Errorf("%s: %d pages shown (%v), want 1", p.hash, shown, err)
		}
	}

	// A job enqueued in a span (tracing on, as serve has it) shows its
	// trace on its page.
	traced, err := dataplane.New(rdb, queue.Config{Namespace: ns, Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xab, 1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	if r, err := traced.Enqueue(trace.ContextWithSpanContext(ctx, sc), "mail", queue.NewJob{ID: "mail:traced", Delay: time.Hour}); err != nil || r.Duplicate {
		t.Fatalf("enqueue mail:traced: %+v %v", r, err)
	}
	goHash(t, tab, "#/topics/mail/jobs/mail%3Atraced")
	poll(t, tab, jobShown("mail:traced", "waiting")+` && document.querySelector('#job-fields [data-field="trace"]').textContent.startsWith('trace `+sc.TraceID().String()+` ')`, "the job's trace on its page")

	// Back, forward and reload keep the page.
	goHash(t, tab, "#/dead")
	poll(t, tab, `document.body.dataset.view === 'dead'`, "the dead page")
	goHash(t, tab, "#/workers")
	poll(t, tab, `document.body.dataset.view === 'workers' && !document.querySelector('#page-workers').hidden`, "the workers page")
	mustDo(t, tab, "back", chromedp.NavigateBack())
	poll(t, tab, `document.body.dataset.view === 'dead' && location.hash === '#/dead' && !document.querySelector('#page-dead').hidden &&
		document.querySelector('#nav a.active').dataset.page === 'dead'`, "the dead page after back")
	mustDo(t, tab, "forward", chromedp.NavigateForward())
	poll(t, tab, `document.body.dataset.view === 'workers' && location.hash === '#/workers'`, "the workers page after forward")
	goHash(t, tab, "#/topics/mail/jobs?state=dead")
	poll(t, tab, `document.body.dataset.view === 'jobs' && document.body.dataset.viewState === 'ready'`, "mail's dead tab")
	mustDo(t, tab, "reload", chromedp.Reload())
	poll(t, tab, `document.body.dataset.state === 'ready' && document.body.dataset.view === 'jobs' && document.body.dataset.viewState === 'ready' &&
		document.querySelector('#jobs-tabs button.active').dataset.tab === 'dead' && !!document.querySelector('#jobs-table tr[data-id="mail:dead:a"]')`,
		"mail's dead tab after a reload")

	// From the topics to mail, its charts of the last 24 hours, one of its
	// jobs, and a cancel from the job's page.
	goHash(t, tab, "#/")
	poll(t, tab, `!!document.querySelector('#topics tr[data-topic="mail"] a.topic-link')`, "mail's row")
	mustDo(t, tab, "open mail", chromedp.Click(chromedp.CSS(`#topics tr[data-topic="mail"] a.topic-link`)))
	poll(t, tab, `document.body.dataset.view === 'jobs' && document.body.dataset.viewState === 'ready' && location.hash === '#/topics/mail' &&
		document.querySelector('#jobs-tabs button.active').dataset.tab === 'waiting' &&
		document.querySelector('#chart-throughput').dataset.points === '1440' &&
		document.querySelector('#charts-note').textContent.startsWith('42 done, 2 dead') &&
		document.querySelector('dd[data-field="durability"]').textContent.startsWith('redis')`, "mail's page with its charts")
	mustDo(t, tab, "open the job", chromedp.Click(chromedp.CSS(`#jobs-table tr[data-id="mail:page:1"] a.job-link`)))
	poll(t, tab, jobShown("mail:page:1", "waiting"), "the job's page")
	mustDo(t, tab, "cancel the job",
		chromedp.Click(chromedp.CSS(`#job-actions button[data-action="cancel"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)),
	)
	poll(t, tab, jobShown("mail:page:1", "gone"), "the cancelled job's page")
	if info := mustGet(t, q, "mail", "mail:page:1"); info.State != queue.StateUnknown {
		t.Fatalf("after the cancel from its page the job is %s", info.State)
	}
	mustDo(t, tab, "back to the topic", chromedp.Click(chromedp.CSS(`#job-back`)))
	poll(t, tab, `location.hash === '#/topics/mail' && document.body.dataset.view === 'jobs'`, "the topic again")

	// Dead letters across topics: select one of mail and one of sms,
	// requeue them; select two others, delete them.
	goHash(t, tab, "#/dead")
	poll(t, tab, `document.querySelectorAll('#dead tr[data-id]').length === 5 && document.querySelector('#dead-bulk-requeue').disabled`, "the dead letters")
	sel := func(topic, id string) chromedp.Action[chromedp.Void] {
		return chromedp.Click(chromedp.CSS(fmt.Sprintf(`#dead input.dead-select[data-topic=%q][data-id=%q]`, topic, id)))
	}
	// Select all shown, then none: the buttons follow.
	mustDo(t, tab, "select all", chromedp.Click(chromedp.CSS(`#dead-select-all`)))
	poll(t, tab, `document.querySelector('#dead-selected').textContent === '5 selected' && !document.querySelector('#dead-bulk-delete').disabled`, "all selected")
	mustDo(t, tab, "select none", chromedp.Click(chromedp.CSS(`#dead-select-all`)))
	poll(t, tab, `document.querySelector('#dead-selected').textContent === '0 selected' && document.querySelector('#dead-bulk-delete').disabled`, "none selected")

	mustDo(t, tab, "requeue two selected",
		sel("mail", "mail:dead:a"), sel("sms", "sms:dead:1"),
		chromedp.Click(chromedp.CSS(`#dead-bulk-requeue`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)),
	)
	poll(t, tab, `document.querySelector('#dead-result').textContent.startsWith('requeued 2 of 2') &&
		!document.querySelector('#dead tr[data-id="mail:dead:a"]') && !document.querySelector('#dead tr[data-id="sms:dead:1"]')`, "the requeue of the selection")
	for _, j := range [][2]string{{"mail", "mail:dead:a"}, {"sms", "sms:dead:1"}} {
		if info := mustGet(t, q, j[0], j[1]); info.State != queue.StateWaiting {
			t.Errorf("%s/%s after the bulk requeue: %s, want waiting", j[0], j[1], info.State)
		}
	}
	mustDo(t, tab, "delete two selected",
		sel("mail", "mail:dead:b"), sel("mail", longID),
		chromedp.Click(chromedp.CSS(`#dead-bulk-delete`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)),
	)
	poll(t, tab, `document.querySelector('#dead-result').textContent.startsWith('deleted 2 of 2') &&
		document.querySelectorAll('#dead tr[data-id]').length === 1 && !!document.querySelector('#dead tr[data-id="mail:dead:c"]')`, "the delete of the selection")
	for id, want := range map[string]queue.State{"mail:dead:b": queue.StateUnknown, longID: queue.StateUnknown, "mail:dead:c": queue.StateDead} {
		if info := mustGet(t, q, "mail", id); info.State != want {
			t.Errorf("%.20s after the bulk delete: %s, want %s", id, info.State, want)
		}
	}
	if st, err := q.Stats(ctx, "mail"); err != nil || st.Dead != 1 {
		t.Errorf("mail has %d dead jobs after the bulk delete (%v), want 1", st.Dead, err)
	}
	// The one 404 the browser logs is the page of the job just cancelled.
	console.mu.Lock()
	msgs := console.msgs[:0:0]
	for _, m := range console.msgs {
		if !(strings.Contains(m.String(), "status of 404") && strings.Contains(m.URL, "/v1/topics/mail/jobs/mail%3Apage%3A1")) {
			msgs = append(msgs, m)
		}
	}
	console.msgs = msgs
	console.mu.Unlock()
	noConsoleErrors(t, "pages tab", console)
}

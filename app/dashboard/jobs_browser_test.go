package dashboard_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/jobs/orderclose"
	"github.com/delayq/delayq/queue"
)

// The job browser in headless Chromium against `delayq serve`: a topic's
// jobs open from its row, an order's close job is found by its order
// number and shown (state, attempts, ledger row, payload), a waiting job
// is cancelled after its confirmation (a refused confirmation changes
// nothing), a dead job found on the dead tab is requeued, a large payload
// is cut at 64 KiB with a note, an error text with markup stays text, a
// job's priority shows in its topic's listing and on its page, a
// durable topic is searched by id prefix, read-only mode shows no action,
// and (once the PATCH route of reschedule is there) the order's job is
// rescheduled.
func TestJobBrowserInBrowser(t *testing.T) {
	needBrowser(t)
	rdb, ns := testenv.Redis(t)
	dsn := testenv.MySQLDSN(t)
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)

	// mail has no worker: its jobs stay where the test puts them.
	mustEnqueue(t, q, "mail", queue.NewJob{ID: "mail:cancel:1", Payload: []byte(`{"to":"a@example.com"}`), Delay: time.Hour})
	big := `{"blob":"` + strings.Repeat("x", 100<<10) + `"}`
	mustEnqueue(t, q, "mail", queue.NewJob{ID: "mail:big", Payload: []byte(big), Delay: time.Hour})
	deadJob(t, q, "mail", "mail:dead:1", `smtp: <img src=x onerror="document.body.dataset.pwned=1"> refused`)
	seedDurable(t, ctx, rdb, ns, dsn)

	api := startServe(t, ns, dsn, false, "http://127.0.0.1:1/unused")
	orderNo := createOrder(t, api, dsn)
	closeJob := orderclose.JobID(orderNo)

	browser := newBrowser(t)
	tab, console := newTab(t, browser)
	openDashboard(t, tab, api.url)

	// The topic's row opens its jobs; the waiting tab lists the order's job.
	poll(t, tab, `!!document.querySelector('#topics tr[data-topic="order_close"] a.topic-link')`, "order_close's row")
	mustDo(t, tab, "open order_close's jobs", chromedp.Click(chromedp.CSS(`#topics tr[data-topic="order_close"] a.topic-link`)))
	poll(t, tab, fmt.Sprintf(`document.body.dataset.view === 'jobs' && document.body.dataset.viewState === 'ready' &&
		!!document.querySelector('#jobs-table tr[data-id=%q]') && document.querySelector('#jobs-tabs button.active').dataset.tab === 'waiting'`, closeJob),
		"the waiting jobs of order_close")

	// Find the order's job by its id, built from the order number.
	mustDo(t, tab, "search for the order's job",
		chromedp.SendKeys(chromedp.CSS(`#job-search-input`), closeJob),
		chromedp.Click(chromedp.CSS(`#job-search button[type="submit"]`)),
	)
	poll(t, tab, fmt.Sprintf(`document.body.dataset.view === 'job' && document.body.dataset.viewState === 'ready' &&
		document.querySelector('#job-id').textContent === %q && document.body.dataset.jobState === 'waiting' &&
		document.querySelector('#job-payload').textContent.includes(%q) &&
		document.querySelector('dd[data-field="attempts"]').textContent.startsWith('0 of ') &&
		!!document.querySelector('#job-actions button[data-action="cancel"]')`, closeJob, orderNo),
		"the order's job page")

	// Reschedule it to 90 minutes from now.
	t.Run("reschedule", func(t *testing.T) {
		before := time.Now()
		done := actionsDone(t, tab)
		mustDo(t, tab, "reschedule the order's job",
			chromedp.SendKeys(chromedp.CSS(`#resched-min`), "90"),
			chromedp.Click(chromedp.CSS(`#job-actions button[data-action="reschedule"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
			chromedp.Click(chromedp.CSS(`#confirm-ok`)),
			chromedp.WaitNotVisible(chromedp.CSS(`#confirm`)),
		)
		testenv.WaitFor(ctx, t, "the order's job to be due in 90 minutes", func() bool {
			info := mustGet(t, q, "order_close", closeJob)
			due := time.UnixMilli(info.Score)
			return info.State == queue.StateWaiting && due.After(before.Add(89*time.Minute)) && due.Before(time.Now().Add(91*time.Minute))
		})
		poll(t, tab, fmt.Sprintf(`Number(document.body.dataset.actions) > %d`, done), "the page after the reschedule")
		// To a time typed in UTC, the page's format: due exactly then.
		to := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
		done = actionsDone(t, tab)
		mustDo(t, tab, "reschedule the order's job to a UTC time",
			chromedp.SendKeys(chromedp.CSS(`#resched-at`), to.Format("2006-01-02 15:04:05")),
			chromedp.Click(chromedp.CSS(`#job-actions button[data-action="reschedule"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
			chromedp.Click(chromedp.CSS(`#confirm-ok`)),
			chromedp.WaitNotVisible(chromedp.CSS(`#confirm`)),
		)
		testenv.WaitFor(ctx, t, "the order's job to be due at the UTC time typed", func() bool {
			return mustGet(t, q, "order_close", closeJob).Score == to.UnixMilli()
		})
		poll(t, tab, fmt.Sprintf(`Number(document.body.dataset.actions) > %d`, done), "the page after the second reschedule")
		// Run now: due at once, serve's worker runs it; the close handler
		// finds the order inside its payment window and retries at the
		// deadline, which shows that it ran.
		mustDo(t, tab, "run the order's job now",
			chromedp.Click(chromedp.CSS(`#job-actions button[data-action="run-now"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
			chromedp.Click(chromedp.CSS(`#confirm-ok`)),
		)
		testenv.WaitFor(ctx, t, "the order's job to run", func() bool {
			info := mustGet(t, q, "order_close", closeJob)
			return info.Job != nil && info.Job.Attempt >= 1 && strings.Contains(info.Job.LastError, "pay deadline")
		})
	})

	// Cancel a waiting job: a refused confirmation leaves it, a confirmed
	// one removes it and the page says it is gone.
	goHash(t, tab, "#/topics/mail/jobs/mail%3Acancel%3A1")
	poll(t, tab, jobShown("mail:cancel:1", "waiting"), "mail:cancel:1's page")
	cancelBtn := chromedp.CSS(`#job-actions button[data-action="cancel"]`)
	mustDo(t, tab, "refuse the cancel",
		chromedp.Click(cancelBtn),
		chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
		chromedp.Click(chromedp.CSS(`#confirm-cancel`)),
		chromedp.WaitNotVisible(chromedp.CSS(`#confirm`)),
	)
	waitRefreshes(t, tab, 1)
	if info := mustGet(t, q, "mail", "mail:cancel:1"); info.State != queue.StateWaiting {
		t.Fatalf("after a refused cancel the job is %s", info.State)
	}
	mustDo(t, tab, "cancel the job",
		chromedp.Click(cancelBtn),
		chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)),
	)
	poll(t, tab, jobShown("mail:cancel:1", "gone")+` && !document.querySelector('#job-missing').hidden`, "the cancelled job's page")
	// The page says how it ended, from its history, and lists the row;
	// times are UTC, in the CLI's format.
	poll(t, tab, `document.querySelector('#job-missing').textContent.includes('cancelled at') &&
		!document.querySelector('#job-history').hidden &&
		document.querySelectorAll('#job-history tbody tr[data-outcome="cancelled"]').length === 1 &&
		/\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ/.test(document.querySelector('#job-history tbody td:nth-child(5)').textContent)`,
		"the cancelled job's history")
	// The topic's finished tab lists it, from the history, with its outcome.
	goHash(t, tab, "#/topics/mail/jobs?state=finished")
	poll(t, tab, `document.querySelector('#jobs-tabs button[data-tab="finished"].active') !== null &&
		document.querySelector('#jobs-table tbody tr[data-id="mail:cancel:1"][data-state="cancelled"] td[data-field="priority"]')?.textContent === '–' &&
		!document.querySelector('#jobs-note').hidden`, "the finished tab")
	if info := mustGet(t, q, "mail", "mail:cancel:1"); info.State != queue.StateUnknown {
		t.Fatalf("after the cancel the job is %s", info.State)
	}

	// Cancel a running job (held by this test's claim, a topic no worker
	// of serve's runs): the page asks, the job stays held with its cancel
	// requested, and the page says so instead of offering it again.
	mustEnqueue(t, q, "held", queue.NewJob{ID: "held:1"})
	if cl, err := q.Claim(ctx, "held", 1, time.Hour); err != nil || len(cl.Jobs) != 1 {
		t.Fatalf("claim held:1: %+v, %v", cl, err)
	}
	goHash(t, tab, "#/topics/held/jobs/held%3A1")
	poll(t, tab, jobShown("held:1", "in_flight")+` && !!document.querySelector('#job-actions button[data-action="cancel-run"]')`, "held:1's page with its cancel button")
	mustDo(t, tab, "cancel the running job",
		chromedp.Click(chromedp.CSS(`#job-actions button[data-action="cancel-run"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)),
	)
	testenv.WaitFor(ctx, t, "held:1's cancel requested", func() bool {
		return mustGet(t, q, "held", "held:1").CancelRequestedAt > 0
	})
	poll(t, tab, jobShown("held:1", "in_flight")+` && !!document.querySelector('dd[data-field="cancel_requested"]') &&
		!document.querySelector('#job-actions button[data-action="cancel-run"]')`, "held:1's page with its cancel requested")

	// An order whose window is over is closed by serve's worker: its job's
	// page lists the succeeded run with the result the close recorded.
	closedNo := createOrderWindow(t, api, dsn, time.Millisecond)
	testenv.WaitFor(ctx, t, "the short order's close job to finish", func() bool {
		return mustGet(t, q, "order_close", orderclose.JobID(closedNo)).State == queue.StateUnknown
	})
	goHash(t, tab, "#/topics/order_close/jobs/"+url.PathEscape(orderclose.JobID(closedNo)))
	poll(t, tab, fmt.Sprintf(`document.querySelectorAll('#job-history tbody tr[data-outcome="succeeded"]').length === 1 &&
		document.querySelector('#job-history td[data-field="result"]').textContent.includes('"did":"closed"') &&
		document.querySelector('#job-history td[data-field="result"]').textContent.includes(%q)`, closedNo), "the closed order's job history with its result")

	// A job of a partitioned topic shows its partition.
	if _, err := q.SetPartitions(ctx, "parted", 4); err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, q, "parted", queue.NewJob{ID: "p:1", Delay: time.Hour})
	goHash(t, tab, "#/topics/parted/jobs/p%3A1")
	poll(t, tab, jobShown("p:1", "waiting")+` && document.querySelector('dd[data-field="partition"]').textContent.startsWith('parted~4.')`,
		"the partitioned job's page with its partition")

	// A job of raised priority shows it in its topic's listing, next to
	// one of the default (mail:big, 0), and on its page.
	mustEnqueue(t, q, "mail", queue.NewJob{ID: "mail:urgent", Priority: 3, Delay: time.Hour})
	goHash(t, tab, "#/topics/mail/jobs?state=waiting")
	poll(t, tab, `document.body.dataset.view === 'jobs' && document.body.dataset.viewState === 'ready' &&
		document.querySelector('#jobs-table tr[data-id="mail:urgent"] td[data-field="priority"]')?.textContent === '3' &&
		document.querySelector('#jobs-table tr[data-id="mail:big"] td[data-field="priority"]')?.textContent === '0'`,
		"mail's waiting jobs with their priorities")
	mustDo(t, tab, "open the urgent job", chromedp.Click(chromedp.CSS(`#jobs-table tr[data-id="mail:urgent"] a.job-link`)))
	poll(t, tab, jobShown("mail:urgent", "waiting")+` && document.querySelector('dd[data-field="priority"]').textContent === '3'`,
		"the urgent job's page with its priority")

	// Jobs of an ordering key show it, in the listing and on the page; the
	// second waits parked behind the first.
	mustEnqueue(t, q, "mail", queue.NewJob{ID: "mail:seq:1", OrderingKey: "cust:7", Delay: time.Hour})
	mustEnqueue(t, q, "mail", queue.NewJob{ID: "mail:seq:2", OrderingKey: "cust:7", Delay: time.Hour})
	goHash(t, tab, "#/topics/mail/jobs?state=waiting")
	poll(t, tab, `document.body.dataset.view === 'jobs' && document.body.dataset.viewState === 'ready' &&
		document.querySelector('#jobs-table tr[data-id="mail:seq:1"] span[data-field="ordering_key"]')?.textContent === 'key cust:7' &&
		document.querySelector('#jobs-table tr[data-id="mail:seq:2"] span[data-field="ordering_key"]')?.textContent === 'parked · key cust:7'`,
		"mail's waiting jobs with their ordering key")
	goHash(t, tab, "#/topics/mail/jobs/mail%3Aseq%3A2")
	poll(t, tab, jobShown("mail:seq:2", "waiting")+` && document.querySelector('dd[data-field="ordering_key"]').textContent.startsWith('cust:7 (parked')`,
		"the parked job's page with its ordering key")

	// A large payload is cut, with a note.
	goHash(t, tab, "#/topics/mail/jobs/mail%3Abig")
	poll(t, tab, jobShown("mail:big", "waiting")+` &&
		document.querySelector('#job-payload').dataset.cut === 'true' && document.querySelector('#job-payload').textContent.length < 70000 &&
		document.querySelector('#job-payload-note').textContent.includes('first 64 KiB shown')`, "the cut payload")

	// The dead tab lists the dead job with its error as text; its page
	// requeues it.
	goHash(t, tab, "#/topics/mail/jobs?state=dead")
	poll(t, tab, `!!document.querySelector('#jobs-table tr[data-id="mail:dead:1"]') && document.querySelector('#jobs-tabs button.active').dataset.tab === 'dead' &&
		document.querySelector('#jobs-table tr[data-id="mail:dead:1"] td.err').textContent.includes('<img')`, "the dead tab")
	mustDo(t, tab, "open the dead job", chromedp.Click(chromedp.CSS(`#jobs-table tr[data-id="mail:dead:1"] a.job-link`)))
	poll(t, tab, jobShown("mail:dead:1", "dead")+` && document.querySelector('dd[data-field="last_error"]').textContent.includes('onerror')`, "the dead job's page")
	mustDo(t, tab, "requeue the dead job",
		chromedp.Click(chromedp.CSS(`#job-actions button[data-action="requeue"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)),
	)
	poll(t, tab, jobShown("mail:dead:1", "waiting"), "the requeued job's page")
	if info := mustGet(t, q, "mail", "mail:dead:1"); info.State != queue.StateWaiting {
		t.Fatalf("after the requeue the job is %s", info.State)
	}
	if pwned, err := chromedp.Run(tab, chromedp.Evaluate[bool](`document.body.dataset.pwned === '1' || !!document.querySelector('main img')`)); err != nil || pwned {
		t.Errorf("markup in an error text became an element (%v)", err)
	}

	// A durable topic: an unknown exact id is taken as an id prefix.
	goHash(t, tab, "#/topics/invoices/jobs?state=waiting")
	poll(t, tab, `document.body.dataset.viewState === 'ready' && document.querySelector('#jobs-topic').textContent === 'invoices' &&
		!!document.querySelector('#jobs-tabs button[data-tab="waiting_sql"]')`, "the durable topic's tabs")
	mustDo(t, tab, "search invoices by prefix",
		chromedp.SendKeys(chromedp.CSS(`#job-search-input`), "inv:later"),
		chromedp.Click(chromedp.CSS(`#job-search button[type="submit"]`)),
	)
	poll(t, tab, `document.body.dataset.viewState === 'ready' && location.hash.includes('prefix=') &&
		[...document.querySelectorAll('#jobs-table tbody tr')].map((tr) => tr.dataset.id).join(',') === 'inv:later:0,inv:later:1'`, "the prefix search")
	// Read-only: the same pages, no action.
	ro := startServe(t, ns, dsn, true, "http://127.0.0.1:1/unused")
	roTab, roConsole := newTab(t, browser)
	openDashboard(t, roTab, ro.url)
	goHash(t, roTab, "#/topics/mail/jobs/mail%3Abig")
	poll(t, roTab, jobShown("mail:big", "waiting")+` &&
		document.querySelector('#job-actions').children.length === 0 && document.querySelectorAll('[data-action]').length === 0`,
		"the job page without actions in read-only mode")
	noConsoleErrors(t, "read-only job browser tab", roConsole)

	// The browser logs every 404 it loads; the job browser's are the
	// answers of a search for an id that is not there (then tried as a
	// prefix) and of the page of a job just cancelled.
	var expected404 []string
	console.mu.Lock()
	msgs := console.msgs[:0:0]
	for _, m := range console.msgs {
		if strings.Contains(m.String(), "status of 404") &&
			(strings.Contains(m.URL, "/v1/topics/invoices/jobs/inv%3Alater") || strings.Contains(m.URL, "/v1/topics/mail/jobs/mail%3Acancel%3A1") ||
				strings.Contains(m.URL, "/v1/topics/order_close/jobs/"+strings.ReplaceAll(orderclose.JobID(closedNo), ":", "%3A"))) {
			expected404 = append(expected404, m.URL)
			continue
		}
		msgs = append(msgs, m)
	}
	console.msgs = msgs
	console.mu.Unlock()
	t.Logf("expected 404s: %v", expected404)
	noConsoleErrors(t, "job browser tab", console)
}

// actionsDone is how many actions the page has done and drawn.
func actionsDone(t *testing.T, tab context.Context) int {
	t.Helper()
	n, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.body.dataset.actions || '0'`))
	if err != nil {
		t.Fatal(err)
	}
	var k int
	fmt.Sscan(n, &k)
	return k
}

// jobShown is the predicate of a job page fully drawn for id, in state
// ("gone" when there is no such job): a page still drawing the previous
// job shows neither.
func jobShown(id, state string) string {
	return fmt.Sprintf(`(document.body.dataset.view === 'job' && document.body.dataset.viewState === 'ready' && document.body.dataset.jobId === %q && document.body.dataset.jobState === %q)`, id, state)
}

// goHash moves the tab to a hash route of the dashboard.
func goHash(t *testing.T, tab context.Context, hash string) {
	t.Helper()
	mustDo(t, tab, "go to "+hash, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = %q`, hash)))
}

// createOrder creates one order waiting an hour for its payment and
// returns its number: its close job waits in order_close.
func createOrder(t *testing.T, s *server, dsn string) string {
	t.Helper()
	return createOrderWindow(t, s, dsn, time.Hour)
}

// createOrderWindow is createOrder with the order's payment window.
func createOrderWindow(t *testing.T, s *server, dsn string, window time.Duration) string {
	t.Helper()
	db, err := gorm.Open(mysql.Open(dsn), &gorm.Config{Logger: logger.Default.LogMode(logger.Silent)})
	if err != nil {
		t.Fatal(err)
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	if err := orderclose.SeedSKUs(testenv.Context(t), db, orderclose.SKU{SKU: "mug", Stock: 100, PriceCents: 1200}); err != nil {
		t.Fatal(err)
	}
	var o struct {
		OrderNo string `json:"order_no"`
	}
	s.do(t, "POST", "/v1/orders", fmt.Sprintf(`{"user":"u1","items":[{"sku":"mug","quantity":1}],"payment_window_ms":%d}`, window.Milliseconds()), &o)
	if o.OrderNo == "" {
		t.Fatal("the order has no number")
	}
	return o.OrderNo
}

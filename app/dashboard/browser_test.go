package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/delayq/delayq/app/cli"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/jobs/orderclose"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// chromiumPath is Debian's Chromium; scripts/test-services.sh (make test)
// installs it when it is missing.
const chromiumPath = "/usr/bin/chromium"

const testToken = "dashboard-test-token-0123456789"

// The dashboard in headless Chromium against `delayq serve` on the real
// test Redis and MariaDB: the page asks for the token and loads without a
// console error, its numbers match the API's, the read-only mode shows no
// button that changes state, a confirmation guards every action, a dead
// letter requeued with its button leaves the dead list and runs, purge
// empties a topic's dead letters, a topic paused with its button shows its
// badge until resumed, and "run recovery now" reports its run.
// An HTTP-target topic whose receiver answers 500 shows its target and the
// failure, and neither the answer's body nor the payload. A screenshot of
// the dashboard is saved in the test's artifact directory (go test
// -artifacts keeps it).
func TestDashboardInBrowser(t *testing.T) {
	needBrowser(t)
	rdb, ns := testenv.Redis(t)
	dsn := testenv.MySQLDSN(t)
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)

	// Before serve starts: a topic no worker handles ("mail": three jobs due
	// in an hour, two overdue) and two dead letters, one in a topic serve
	// runs (the smoke check's) and one in "mail".
	deadJob(t, q, cli.SmokeTopic, "smoke:dead:1", "smoke handler exploded: boom")
	deadJob(t, q, "mail", "mail:dead:1", "smtp: 550 mailbox unavailable")
	for i := range 3 {
		mustEnqueue(t, q, "mail", queue.NewJob{ID: fmt.Sprintf("mail:later:%d", i), Delay: time.Hour})
	}
	for i := range 2 {
		mustEnqueue(t, q, "mail", queue.NewJob{ID: fmt.Sprintf("mail:late:%d", i), RunAt: time.Now().Add(-time.Minute).UnixMilli()})
	}

	seedDurable(t, ctx, rdb, ns, dsn)

	// An HTTP-target topic whose receiver answers 500 (with a body that
	// must not show); its job retries in a minute, after the test.
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "card 4242 declined")
	}))
	t.Cleanup(hook.Close)
	hookURL := hook.URL + "/hook?token=hidden"

	api := startServe(t, ns, dsn, false, hookURL)
	seedOrders(t, ctx, api, dsn)
	mustEnqueue(t, q, "hooks", queue.NewJob{ID: "hook:1", Payload: []byte(`{"card":"4242"}`), MaxAttempts: 20})

	browser := newBrowser(t)
	tab, console := newTab(t, browser)
	openDashboard(t, tab, api.url)
	waitNumbersMatch(t, tab, api)
	// The durable topic: its badge, its jobs in SQL beyond the horizon (the
	// relay counted them at its start), the reload that pushed the job whose
	// push was lost, and the relay's last pass; mail is a redis topic.
	poll(t, tab, `(() => {
		const tr = document.querySelector('#topics tr[data-topic="invoices"]');
		const sql = tr && tr.querySelector('td[data-field="sql_beyond"]');
		const reloaded = tr && tr.querySelector('[data-relay="reloaded"]');
		return tr && tr.querySelector('.badge').dataset.durability === 'durable' && sql.dataset.value === '2' && sql.dataset.waiting === '4' &&
			reloaded && reloaded.textContent === '1' && tr.querySelector('[data-relay="relayed"]').textContent === '0' &&
			!document.querySelector('#relay').hidden && Number(document.querySelector('#relay-passes').textContent.replace(/,/g, '')) > 0 &&
			document.querySelector('#relay-last-ok').textContent.endsWith('ago');
	})()`, "the durable topic's badge, SQL counts and relay pushes")
	if v := metricValue(t, api, `delayq_durable_waiting_jobs{topic="invoices",where="beyond"}`); v != 2 {
		t.Errorf("delayq_durable_waiting_jobs beyond the horizon of invoices is %v, want 2 (as the page shows)", v)
	}
	poll(t, tab, `(() => {
		const tr = document.querySelector('#topics tr[data-topic="mail"]');
		return tr && tr.querySelector('.badge').dataset.durability === 'redis' && tr.querySelector('td[data-field="sql_beyond"]').textContent === '–' &&
			tr.querySelector('.relay-line').hidden;
	})()`, "mail's redis badge")
	// mail has jobs due and no worker handles it: flagged; the smoke topic,
	// which serve's worker handles, is not.
	poll(t, tab, fmt.Sprintf(`(() => {
		const mail = document.querySelector('#topics tr[data-topic="mail"]');
		const smoke = document.querySelector('#topics tr[data-topic=%q]');
		return mail && mail.dataset.unconsumed === 'true' && !mail.querySelector('.badge.no-worker').hidden &&
			smoke && smoke.dataset.unconsumed === 'false' && smoke.querySelector('.badge.no-worker').hidden;
	})()`, cli.SmokeTopic), "mail's no-worker badge")
	if v := metricValue(t, api, `delayq_topic_consumers{topic="mail"}`); v != 0 {
		t.Errorf("delayq_topic_consumers of mail is %v, want 0", v)
	}
	if v := metricValue(t, api, `delayq_workers{state="live"}`); v != 1 {
		t.Errorf("delayq_workers live is %v, want serve's 1", v)
	}

	// The target topic: its method and URL without the query, and the 500
	// with its job and time; neither the answer's body nor the payload.
	poll(t, tab, fmt.Sprintf(`(() => {
		const tr = document.querySelector('#topics tr[data-topic="hooks"]');
		const line = tr && tr.querySelector('.target-line');
		const f = line && line.querySelector('li[data-status="500"]');
		return line && !line.hidden && line.querySelector('[data-target="method"]').textContent === 'POST' &&
			line.querySelector('[data-target="url"]').textContent === %q &&
			f && f.textContent.includes('HTTP 500 Internal Server Error') && f.textContent.includes('hook:1') && f.textContent.includes('ago') &&
			!tr.textContent.includes('4242') && !tr.textContent.includes('hidden');
	})()`, hook.URL+"/hook"), "the target topic with its 500")
	poll(t, tab, `document.querySelector('#topics tr[data-topic="mail"] .target-line').hidden`, "no target on mail")
	// The target topic's rate limit (burst by default 20/10 = 2); mail has none.
	poll(t, tab, `(() => {
		const line = document.querySelector('#topics tr[data-topic="hooks"] .rate-line');
		const none = document.querySelector('#topics tr[data-topic="mail"] .rate-line');
		return line && !line.hidden && line.querySelector('[data-rate="per_second"]').textContent === '20' &&
			line.querySelector('[data-rate="burst"]').textContent === '2' && none && none.hidden;
	})()`, "the rate limit of the target topic")

	// The periodic schedule with its next run (no tick during the test), on
	// its page.
	goHash(t, tab, "#/schedules")
	poll(t, tab, `(() => {
		const tr = document.querySelector('#schedules tr[data-schedule="new-year"]');
		return !document.querySelector('#schedules').hidden && tr && tr.querySelector('.next-run').textContent.includes('(in ') &&
			tr.textContent.includes('greetings') && tr.textContent.includes('never');
	})()`, "the schedule with its next run")
	goHash(t, tab, "#/")
	poll(t, tab, `!document.querySelector('#page-topics').hidden`, "the topics page again")

	shot := filepath.Join(t.ArtifactDir(), "dashboard.png")
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the dashboard: %s (%d bytes)", shot, len(png))

	// Read-only: a second serve on the same backends shows the same dead
	// letters, and no button that changes state.
	ro := startServe(t, ns, dsn, true, hookURL)
	roTab, roConsole := newTab(t, browser)
	openDashboard(t, roTab, ro.url)
	poll(t, roTab, `document.querySelectorAll('#dead tr[data-id]').length === 2`, "the dead letters in read-only mode")
	waitRefreshes(t, roTab, 1)
	poll(t, roTab, `document.querySelector('#error').hidden && document.querySelector('#status').textContent.startsWith('updated')`,
		"read-only refreshes without an error")
	n, err := chromedp.Run(roTab, chromedp.Evaluate[int](`document.querySelectorAll('[data-action], #dead button, #run-recovery').length`))
	if err != nil || n != 0 {
		t.Errorf("read-only mode shows %d state-changing buttons (%v), want none", n, err)
	}
	if hidden, err := chromedp.Run(roTab, chromedp.Evaluate[bool](`document.querySelector('#mode').hidden`)); err != nil || hidden {
		t.Errorf("the read-only badge is hidden (%v)", err)
	}
	// This serve runs no relay: the durability still shows, no SQL counts.
	poll(t, roTab, `(() => {
		const tr = document.querySelector('#topics tr[data-topic="invoices"]');
		return tr && tr.querySelector('.badge').dataset.durability === 'durable' &&
			tr.querySelector('td[data-field="sql_beyond"]').textContent === '–' && document.querySelector('#relay').hidden;
	})()`, "the durable badge without a relay")
	noConsoleErrors(t, "read-only tab", roConsole)

	// A confirmation guards the action: cancelled, nothing changes. The
	// dead letters are on their page.
	goHash(t, tab, "#/dead")
	poll(t, tab, `!document.querySelector('#page-dead').hidden && !!document.querySelector('#dead tr[data-id="smoke:dead:1"]')`, "the dead-letters page")
	requeue := chromedp.CSS(`#dead button[data-action="requeue"][data-id="smoke:dead:1"]`)
	mustDo(t, tab, "cancel a requeue",
		chromedp.Click(requeue),
		chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
		chromedp.Click(chromedp.CSS(`#confirm-cancel`)),
		chromedp.WaitNotVisible(chromedp.CSS(`#confirm`)),
	)
	waitRefreshes(t, tab, 2)
	if info := mustGet(t, q, cli.SmokeTopic, "smoke:dead:1"); info.State != queue.StateDead {
		t.Fatalf("after a cancelled requeue the job is %s, want dead", info.State)
	}

	// Requeue with the button: the job leaves the dead list and runs (the
	// smoke handler succeeds: the job completes and is gone from Redis).
	mustDo(t, tab, "requeue a dead letter",
		chromedp.Click(requeue),
		chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)),
	)
	poll(t, tab, `!document.querySelector('#dead tr[data-id="smoke:dead:1"]')`, "the requeued job leaving the dead list")
	testenv.WaitFor(testenv.Context(t), t, "the requeued job to run and complete", func() bool {
		return mustGet(t, q, cli.SmokeTopic, "smoke:dead:1").State == queue.StateUnknown
	})
	if v := metricValue(t, api, `delayq_jobs_completed_total{topic="delayq.smoke"}`); v < 1 {
		t.Errorf("delayq_jobs_completed_total of the smoke topic is %v after the requeued job ran", v)
	}

	// Purge all of a topic's dead letters.
	mustDo(t, tab, "purge the dead letters of mail",
		chromedp.Click(chromedp.CSS(`#dead button[data-action="purge"][data-topic="mail"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)),
	)
	poll(t, tab, `document.querySelectorAll('#dead tr[data-id]').length === 0 && !document.querySelector('#no-dead').hidden`, "the dead list to empty")
	if st, err := q.Stats(ctx, "mail"); err != nil || st.Dead != 0 {
		t.Errorf("mail has %d dead jobs after the purge (%v)", st.Dead, err)
	}

	// Pause mail with its button (confirmed): the badge shows, the workers'
	// Redis key and the gauge say so, who is the token's fingerprint; then
	// resume it.
	goHash(t, tab, "#/")
	mustDo(t, tab, "pause mail",
		chromedp.Click(chromedp.CSS(`#topics tr[data-topic="mail"] button[data-action="pause"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)),
	)
	poll(t, tab, `(() => {
		const tr = document.querySelector('#topics tr[data-topic="mail"]');
		const badge = tr && tr.querySelector('.badge.paused');
		return tr.dataset.paused === 'true' && badge && !badge.hidden && badge.title.includes('by token:') &&
			tr.querySelector('button[data-action="resume"]') !== null;
	})()`, "mail's paused badge and resume button")
	if st, err := q.PauseOf(ctx, "mail"); err != nil || !st.Paused || !strings.HasPrefix(st.By, "token:") {
		t.Fatalf("mail after the pause button: %+v, %v", st, err)
	}
	testenv.WaitFor(ctx, t, "delayq_topic_paused of mail to be 1", func() bool {
		return metricValue(t, api, `delayq_topic_paused{topic="mail"}`) == 1
	})
	mustDo(t, tab, "resume mail",
		chromedp.Click(chromedp.CSS(`#topics tr[data-topic="mail"] button[data-action="resume"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)),
	)
	poll(t, tab, `(() => {
		const tr = document.querySelector('#topics tr[data-topic="mail"]');
		return tr.dataset.paused === 'false' && tr.querySelector('.badge.paused').hidden &&
			tr.querySelector('button[data-action="pause"]') !== null;
	})()`, "mail running again")
	if st, err := q.PauseOf(ctx, "mail"); err != nil || st.Paused {
		t.Fatalf("mail after the resume button: %+v, %v", st, err)
	}

	// Run recovery now, on its page.
	goHash(t, tab, "#/recovery")
	mustDo(t, tab, "run recovery now",
		chromedp.Click(chromedp.CSS(`#run-recovery`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)),
	)
	poll(t, tab, `!document.querySelector('#recovery-result').hidden && document.querySelector('#recovery-result').textContent.startsWith('recovery ran')`, "the recovery result")
	waitNumbersMatch(t, tab, api)
	noConsoleErrors(t, "main tab", console)
}

// server is a running `delayq serve`.
type server struct {
	url string
}

// needBrowser skips a browser end-to-end test in -short mode, and where
// Chromium is not installed (make test installs it).
func needBrowser(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("browser end-to-end test: skipped in -short mode")
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("Chromium is not installed at %s (%v): scripts/test-services.sh installs it with apt-get when run as root (make test)", chromiumPath, err)
	}
}

// startServe runs `delayq serve` in this process on the test's Redis
// namespace and database until the test ends, with topic hooks delivered
// to hookURL; readOnly serves the API and dashboard only, in read-only
// mode.
func startServe(t *testing.T, ns, dsn string, readOnly bool, hookURL string) *server {
	t.Helper()
	port := testenv.FreePort(t)
	cfg := fmt.Sprintf(`log: {level: warn, format: json}
redis: {mode: single, addrs: [%q], namespace: %q}
sql: {driver: mysql, dsn: %q}
http: {listen: "127.0.0.1:%d", token: %q, read_only: %t}
worker: {lease: 3s, max_idle: 200ms, shutdown_timeout: 5s, topics: {hooks: {backoff_base: 1m, rate_limit: 20, target: {url: %q}}},
  pools: {notify: {concurrency: 7, topics: {hooks: 2, order_close: 1}}}}
recovery: {spec: "@every 10s", grace: 5s}
queue: {horizon: 1h, topics: {invoices: {durability: durable}, mail: {unique_for: 90m}}}
orders: {enabled: true, sweeper_spec: "@every 1h"}
dashboard: {sample_every: 500ms, history: 1m}
tracing: {enabled: true, exporter: global}
periodic: [{name: new-year, spec: "0 0 0 1 1 *", topic: greetings}]
`, redisAddr(), ns, dsn, port, testToken, readOnly, hookURL)
	path := filepath.Join(t.TempDir(), "delayq.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"serve", "--config", path}
	if readOnly {
		args = append(args, "--no-workers", "--no-recovery", "--no-sweeper")
	}
	ctx, cancel := context.WithCancel(context.Background())
	var logs testenv.SyncBuffer
	done := make(chan int, 1)
	go func() { done <- cli.Main(ctx, args, io.Discard, &logs, "test") }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("serve (read-only %t) exited %d:\n%s", readOnly, code, logs.String())
			}
		case <-time.After(time.Minute):
			t.Errorf("serve (read-only %t) did not stop within a minute", readOnly)
		}
		if t.Failed() {
			t.Logf("serve (read-only %t) logs:\n%s", readOnly, logs.String())
		}
	})
	s := &server{url: fmt.Sprintf("http://127.0.0.1:%d", port)}
	testenv.WaitFor(testenv.Context(t), t, "serve to answer /readyz", func() bool {
		select {
		case code := <-done:
			t.Fatalf("serve exited %d at start:\n%s", code, logs.String())
		default:
		}
		resp, err := http.Get(s.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return s
}

// seedDurable enqueues to the durable topic invoices before serve starts:
// two jobs beyond the horizon (in SQL only), one within it (pushed), and
// one committed whose push was lost (the transactional enqueue without its
// Push): serve's relay finds it on its first pass, a reload.
func seedDurable(t *testing.T, ctx context.Context, rdb redis.UniversalClient, ns, dsn string) {
	t.Helper()
	db, err := gorm.Open(mysql.Open(dsn), &gorm.Config{Logger: logger.Default.LogMode(logger.Silent)})
	if err != nil {
		t.Fatal(err)
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	led, err := ledger.New(db, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := led.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns, Store: led, Horizon: time.Hour,
		TopicDurability: map[string]queue.Durability{"invoices": queue.DurabilityDurable}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		mustEnqueue(t, q, "invoices", queue.NewJob{ID: fmt.Sprintf("inv:later:%d", i), Delay: 3 * time.Hour})
	}
	mustEnqueue(t, q, "invoices", queue.NewJob{ID: "inv:soon", Delay: 30 * time.Minute})
	if _, err := q.EnqueueTx(ctx, led, "invoices", queue.NewJob{ID: "inv:lost", Delay: 20 * time.Minute}); err != nil {
		t.Fatal(err)
	}
}

// do calls the API with the token and decodes its JSON answer into out;
// an answer that is not a success fails the test.
func (s *server) do(t *testing.T, method, path, body string, out any) {
	t.Helper()
	code, b := s.raw(t, method, path, body)
	if code >= 300 {
		t.Fatalf("%s %s: %d %s", method, path, code, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %s: %v", method, path, b, err)
		}
	}
}

// raw calls the API with the token and returns the status and the body.
func (s *server) raw(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read the answer: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// seedOrders gives the orders module SKUs and traffic: two orders waiting
// an hour for their payment, and six with a 300 ms window of which two are
// paid and four are closed by their close job.
func seedOrders(t *testing.T, ctx context.Context, s *server, dsn string) {
	t.Helper()
	db, err := gorm.Open(mysql.Open(dsn), &gorm.Config{Logger: logger.Default.LogMode(logger.Silent)})
	if err != nil {
		t.Fatal(err)
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	if err := orderclose.SeedSKUs(ctx, db, orderclose.SKU{SKU: "mug", Stock: 100, PriceCents: 1200},
		orderclose.SKU{SKU: "tea", Stock: 500, PriceCents: 450}); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		window := 300
		if i < 2 {
			window = 3600_000
		}
		var o struct {
			OrderNo string `json:"order_no"`
		}
		s.do(t, "POST", "/v1/orders", fmt.Sprintf(`{"user":"u%d","items":[{"sku":"mug","quantity":1},{"sku":"tea","quantity":2}],"payment_window_ms":%d}`, i, window), &o)
		if i == 2 || i == 3 {
			s.do(t, "POST", "/v1/orders/"+o.OrderNo+"/pay", "", nil)
		}
	}
	testenv.WaitFor(testenv.Context(t), t, "four orders closed by their close job", func() bool {
		var sum struct {
			Orders struct {
				Closed int64 `json:"closed"`
			} `json:"orders"`
		}
		s.do(t, "GET", "/v1/orders/summary", "", &sum)
		return sum.Orders.Closed == 4
	})
}

// newBrowser starts headless Chromium with a fresh profile; it stops when
// the test ends.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	// The first Run starts the browser; its context must have no timeout.
	if err := chromedp.Do(browser); err != nil {
		cancelBrowser()
		cancelAlloc()
		t.Fatalf("starting %s: %v", chromiumPath, err)
	}
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	return browser
}

// consoleLog collects what a tab writes to its console.
type consoleLog struct {
	mu   sync.Mutex
	msgs []chromedp.ConsoleMessage
}

// newTab opens a tab of browser and collects its console.
func newTab(t *testing.T, browser context.Context) (context.Context, *consoleLog) {
	t.Helper()
	tab, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	if err := chromedp.Do(tab); err != nil {
		t.Fatal(err)
	}
	log := &consoleLog{}
	msgs := chromedp.Console(tab)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			log.mu.Lock()
			log.msgs = append(log.msgs, m)
			log.mu.Unlock()
		}
	}()
	return tab, log
}

func noConsoleErrors(t *testing.T, what string, log *consoleLog) {
	t.Helper()
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, m := range log.msgs {
		if m.Type == chromedp.ConsoleError || m.IsException() {
			t.Errorf("%s: console %s (%s:%d)", what, m, m.URL, m.Line+1)
		} else {
			t.Logf("%s: console %s", what, m)
		}
	}
}

// openDashboard loads the page, gives it the token it asks for, and waits
// for its first complete refresh.
func openDashboard(t *testing.T, tab context.Context, url string) {
	t.Helper()
	mustDo(t, tab, "open the dashboard and give the token",
		chromedp.Navigate(url+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#token-form`)),
		chromedp.SendKeys(chromedp.CSS(`#token-input`), testToken),
		chromedp.Click(chromedp.CSS(`#token-form button[type="submit"]`)),
	)
	poll(t, tab, `document.body.dataset.state === 'ready'`, "the first refresh")
	// The token is kept for the session: a reload does not ask again.
	mustDo(t, tab, "reload", chromedp.Reload())
	poll(t, tab, `document.body.dataset.state === 'ready' && document.querySelector('#login').hidden`, "the refresh after a reload")
}

// waitRefreshes waits until the page refreshed n more times.
func waitRefreshes(t *testing.T, tab context.Context, n int) {
	t.Helper()
	now, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.body.dataset.updates`))
	if err != nil {
		t.Fatal(err)
	}
	var k int
	fmt.Sscan(now, &k)
	poll(t, tab, fmt.Sprintf(`Number(document.body.dataset.updates) >= %d`, k+n), "page refreshes")
}

// topicNumbers are the counts the dashboard shows for each topic.
type topicNumbers map[string]map[string]int64

const readTopics = `Object.fromEntries([...document.querySelectorAll('#topics tbody tr')].map((tr) => [tr.dataset.topic,
	Object.fromEntries([...tr.querySelectorAll('td[data-field]')].map((td) => [td.dataset.field, Number(td.dataset.value)]))]))`

const readOrders = `({created: document.querySelector('#orders-created').textContent, pending: document.querySelector('#orders-pending').textContent,
	paid: document.querySelector('#orders-paid').textContent, closed: document.querySelector('#orders-closed').textContent,
	stock: Object.fromEntries([...document.querySelectorAll('#stock tbody tr')].map((tr) => [tr.dataset.sku, tr.querySelector('.num').textContent]))})`

// ordersShown is the orders panel as the page shows it.
type ordersShown struct {
	Created string            `json:"created"`
	Pending string            `json:"pending"`
	Paid    string            `json:"paid"`
	Closed  string            `json:"closed"`
	Stock   map[string]string `json:"stock"`
}

// waitNumbersMatch waits until the page shows what the API says: every
// topic's due, overdue, in-flight and dead counts, and the orders summary.
func waitNumbersMatch(t *testing.T, tab context.Context, s *server) {
	t.Helper()
	var last string
	testenv.WaitFor(testenv.Context(t), t, "the dashboard's numbers to match the API", func() bool {
		var topics struct {
			Topics []struct {
				Topic    string `json:"topic"`
				Due      int64  `json:"due"`
				DueNow   int64  `json:"due_now"`
				InFlight int64  `json:"in_flight"`
				Dead     int64  `json:"dead"`
			} `json:"topics"`
		}
		s.do(t, "GET", "/v1/topics", "", &topics)
		var sum struct {
			Orders map[string]int64 `json:"orders"`
			Stock  []struct {
				SKU   string `json:"sku"`
				Stock int64  `json:"stock"`
			} `json:"stock"`
		}
		s.do(t, "GET", "/v1/orders/summary", "", &sum)
		page, err := chromedp.Run(tab, chromedp.Evaluate[topicNumbers](readTopics))
		if err != nil {
			t.Fatal(err)
		}
		orders, err := chromedp.Run(tab, chromedp.Evaluate[ordersShown](readOrders))
		if err != nil {
			t.Fatal(err)
		}
		var diffs []string
		if len(page) != len(topics.Topics) {
			diffs = append(diffs, fmt.Sprintf("page shows %d topics, the API %d", len(page), len(topics.Topics)))
		}
		for _, api := range topics.Topics {
			got := page[api.Topic]
			for field, want := range map[string]int64{"due": api.Due, "due_now": api.DueNow, "in_flight": api.InFlight, "dead": api.Dead} {
				if got == nil || got[field] != want {
					diffs = append(diffs, fmt.Sprintf("%s.%s: page %v, API %d", api.Topic, field, got[field], want))
				}
			}
		}
		for field, got := range map[string]string{"created": orders.Created, "pending_payment": orders.Pending, "paid": orders.Paid, "closed": orders.Closed} {
			if strings.ReplaceAll(got, ",", "") != fmt.Sprint(sum.Orders[field]) {
				diffs = append(diffs, fmt.Sprintf("orders.%s: page %q, API %d", field, got, sum.Orders[field]))
			}
		}
		for _, k := range sum.Stock {
			if strings.ReplaceAll(orders.Stock[k.SKU], ",", "") != fmt.Sprint(k.Stock) {
				diffs = append(diffs, fmt.Sprintf("stock of %s: page %q, API %d", k.SKU, orders.Stock[k.SKU], k.Stock))
			}
		}
		last = strings.Join(diffs, "; ")
		return len(diffs) == 0 && len(page) >= 3
	}, func() string { return last })
}

// metricValue reads one sample of serve's /metrics.
func metricValue(t *testing.T, s *server, series string) float64 {
	t.Helper()
	resp, err := http.Get(s.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			var v float64
			fmt.Sscan(rest, &v)
			return v
		}
	}
	t.Fatalf("/metrics has no %s", series)
	return 0
}

func poll(t *testing.T, tab context.Context, predicate, what string) {
	t.Helper()
	_, err := chromedp.Run(tab, chromedp.Poll[chromedp.Void](predicate,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second)))
	if err != nil {
		status, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector('#status').textContent + ' | ' + document.querySelector('#error').textContent`))
		t.Fatalf("waiting for %s: %v (page status: %s)", what, err, status)
	}
}

func mustDo(t *testing.T, tab context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// deadJob puts a job straight into topic's dead set with reason as its
// last error.
func deadJob(t *testing.T, q *dataplane.Client, topic, id, reason string) {
	t.Helper()
	ctx := testenv.ContextTimeout(t, time.Minute)
	mustEnqueue(t, q, topic, queue.NewJob{ID: id, MaxAttempts: 3})
	cl, err := q.Claim(ctx, topic, 1, time.Minute)
	if err != nil || len(cl.Jobs) != 1 || cl.Jobs[0].ID != id {
		t.Fatalf("claim %s: %+v %v", id, cl, err)
	}
	if n, _, err := q.Bury(ctx, []queue.DeadJob{{Job: cl.Jobs[0], Error: reason}}); err != nil || n != 1 {
		t.Fatalf("bury %s: %d %v", id, n, err)
	}
}

func mustEnqueue(t *testing.T, q *dataplane.Client, topic string, j queue.NewJob) {
	t.Helper()
	if r, err := q.Enqueue(testenv.ContextTimeout(t, time.Minute), topic, j); err != nil || r.Duplicate {
		t.Fatalf("enqueue %s/%s: %+v %v", topic, j.ID, r, err)
	}
}

func mustGet(t *testing.T, q *dataplane.Client, topic, id string) *queue.JobInfo {
	t.Helper()
	info, err := q.Get(testenv.ContextTimeout(t, time.Minute), topic, id)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func redisAddr() string {
	if a := os.Getenv(testenv.EnvRedisAddr); a != "" {
		return a
	}
	return testenv.DefaultRedisAddr
}

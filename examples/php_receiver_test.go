package examples_test

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/testenv"
)

// closedOrder is a row of the PHP receiver's closed_orders table.
type closedOrder struct {
	OrderNo        string
	IdempotencyKey string
	Attempt        int
	ClosedAt       int64
}

// TestPHPReceiver runs examples/php-receiver/index.php under PHP's built-in
// server (with workers, so deliveries really run at once) and sends it what
// delayq sends and what an attacker might: an order is closed once however
// often its job is delivered, and forgeries change nothing.
func TestPHPReceiver(t *testing.T) {
	php := lookPath(t, "php", "the PHP receiver of examples/php-receiver")
	if mods, err := exec.Command(php, "-m").Output(); err != nil || !strings.Contains(string(mods), "pdo_sqlite") {
		t.Skipf("php has no pdo_sqlite (php -m: %v; Debian: apt-get install php-sqlite3): the PHP receiver of examples/php-receiver is not run", err)
	}
	dbPath := filepath.Join(t.TempDir(), "orders.sqlite")
	dir, err := filepath.Abs("php-receiver")
	if err != nil {
		t.Fatal(err)
	}
	r := startReceiver(t, dir, []string{"RECEIVER_DB=" + dbPath, "PHP_CLI_SERVER_WORKERS=4"},
		php, "-S", "127.0.0.1:{port}", "index.php")
	ctx := testenv.Context(t)

	now := time.Now()
	order := func(no string, attempt int, sentAt time.Time) delivery {
		return delivery{topic: "shop_order_close", jobID: "order:" + no, attempt: attempt, max: 5,
			dueAt: now.UnixMilli(), body: []byte(`{"order_no": "` + no + `", "pay_deadline": 1767225600000}`),
			sentAt: sentAt, secret: secret}
	}
	expect := func(what string, d delivery, wantStatus int, wantAlready bool) {
		t.Helper()
		status, body := send(t, ctx, r.url, d)
		if status != wantStatus {
			t.Fatalf("%s: %d %s, want %d", what, status, body, wantStatus)
		}
		if status != http.StatusOK {
			return
		}
		var ans struct {
			OrderNo       string `json:"order_no"`
			Closed        bool   `json:"closed"`
			AlreadyClosed bool   `json:"already_closed"`
		}
		if err := json.Unmarshal([]byte(body), &ans); err != nil {
			t.Fatalf("%s: answer %q: %v", what, body, err)
		}
		if !ans.Closed || ans.AlreadyClosed != wantAlready {
			t.Errorf("%s: answer %s, want closed and already_closed %v", what, body, wantAlready)
		}
	}

	first := order("1001", 1, now)
	expect("first delivery", first, http.StatusOK, false)
	expect("the same request again (replayed inside the window)", first, http.StatusOK, true)
	expect("a second delivery (attempt 2, after a worker crash)", order("1001", 2, now.Add(time.Second)), http.StatusOK, true)

	tampered := order("1002", 1, now)
	tampered.signedBody, tampered.body = tampered.body, []byte(`{"order_no": "1003"}`)
	expect("a changed body", tampered, http.StatusUnauthorized, false)
	expect("an old timestamp", order("1004", 1, now.Add(-10*time.Minute)), http.StatusUnauthorized, false)
	wrong := order("1005", 1, now)
	wrong.secret = "another-secret"
	expect("a wrong secret", wrong, http.StatusUnauthorized, false)
	for _, body := range []string{`{"order_no": 1006}`, `{"order": "1006"}`, `not json`, `{"order_no": "10 06"}`, ``} {
		bad := order("1006", 1, now)
		bad.body = []byte(body)
		expect("a malformed body "+body, bad, http.StatusBadRequest, false)
	}

	// Eight deliveries of one job at once: one closes the order, the others
	// find it closed.
	var wg sync.WaitGroup
	statuses, bodies, errs := make([]int, 8), make([]string, 8), make([]error, 8)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], bodies[i], errs[i] = post(ctx, r.url, order("1007", 1+i%2, now))
		}()
	}
	wg.Wait()
	for i, s := range statuses {
		if errs[i] != nil || s != http.StatusOK {
			t.Errorf("concurrent delivery %d: %d %s %v, want 200", i, s, bodies[i], errs[i])
		}
	}

	db, err := gorm.Open(sqlite.Open(dbPath), &gorm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	var rows []closedOrder
	if err := db.Table("closed_orders").Order("order_no").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].OrderNo != "1001" || rows[1].OrderNo != "1007" {
		t.Fatalf("closed_orders %+v, want orders 1001 and 1007 once each", rows)
	}
	if rows[0].IdempotencyKey != "shop_order_close:order:1001" || rows[0].Attempt != 1 {
		t.Errorf("order 1001's row %+v, want the first delivery's key and attempt", rows[0])
	}
	if d := rows[0].ClosedAt - now.Unix(); d < -1 || d > 60 {
		t.Errorf("order 1001 closed at %d, now is %d", rows[0].ClosedAt, now.Unix())
	}
}

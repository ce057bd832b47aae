package ledger_test

import (
	"context"
	"database/sql"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/sqlscript"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/jobs/orderclose"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// auditDoc is the page of audit queries this test keeps true.
const auditDoc = "../docs/audit.md"

// auditQueryRE finds the page's queries: a marker naming the query, then
// its ```sql block.
var auditQueryRE = regexp.MustCompile("(?s)<!-- audit-query: ([a-z-]+) -->\n```sql\n(.*?)```")

// auditWant is, per query of docs/audit.md, the rows it must return on
// auditFixture's rows: each row's first columns, as text.
var auditWant = map[string][][]string{
	"order": {{"1001", "pending_payment", "scheduled", "0"}},
	"overdue": {
		{"order_close", "order_close:1002", "retrying", "2"},
		{"mail", "welcome:1", "scheduled", "0"},
	},
	"worker": {
		{"mail", "digest:7", "5"},
		{"sms", "otp:9", "1"},
	},
	"workers": {
		{"host-a:4242", "2"},
		{"host-b:1", "1"},
	},
	"died": {
		{"sms", "otp:1", "1"},
		{"mail", "bounce:2", "5"},
		{"mail", "bounce:1", "5"},
	},
	"died-why": {
		{"mail", "smtp 550 mailbox unavailable", "2"},
		{"sms", "provider timeout", "1"},
	},
	"waiting": {
		{"mail", "3", "1", "2"},
		{"order_close", "2", "0", "1"},
	},
	"finished": {{"order_close:1000", "succeeded", "2"}},
	"late": {
		{"order_close:1000", "succeeded", "1500", "2"},
		{"order_close:0998", "cancelled", "3", "1"},
	},
	"retried": {
		{"dead", "mail", "bounce:1", "4"},
		{"dead", "mail", "bounce:2", "4"},
		{"ledger", "mail", "digest:7", "4"},
		{"dead", "order_close", "order_close:0999", "4"},
	},
}

// TestAuditDocQueries runs every query of docs/audit.md, as written there,
// on MariaDB over a few ledger, dead-letter and order rows, and checks the
// rows each returns; a query without expectations here, or expectations
// without their query, fail it too.
func TestAuditDocQueries(t *testing.T) {
	doc, err := os.ReadFile(auditDoc)
	if err != nil {
		t.Fatal(err)
	}
	found := auditQueryRE.FindAllStringSubmatch(string(doc), -1)
	if n := strings.Count(string(doc), "```sql"); n != len(found) {
		t.Fatalf("%s has %d sql blocks, %d of them after an audit-query marker", auditDoc, n, len(found))
	}
	var names []string
	for _, m := range found {
		names = append(names, m[1])
	}
	for name := range auditWant {
		if !slices.Contains(names, name) {
			t.Errorf("%s has no query %q", auditDoc, name)
		}
	}

	db := testenv.MySQL(t)
	ctx := testenv.Context(t)
	auditFixture(t, ctx, db)
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range found {
		name, block := m[1], m[2]
		t.Run(name, func(t *testing.T) {
			want, ok := auditWant[name]
			if !ok {
				t.Fatalf("no expected rows for query %q", name)
			}
			got := runBlock(t, ctx, sqlDB, block)
			if len(got) != len(want) {
				t.Fatalf("%d rows %q, want %d %q\n%s", len(got), got, len(want), want, block)
			}
			for i := range want {
				if len(got[i]) < len(want[i]) || !slices.Equal(got[i][:len(want[i])], want[i]) {
					t.Errorf("row %d: %q, want it to start with %q\n%s", i, got[i], want[i], block)
				}
			}
		})
	}
}

// runBlock runs a block's statements on one connection (its SET lines set
// session variables its query reads) and returns the last one's rows.
func runBlock(t *testing.T, ctx context.Context, db *sql.DB, block string) [][]string {
	t.Helper()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stmts := sqlscript.Split(block)
	for _, s := range stmts[:len(stmts)-1] {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	rows, err := conn.QueryContext(ctx, stmts[len(stmts)-1])
	if err != nil {
		t.Fatalf("%s: %v", stmts[len(stmts)-1], err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = v.String
			if !v.Valid {
				row[i] = "NULL"
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// auditFixture writes the rows the page's questions are asked about, with
// times around the real now (the queries read MariaDB's clock; both run on
// this machine).
func auditFixture(t *testing.T, ctx context.Context, db *gorm.DB) {
	t.Helper()
	l, err := ledger.New(db, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := orderclose.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	const minute, hour = 60_000, 3_600_000
	row := func(topic, id string, state queue.State, attempt int, runAt int64, worker string, claimedAt int64, lastError string) ledger.Entry {
		return ledger.Entry{Topic: topic, JobID: id, Payload: []byte("{}"), Attempt: attempt, MaxAttempts: 5, RunAt: runAt,
			ClaimedAt: claimedAt, LeaseUntil: claimedAt + 30_000, Worker: worker, State: state, LastError: lastError, UpdatedAt: now}
	}
	rows := []ledger.Entry{
		row("order_close", "order_close:1001", queue.StateWaiting, 0, now+30*minute, "", 0, ""),
		row("order_close", "order_close:1002", queue.StateRetrying, 2, now-2*hour, "host-b:1", now-2*hour-minute, "db down"),
		row("mail", "welcome:1", queue.StateWaiting, 0, now-90*minute, "", 0, ""),
		row("mail", "welcome:2", queue.StateWaiting, 0, now-10*minute, "", 0, ""), // late, but not an hour
		row("mail", "welcome:3", queue.StateWaiting, 0, now+48*hour, "", 0, ""),   // beyond the horizon
		row("mail", "digest:7", queue.StateInFlight, 5, now-6*minute, "host-a:4242", now-5*minute, "smtp 421"),
		row("sms", "otp:9", queue.StateInFlight, 1, now-minute, "host-a:4242", now-minute, ""),
		row("sms", "otp:10", queue.StateInFlight, 1, now-minute, "host-b:1", now-minute, ""),
	}
	rows[5].LeaseUntil = now - 1 // its worker stopped renewing
	dead := []ledger.DeadLetter{
		{Topic: "mail", JobID: "bounce:1", Payload: []byte{}, Attempts: 5, LastError: "smtp 550 mailbox unavailable", DiedAt: now - 1},
		{Topic: "mail", JobID: "bounce:2", Payload: []byte{}, Attempts: 5, LastError: "smtp 550 mailbox unavailable", DiedAt: now - 2},
		{Topic: "sms", JobID: "otp:1", Payload: []byte{}, Attempts: 1, LastError: "provider timeout", DiedAt: now - 3},
		{Topic: "order_close", JobID: "order_close:0999", Payload: []byte{}, Attempts: 5, LastError: "order not found", DiedAt: now - 48*hour},
	}
	history := []ledger.HistoryRow{
		{Topic: "order_close", JobID: "order_close:1000", Outcome: ledger.OutcomeSucceeded, Attempts: 2, MaxAttempts: 25,
			EnqueuedAt: now - 40*minute, DueAt: now - 10*minute, FirstClaimedAt: now - 10*minute + 1500,
			ClaimedAt: now - 5*minute, FinishedAt: now - 5*minute + 80, Worker: "host-a:4242", LastError: "db down"},
		{Topic: "order_close", JobID: "order_close:0998", Outcome: ledger.OutcomeCancelled, Attempts: 1, MaxAttempts: 25,
			EnqueuedAt: now - 50*minute, DueAt: now - 20*minute, FirstClaimedAt: now - 20*minute + 3,
			ClaimedAt: now - 20*minute + 3, FinishedAt: now - 19*minute, Worker: "host-b:1"},
		{Topic: "order_close", JobID: "order_close:0900", Outcome: ledger.OutcomeSucceeded, Attempts: 1, MaxAttempts: 25,
			DueAt: now - 3*hour, FirstClaimedAt: now - 3*hour + 9000, ClaimedAt: now - 3*hour + 9000, FinishedAt: now - 3*hour + 9100, Worker: "host-b:1"}, // finished before the hour
	}
	order := orderclose.Order{OrderNo: "1001", UserID: "u1", AmountCents: 100, Status: orderclose.StatusPending,
		CreatedAt: now - 30*minute, PayDeadline: now + 30*minute, Version: 1}
	for what, err := range map[string]error{
		"ledger rows":  db.WithContext(ctx).Table(l.LedgerTable()).Create(&rows).Error,
		"dead letters": db.WithContext(ctx).Table(l.DeadLetterTable()).Create(&dead).Error,
		"history":      db.WithContext(ctx).Table(l.HistoryTable()).Create(&history).Error,
		"order":        db.WithContext(ctx).Create(&order).Error,
	} {
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// ledger list on MariaDB directly and through an instance's API: the same
// rows, filters and cursor, and the same output either way.
func TestLedgerList(t *testing.T) {
	dsn := testenv.MySQLDSN(t)
	db, err := gorm.Open(mysql.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(db, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	if err := l.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	const t0 = 1_800_000_000_000 // 2027-01-15T08:00:00Z
	rows := []ledger.Entry{
		{Topic: "mail", JobID: "late", State: queue.StateWaiting, RunAt: t0 + 3000, Payload: []byte("abc")},
		{Topic: "mail", JobID: "early", State: queue.StateWaiting, RunAt: t0 + 1000, Payload: []byte{}},
		{Topic: "mail", JobID: "busy", State: queue.StateInFlight, RunAt: t0, Attempt: 1, Worker: "h:1", Payload: []byte{}},
		{Topic: "sms", JobID: "soon", State: queue.StateWaiting, RunAt: t0 + 2000, Payload: []byte{}},
		{Topic: "mail", JobID: "failing", State: queue.StateRetrying, RunAt: t0 + 2000, Attempt: 2, LastError: "boom", Payload: []byte{}},
	}
	if err := db.WithContext(ctx).Table(l.LedgerTable()).Create(&rows).Error; err != nil {
		t.Fatal(err)
	}
	rdb, ns := testenv.MiniRedis(t)
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	direct := []string{"--redis", testenv.DefaultRedisAddr, "--sql-dsn", dsn}
	viaAPI := []string{"--api", apiInstance(t, httpapi.Deps{Queue: q, Ledger: l})}
	list := func(args ...string) (httpapi.LedgerPage, string) {
		t.Helper()
		args = append([]string{"ledger", "list"}, args...)
		code, out, errOut := runCLI(t, append(args, direct...)...)
		code2, out2, errOut2 := runCLI(t, append(args, viaAPI...)...)
		if code != ExitOK || code2 != ExitOK || out != out2 {
			t.Fatalf("%v: direct exit %d %s%s\nthrough the API exit %d %s%s", args, code, out, errOut, code2, out2, errOut2)
		}
		var p httpapi.LedgerPage
		if strings.Contains(strings.Join(args, " "), "--json") {
			if err := json.Unmarshal([]byte(out), &p); err != nil {
				t.Fatalf("%v: %v\n%s", args, err, out)
			}
		}
		return p, out
	}
	ids := func(p httpapi.LedgerPage) string {
		var out []string
		for _, r := range p.Rows {
			out = append(out, r.Topic+"/"+r.JobID)
		}
		return strings.Join(out, " ")
	}
	for args, want := range map[string]string{
		"":                              "mail/late mail/early mail/busy sms/soon mail/failing",
		"--state waiting":               "mail/early sms/soon mail/late",
		"--state scheduled":             "mail/early sms/soon mail/late", // the older names, read for one more release
		"--state in_flight":             "mail/busy",
		"--state in-progress":           "mail/busy",
		"--state in_progress":           "mail/busy",
		"--state retrying --topic mail": "mail/failing",
		"--state waiting --due-after 2027-01-15T08:00:01Z":                           "sms/soon mail/late",
		"--state waiting --due-before 1800000002000":                                 "mail/early",
		"--due-after 1800000000000 --due-before 2027-01-15T08:00:02.5Z --topic mail": "mail/early mail/failing",
	} {
		p, _ := list(append(strings.Fields(args), "--json")...)
		if got := ids(p); got != want {
			t.Errorf("ledger list %s: %s, want %s", args, got, want)
		}
	}
	p, _ := list("--state", "waiting", "--limit", "2", "--json")
	if ids(p) != "mail/early sms/soon" || p.NextCursor == "" || p.Rows[0].State != "waiting" {
		t.Fatalf("first page %+v", p)
	}
	_, table := list("--state", "waiting", "--limit", "2")
	if !strings.Contains(table, "(more: --cursor "+p.NextCursor+")") || !strings.Contains(table, "2027-01-15 08:00:01.000Z") {
		t.Errorf("table:\n%s", table)
	}
	if p, _ := list("--state", "waiting", "--limit", "2", "--cursor", p.NextCursor, "--json"); ids(p) != "mail/late" || p.NextCursor != "" {
		t.Errorf("second page %+v", p)
	}

	// A partitioned topic's row: listed under its topic, its partition
	// beside it in --json and in the table's topic column.
	part := dataplane.PartitionName("mail", 2, 1)
	parted := ledger.Entry{Topic: part, JobID: "parted", State: queue.StateInFlight, RunAt: t0 + 500, Attempt: 1, Worker: "h:2", Payload: []byte{}}
	if err := db.WithContext(ctx).Table(l.LedgerTable()).Create(&parted).Error; err != nil {
		t.Fatal(err)
	}
	p, _ = list("--state", "in_flight", "--topic", "mail", "--json")
	if ids(p) != "mail/busy mail/parted" || p.Rows[1].Partition != part || p.Rows[0].Partition != "" {
		t.Errorf("in flight rows of mail with a partition's: %+v", p.Rows)
	}
	if _, table := list("--state", "in_flight", "--topic", "mail"); !strings.Contains(table, part) {
		t.Errorf("table without the partition %s:\n%s", part, table)
	}
}

// Bad ledger list flags exit 2 with a message naming the flag, before any
// request.
func TestLedgerListBadFlags(t *testing.T) {
	listen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--state", "stuck"}, "--state"},
		{[]string{"--state", "IN_PROGRESS"}, "--state"},
		{[]string{"--due-after", "yesterday"}, "--due-after"},
		{[]string{"--due-before", "0"}, "--due-before"},
		{[]string{"--due-after", "2027-01-01T00:00:00Z", "--due-before", "2026-01-01T00:00:00Z"}, "--due-before"},
		{[]string{"--cursor", "page2"}, "--cursor"},
		{[]string{"--limit", "1001"}, "--limit"},
		{[]string{"--limit", "0"}, "--limit"},
		{[]string{"--topic", "bad topic"}, "topic"},
	} {
		code, out, errOut := runCLI(t, append(append([]string{"ledger", "list"}, c.args...), "--listen", listen)...)
		if code != ExitUsage || out != "" || !strings.Contains(errOut, c.says) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 naming %s", c.args, code, out, errOut, c.says)
		}
	}
}

package main_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/delayq/delayq/internal/testenv"
)

// A durable topic from the CLI, directly on Redis and MariaDB and through
// a running instance's API: enqueue works both ways; get shows a job
// beyond the horizon as waiting in SQL only (the same JSON both ways);
// stats says the durability and counts the jobs in SQL.
func TestCLIDurableTopic(t *testing.T) {
	bin := buildBinary(t)
	_, ns := testenv.Redis(t)
	dsn := testenv.MySQLDSN(t)
	port := testenv.FreePort(t)
	conf := filepath.Join(t.TempDir(), "delayq.yaml")
	if err := os.WriteFile(conf, []byte("queue:\n  horizon: 1h\n  topics:\n    invoices:\n      durability: durable\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := serveEnv(ns, dsn, port)
	serve := start(t, bin, env, "serve", "--config", conf, "--no-workers")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHTTP(t, base+"/readyz")
	cli := func(args ...string) (string, int) { return run(t, bin, env, append(args, "--config", conf)...) }

	// Enqueue directly (beyond the horizon) and through the API (within).
	if out, code := cli("enqueue", "invoices", "inv:1", "--delay", "3h", "--payload", `{"n":1}`, "--json"); code != 0 || !strings.Contains(out, `"duplicate": false`) {
		t.Fatalf("direct durable enqueue: exit %d, %q", code, out)
	}
	if out, code := cli("enqueue", "invoices", "inv:2", "--delay", "10m", "--json", "--api", base); code != 0 || !strings.Contains(out, `"duplicate": false`) {
		t.Fatalf("durable enqueue through the API: exit %d, %q", code, out)
	}
	if out, code := cli("enqueue", "invoices", "inv:1", "--json", "--api", base); code != 0 || !strings.Contains(out, `"duplicate": true`) {
		t.Fatalf("duplicate of a job in SQL only, through the API: exit %d, %q", code, out)
	}

	direct, code := cli("get", "invoices", "inv:1", "--json")
	var job map[string]any
	if code != 0 || json.Unmarshal([]byte(direct), &job) != nil || job["sql_only"] != true || job["state"] != "waiting" {
		t.Fatalf("get of a job beyond the horizon: exit %d, %q", code, direct)
	}
	if viaAPI, code := cli("get", "invoices", "inv:1", "--json", "--api", base); code != 0 || viaAPI != direct {
		t.Errorf("get --json through the API (exit %d):\n%s\ndirect:\n%s", code, viaAPI, direct)
	}
	if out, code := cli("get", "invoices", "inv:1"); code != 0 || !strings.Contains(out, "waiting (SQL only)") {
		t.Errorf("get table of a job beyond the horizon: exit %d, %q", code, out)
	}
	if out, code := cli("get", "invoices", "inv:2", "--json"); code != 0 || strings.Contains(out, "sql_only") {
		t.Errorf("get of a job within the horizon: exit %d, %q", code, out)
	}

	// Directly, stats count SQL now.
	out, code := cli("stats", "invoices", "--json")
	var stats []struct {
		Topic      string `json:"topic"`
		Durability string `json:"durability"`
		Due        int64  `json:"due"`
		SQL        *struct {
			Waiting       int64 `json:"waiting"`
			BeyondHorizon int64 `json:"beyond_horizon"`
		} `json:"sql"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &stats) != nil || len(stats) != 1 || stats[0].Durability != "durable" ||
		stats[0].Due != 1 || stats[0].SQL == nil || stats[0].SQL.Waiting != 2 || stats[0].SQL.BeyondHorizon != 1 {
		t.Fatalf("stats --json of a durable topic: exit %d, %q", code, out)
	}
	if out, code := cli("stats"); code != 0 || !strings.Contains(out, "DURABILITY") || !strings.Contains(out, "BEYOND") ||
		!strings.Contains(out, "durable") {
		t.Errorf("stats table: exit %d, %q", code, out)
	}
	// Through the API: the durability, and the instance's relay's last
	// count (it counts every 30 s, so its numbers may lag).
	out, code = cli("stats", "invoices", "--json", "--api", base)
	stats = nil
	if code != 0 || json.Unmarshal([]byte(out), &stats) != nil || len(stats) != 1 || stats[0].Durability != "durable" || stats[0].SQL == nil {
		t.Fatalf("stats --json through the API: exit %d, %q", code, out)
	}
	if out, code := cli("migrate", "--help"); code != 0 || !strings.Contains(out, "--status") || !strings.Contains(out, "--print") {
		t.Errorf("migrate --help: exit %d, %q", code, out)
	}
	if out, code := cli("migrate", "--json"); code != 0 || !strings.Contains(out, `"up_to_date": true`) || !strings.Contains(out, `"migrated": true`) {
		t.Errorf("migrate: exit %d, %q", code, out)
	}
	// A migration missing (its table dropped, its record gone) and one
	// unrecorded: --status exits 5 and names both, --print gives the SQL
	// of the missing one only, and migrate brings the database back.
	sqlDB, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer sqlDB.Close()
	for _, stmt := range []string{"DROP TABLE dq_topic_state", "DELETE FROM dq_schema_migrations WHERE version IN (3, 4)"} {
		if _, err := sqlDB.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	// The columns' padding follows the longest migration name.
	if out, code := cli("migrate", "--status"); code != 5 || !regexp.MustCompile(`(?m)^0004 +topic_state +pending`).MatchString(out) || !strings.Contains(out, "unrecorded") {
		t.Errorf("migrate --status with one migration missing: exit %d, want 5; %q", code, out)
	}
	if out, code := cli("migrate", "--print"); code != 0 || !strings.Contains(out, "CREATE TABLE IF NOT EXISTS `dq_topic_state`") ||
		strings.Contains(out, "dq_periodic` (") || !strings.Contains(out, "'periodic', 'found'") {
		t.Errorf("migrate --print: exit %d, %q", code, out)
	}
	if out, code := cli("migrate"); code != 0 || !strings.Contains(out, "up to date") {
		t.Errorf("migrate after the loss: exit %d, %q", code, out)
	}
	if out, code := cli("migrate", "--print", "--json"); code != 0 || !strings.Contains(out, `"statements": []`) {
		t.Errorf("migrate --print of an up-to-date database: exit %d, %q", code, out)
	}
	if out, code := cli("migrate", "--status"); code != 0 || !strings.Contains(out, "up to date") || !strings.Contains(out, "0002") {
		t.Errorf("migrate --status: exit %d, %q", code, out)
	}
	if _, code := cli("migrate", "--status", "--print"); code != 2 {
		t.Errorf("migrate --status --print: exit %d, want 2", code)
	}
	if code := serve.stop(t); code != 0 {
		t.Fatalf("serve exited %d after SIGTERM", code)
	}
}

// delayq migrate opens only SQL: with Redis unreachable it migrates an
// empty database and reports it up to date, where an operator command
// would fail on Redis.
func TestMigrateNeedsNoRedis(t *testing.T) {
	bin := buildBinary(t)
	dsn := testenv.MySQLDSN(t)
	env := append(os.Environ(), "DELAYQ_REDIS_MODE=single", "DELAYQ_REDIS_ADDRS="+testenv.RefusedAddr(t),
		"DELAYQ_SQL_DRIVER=mysql", "DELAYQ_SQL_DSN="+dsn, "DELAYQ_ORDERS_ENABLED=false")
	if out, code := run(t, bin, env, "migrate", "--status"); code != 5 || !strings.Contains(out, "schema version 0 of") {
		t.Fatalf("migrate --status of an empty database, Redis down: exit %d, want 5; %q", code, out)
	}
	if out, code := run(t, bin, env, "migrate"); code != 0 || !strings.Contains(out, "up to date") {
		t.Fatalf("migrate with Redis down: exit %d, %q", code, out)
	}
	if _, code := run(t, bin, env, "stats"); code == 0 {
		t.Errorf("stats with Redis down exited 0: the test's Redis is not down")
	}
}

package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/delayq/delayq/app/cli"
	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/testenv"
)

// `delayq serve` over three ledger shards (sql.shards), with a durable
// topic of 6 partitions: each database holds the rows of two partitions;
// the API's ledger listing pages through every shard's rows merged, each
// once, saying each row's shard; a job is cancelled on its own shard; every
// due job runs once through its target and the topic's history lists them
// all, merged; the relay's metrics have a series per shard; the CLI on
// the same configuration lists what the API does, and with the shards in
// another order it is refused.
func TestServeOverLedgerShards(t *testing.T) {
	dsns := []string{testenv.MySQLDSN(t), testenv.MySQLDSN(t), testenv.MySQLDSN(t)}
	var mu sync.Mutex
	runs := map[string]int{}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		runs[r.Header.Get("Delayq-Job-Id")]++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(target.Close)

	_, ns := testenv.Redis(t)
	port := testenv.FreePort(t)
	cfg := fmt.Sprintf(`log: {level: warn, format: json}
redis: {mode: single, addrs: [%q], namespace: %q}
sql: {driver: mysql, dsn: %q, shards: [%q, %q]}
http: {listen: "127.0.0.1:%d"}
queue:
  topics:
    bills: {durability: durable, partitions: 6}
worker:
  target_allow_hosts: [127.0.0.1]
  topics:
    bills: {concurrency: 8, target: {url: %q}}
`, redisAddr(), ns, dsns[0], dsns[1], dsns[2], port, target.URL+"/hook")
	logs := startCommand(t, cfg, "serve")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	ctx := testenv.Context(t)
	testenv.WaitFor(ctx, t, "serve to answer /readyz", func() bool {
		code, _, err := httpGet(base + "/readyz")
		return err == nil && code == 200
	}, func() string { return "logs:\n" + logs() })

	// 60 jobs due in an hour: they wait in the ledger.
	const later, now = 60, 30
	var batch httpapi.BatchRequest
	hour := int64(3_600_000)
	for i := range later {
		batch.Jobs = append(batch.Jobs, httpapi.EnqueueRequest{ID: fmt.Sprintf("later-%02d", i), DelayMs: &hour})
	}
	postJSON(t, base+"/v1/topics/bills/jobs:batch", batch, http.StatusOK)

	// Each shard's database holds the rows of two of the six partitions.
	for i, dsn := range dsns {
		db, err := gorm.Open(mysql.Open(dsn), &gorm.Config{Logger: logger.Discard})
		if err != nil {
			t.Fatal(err)
		}
		var parts []string
		if err := db.WithContext(ctx).Table("dq_ledger").Distinct("topic").Order("topic").Pluck("topic", &parts).Error; err != nil {
			t.Fatal(err)
		}
		if len(parts) != 2 {
			t.Errorf("shard %d holds the rows of %v, want two partitions", i, parts)
		}
		for _, p := range parts {
			var k int
			if _, err := fmt.Sscanf(p, "bills~6.%d~", &k); err != nil || k%3 != i {
				t.Errorf("shard %d holds partition %q: partition p belongs on shard p mod 3", i, p)
			}
		}
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	}

	// The API's listing merges the shards: pages of 7, each row once.
	seen := map[string]int{}
	shardsSeen := map[int]int{}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > later {
			t.Fatal("GET /v1/ledger does not end")
		}
		var p httpapi.LedgerPage
		u := base + "/v1/ledger?topic=bills&state=waiting&limit=7"
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		getJSON(t, u, &p)
		for _, r := range p.Rows {
			seen[r.JobID]++
			shardsSeen[r.Shard]++
		}
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if len(seen) != later {
		t.Errorf("GET /v1/ledger listed %d of the %d waiting jobs", len(seen), later)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("GET /v1/ledger listed %s %d times", id, n)
		}
	}
	if len(shardsSeen) != 3 || shardsSeen[0]+shardsSeen[1]+shardsSeen[2] != later {
		t.Errorf("rows by shard %v: want rows on each of the 3 shards", shardsSeen)
	}

	// A cancel finds the job's row on its shard and deletes it there.
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, base+"/v1/topics/bills/jobs/later-07", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE later-07: %d %s", resp.StatusCode, body)
	}
	if code, body, _ := httpGet(base + "/v1/topics/bills/jobs/later-07"); code != http.StatusNotFound {
		t.Errorf("GET later-07 after its cancel: %d %s, want 404", code, body)
	}

	// 30 jobs due now run once each, and the history lists them all.
	batch.Jobs = nil
	for i := range now {
		batch.Jobs = append(batch.Jobs, httpapi.EnqueueRequest{ID: fmt.Sprintf("now-%02d", i)})
	}
	postJSON(t, base+"/v1/topics/bills/jobs:batch", batch, http.StatusOK)
	history := map[string]int{}
	testenv.WaitFor(ctx, t, "every due job's history", func() bool {
		clear(history)
		after := ""
		for {
			var p httpapi.HistoryPage
			u := base + "/v1/topics/bills/history?limit=4"
			if after != "" {
				u += "&after=" + url.QueryEscape(after)
			}
			getJSON(t, u, &p)
			for _, h := range p.History {
				history[h.JobID+" "+h.Outcome]++
			}
			if after = p.NextAfter; after == "" {
				return len(history) == now+1 // and the cancelled job's
			}
		}
	}, func() string { return fmt.Sprintf("history %v\nlogs:\n%s", history, logs()) })
	mu.Lock()
	for i := range now {
		if id := fmt.Sprintf("now-%02d", i); runs[id] != 1 {
			t.Errorf("%s ran %d times, want once", id, runs[id])
		}
	}
	mu.Unlock()
	for id, n := range history {
		if n != 1 {
			t.Errorf("the history listed %s %d times", id, n)
		}
	}
	if history["later-07 cancelled"] != 1 {
		t.Errorf("the history of the cancelled job: %v", history)
	}

	// One relay per shard, each with its own series.
	testenv.WaitFor(ctx, t, "a relay pass on every shard", func() bool {
		_, m, _ := httpGet(base + "/metrics")
		for i := range 3 {
			if !strings.Contains(m, fmt.Sprintf(`delayq_relay_passes_total{result="ok",shard="%d"}`, i)) ||
				strings.Contains(m, fmt.Sprintf(`delayq_relay_passes_total{result="ok",shard="%d"} 0`+"\n", i)) {
				return false
			}
		}
		return true
	}, func() string { _, m, _ := httpGet(base + "/metrics"); return m })

	// The CLI on the same configuration reads the same shards.
	path := filepath.Join(t.TempDir(), "delayq.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := cli.Main(ctx, []string{"ledger", "list", "--topic", "bills", "--state", "waiting", "--limit", "1000", "--json", "--config", path}, &out, &errOut, "test"); code != 0 {
		t.Fatalf("delayq ledger list: exit %d: %s", code, errOut.String())
	}
	var p httpapi.LedgerPage
	if err := json.Unmarshal(out.Bytes(), &p); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(p.Rows) != later-1 {
		t.Errorf("delayq ledger list: %d rows, want the %d still waiting on the three shards", len(p.Rows), later-1)
	}

	// delayq recover runs each shard's recoverer: nothing is lost.
	out.Reset()
	if code := cli.Main(ctx, []string{"recover", "--json", "--config", path}, &out, &errOut, "test"); code != 0 {
		t.Errorf("delayq recover: exit %d: %s", code, errOut.String())
	}
	// A cursor of a shard the ledger does not have is the caller's error.
	if code, body, _ := httpGet(base + "/v1/ledger?state=waiting&cursor=1_1_7"); code != http.StatusBadRequest || !strings.Contains(body, `"cursor"`) {
		t.Errorf("GET /v1/ledger with a cursor of shard 7: %d %s, want 400 naming cursor", code, body)
	}

	// A process given the shards in another order would look for rows on
	// the wrong shards: it is refused at start, as a configuration error.
	swapped := strings.Replace(cfg, fmt.Sprintf("shards: [%q, %q]", dsns[1], dsns[2]), fmt.Sprintf("shards: [%q, %q]", dsns[2], dsns[1]), 1)
	if swapped == cfg {
		t.Fatal("the configuration's shards were not swapped")
	}
	if err := os.WriteFile(path, []byte(swapped), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errOut.Reset()
	if code := cli.Main(ctx, []string{"ledger", "list", "--config", path}, &out, &errOut, "test"); code != 2 || !strings.Contains(errOut.String(), "sql.shards") {
		t.Errorf("delayq ledger list with the shards swapped: exit %d, want 2 naming sql.shards: %s", code, errOut.String())
	}
}

func postJSON(t *testing.T, u string, v any, want int) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(u, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("POST %s: %d %s, want %d", u, resp.StatusCode, body, want)
	}
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	code, body, err := httpGet(u)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET %s: %d %v %s", u, code, err, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v: %s", u, err, body)
	}
}

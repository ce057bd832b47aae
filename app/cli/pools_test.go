package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/delayq/delayq/app/cli"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// poolsYAML is a worker with a shared pool over two HTTP-target topics,
// and, with bad, a third topic in it that has no handler.
func poolsYAML(ns, dir string, metricsPort int, bad bool) string {
	extra := ""
	if bad {
		extra = ", nohandler: 2"
	}
	return fmt.Sprintf(`log: {level: warn}
redis: {mode: single, addrs: [%q], namespace: %q}
sql: {driver: sqlite, sqlite_path: %q}
orders: {enabled: false}
worker:
  registry_every: 50ms
  target_allow_hosts: [127.0.0.1]
  topics:
    urgent: {target: {url: "http://127.0.0.1:9/urgent"}}
    bulk: {target: {url: "http://127.0.0.1:9/bulk"}}
  pools:
    notify: {concurrency: 6, topics: {urgent: 3, bulk: 1%s}}
metrics: {listen: "127.0.0.1:%d"}
`, redisAddr(), ns, filepath.Join(dir, "ledger.db"), extra, metricsPort)
}

// A worker's shared pool, from worker.pools, where an operator looks:
// delayq workers (both ways) and the metrics. A pool naming a topic the
// program has no handler for is refused at the start with exit 2, naming
// the key.
func TestWorkerPoolsShowInWorkersAndMetrics(t *testing.T) {
	_, ns := testenv.Redis(t)
	dir := t.TempDir()
	port := testenv.FreePort(t)
	cfgPath := filepath.Join(dir, "delayq.yaml")
	if err := os.WriteFile(cfgPath, []byte(poolsYAML(ns, dir, testenv.FreePort(t), true)), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := cli.Main(context.Background(), []string{"worker", "--config", cfgPath}, &out, &errOut, "test"); code != cli.ExitUsage ||
		!strings.Contains(errOut.String(), "worker.pools.notify.topics.nohandler") {
		t.Fatalf("a pool topic without a handler: exit %d, want %d naming the key: %s", code, cli.ExitUsage, errOut.String())
	}

	startCommand(t, poolsYAML(ns, dir, port, false), "worker")
	if err := os.WriteFile(cfgPath, []byte(poolsYAML(ns, dir, testenv.FreePort(t), false)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	var list []queue.WorkerInfo
	testenv.WaitFor(ctx, t, "the worker's registry entry", func() bool {
		out.Reset()
		if cli.Main(ctx, []string{"workers", "--json", "--config", cfgPath}, &out, &errOut, "test") != cli.ExitOK {
			return false
		}
		return json.Unmarshal(out.Bytes(), &list) == nil && len(list) == 1
	}, func() string { return out.String() + errOut.String() })
	w := list[0]
	if len(w.Pools) != 1 || w.Pools[0].Name != "notify" || w.Pools[0].Concurrency != 6 {
		t.Fatalf("pools %+v", w.Pools)
	}
	weights := map[string]int{}
	for _, tp := range w.Topics {
		if tp.Pool == "notify" {
			weights[tp.Topic] = tp.Weight
			if tp.Concurrency != 6 {
				t.Errorf("%s: concurrency %d, want the pool's 6", tp.Topic, tp.Concurrency)
			}
		}
	}
	if weights["urgent"] != 3 || weights["bulk"] != 1 {
		t.Fatalf("pooled topics %v, want urgent 3 and bulk 1: %+v", weights, w.Topics)
	}
	out.Reset()
	// Jobs held count slots a claim in progress reserved: any number.
	shown := regexp.MustCompile(`notify \(6, \d+: bulk×1, urgent×3\)`)
	if code := cli.Main(ctx, []string{"workers", "--config", cfgPath}, &out, &errOut, "test"); code != cli.ExitOK ||
		!strings.Contains(out.String(), "POOLS") || !shown.MatchString(out.String()) {
		t.Fatalf("workers: exit %d:\n%s", code, out.String())
	}
	want := `delayq_worker_pool_concurrency{pool="notify"} 6`
	var body string
	testenv.WaitFor(ctx, t, "the pool's metrics", func() bool {
		_, body, _ = httpGet(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
		return strings.Contains(body, want) && strings.Contains(body, `delayq_worker_pool_in_flight_jobs{pool="notify"} `)
	}, func() string { return body })
}

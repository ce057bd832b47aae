package cli_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/testenv"
)

// `delayq serve` leaves the orders demo module off unless orders.enabled:
// no tables, routes, topic or metrics of it. DELAYQ_ORDERS_ENABLED alone
// turns it on, its topic durable.
//
// Not parallel: it sets an environment variable.
func TestServeRunsOrdersOnlyWhenEnabled(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		t.Run(fmt.Sprintf("enabled=%t", enabled), func(t *testing.T) {
			if enabled {
				t.Setenv("DELAYQ_ORDERS_ENABLED", "true")
			}
			_, ns := testenv.Redis(t)
			port := testenv.FreePort(t)
			db := filepath.Join(t.TempDir(), "ledger.db")
			logs := startCommand(t, fmt.Sprintf(`log: {level: warn, format: json}
redis: {mode: single, addrs: [%q], namespace: %q}
sql: {driver: sqlite, sqlite_path: %q}
http: {listen: "127.0.0.1:%d"}
`, redisAddr(), ns, db, port), "serve")
			base := fmt.Sprintf("http://127.0.0.1:%d", port)
			testenv.WaitFor(testenv.Context(t), t, "serve to answer /readyz", func() bool {
				code, _, err := httpGet(base + "/readyz")
				return err == nil && code == 200
			}, func() string { return "logs:\n" + logs() })

			wantRoute := map[bool]int{false: 404, true: 200}[enabled]
			if code, body, err := httpGet(base + "/v1/orders/summary"); err != nil || code != wantRoute {
				t.Errorf("GET /v1/orders/summary: %d %v, want %d: %s", code, err, wantRoute, body)
			}
			_, metrics, err := httpGet(base + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			for _, series := range []string{
				`delayq_durable_pushes_total{result="pushed",topic="order_close"} 0`,
				"delayq_orderclose_sweep_interval_seconds 60",
			} {
				if strings.Contains(metrics, series) != enabled {
					t.Errorf("/metrics shows %s: %t, want %t", series, !enabled, enabled)
				}
			}

			g, err := gorm.Open(sqlite.Open(db), &gorm.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if sqlDB, err := g.DB(); err == nil {
				t.Cleanup(func() { sqlDB.Close() })
			}
			if got := g.Migrator().HasTable("orders"); got != enabled {
				t.Errorf("the orders table exists: %t, want %t", got, enabled)
			}
		})
	}
}

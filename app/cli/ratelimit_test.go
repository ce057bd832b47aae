package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delayq/delayq/internal/testenv"
)

// delayq stats, directly on Redis, shows a topic's configured rate limit:
// a column in the table, "rate_limit" in the JSON.
func TestStatsShowsRateLimit(t *testing.T) {
	_, ns := testenv.Redis(t) // the namespace only: its keys go at cleanup
	cfg := filepath.Join(t.TempDir(), "delayq.yaml")
	yaml := "redis:\n  namespace: " + ns + "\nworker:\n  topics:\n    sms: {rate_limit: 500}\n    mail: {concurrency: 2}\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--config", cfg, "--redis", testenv.DefaultRedisAddr, "--sql-dsn", testenv.MySQLDSN(t)}
	code, out, errOut := runCLI(t, append([]string{"stats", "sms", "mail"}, args...)...)
	if code != ExitOK || !strings.Contains(out, "RATE LIMIT") || !strings.Contains(out, "500/s burst 50") {
		t.Fatalf("exit %d, stdout %s, stderr %s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, append([]string{"stats", "sms", "mail", "--json"}, args...)...)
	if code != ExitOK || strings.Count(out, `"rate_limit"`) != 1 || !strings.Contains(out, `"per_second": 500`) {
		t.Fatalf("exit %d, stdout %s, stderr %s", code, out, errOut)
	}
}

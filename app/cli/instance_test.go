package cli

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/testenv"
)

// apiInstance serves the API over d (its Logger quiet) for the test's
// length, and returns its URL: the instance a command reaches with --api.
func apiInstance(t *testing.T, d httpapi.Deps) string {
	t.Helper()
	d.Logger = testenv.QuietLogger()
	h, err := httpapi.New(d)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// directConfig writes a configuration file for commands that work on the
// backends directly: the test's Redis namespace ns, a SQLite ledger in a
// temporary directory, and extra YAML after them. It returns the file's
// path.
func directConfig(t *testing.T, ns, extra string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "delayq.yaml")
	yaml := fmt.Sprintf("redis: {mode: single, addrs: [%q], namespace: %s}\nsql: {driver: sqlite, sqlite_path: %q}\n%s",
		testenv.DefaultRedisAddr, ns, filepath.Join(dir, "dq.db"), extra)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

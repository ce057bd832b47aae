package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delayq/delayq/app/config"
)

// The table prefix becomes part of SQL identifiers: anything but
// [A-Za-z0-9_]{1,32} is refused at load, naming the key, before any
// backend is opened.
func TestTablePrefixIsValidated(t *testing.T) {
	for _, p := range []string{"dq'", "dq`", "dq\"", "dq`; DROP TABLE x; --", "dq ledger", "dq-", "dq.", "", strings.Repeat("p", 33), "dq\x00", "dé_"} {
		c := config.Defaults()
		c.SQL.TablePrefix = p
		err := c.Validate()
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Key != "sql.table_prefix" || !errors.Is(err, config.ErrInvalid) {
			t.Errorf("table_prefix %q: %v, want an error on sql.table_prefix", p, err)
		}
	}
	for _, p := range []string{"dq_", "tenant42_", "X", strings.Repeat("p", 32)} {
		c := config.Defaults()
		c.SQL.TablePrefix = p
		if err := c.Validate(); err != nil {
			t.Errorf("table_prefix %q: %v", p, err)
		}
	}
	t.Setenv("DELAYQ_SQL_TABLE_PREFIX", "dq_'")
	if _, err := config.Load("", nil); err == nil || !strings.Contains(err.Error(), "sql.table_prefix") {
		t.Fatalf("Load with a quote in DELAYQ_SQL_TABLE_PREFIX: %v", err)
	}
}

// The TLS keys load from the file and the environment, and Validate checks
// what it can without connecting.
func TestTLSKeys(t *testing.T) {
	dir := t.TempDir()
	file := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("PEM"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ca, cert, key := file("ca.pem"), file("c.pem"), file("c.key")
	path := writeFile(t, "redis:\n  mode: single\n  addrs: [r:6379]\n  tls: true\n  tls_ca_file: "+ca+
		"\n  tls_server_name: redis.internal\nsql:\n  driver: mysql\n  tls_ca_file: "+ca+"\n")
	t.Setenv("DELAYQ_SQL_DSN", "u:p@tcp(db:3306)/delayq")
	t.Setenv("DELAYQ_REDIS_TLS_CERT_FILE", cert)
	t.Setenv("DELAYQ_REDIS_TLS_KEY_FILE", key)
	t.Setenv("DELAYQ_SQL_TLS_SERVER_NAME", "db.internal")
	c, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, s := c.Redis, c.SQL
	if !r.TLS || r.TLSCAFile != ca || r.TLSCertFile != cert || r.TLSKeyFile != key || r.TLSServerName != "redis.internal" {
		t.Fatalf("redis TLS keys: %+v", r)
	}
	if s.TLSCAFile != ca || s.TLSServerName != "db.internal" || !s.TLSEnabled() {
		t.Fatalf("sql TLS keys: %+v", s)
	}

	base := c
	cases := []struct {
		name   string
		change func(*config.Config)
		key    string
	}{
		{"redis file without tls", func(c *config.Config) { c.Redis.TLS = false }, "redis.tls_ca_file"},
		{"redis server name without tls", func(c *config.Config) { c.Redis.TLS, c.Redis.TLSCAFile = false, "" }, "redis.tls_server_name"},
		{"redis cert without key", func(c *config.Config) { c.Redis.TLSKeyFile = "" }, "redis.tls_cert_file"},
		{"redis CA missing", func(c *config.Config) { c.Redis.TLSCAFile = filepath.Join(dir, "gone.pem") }, "redis.tls_ca_file"},
		{"redis key is a directory", func(c *config.Config) { c.Redis.TLSKeyFile = dir }, "redis.tls_key_file"},
		{"embedded redis with tls", func(c *config.Config) { c.Redis.Mode, c.Redis.Addrs = "embedded", nil }, "redis.tls"},
		{"sql key without cert", func(c *config.Config) { c.SQL.TLSKeyFile = key }, "sql.tls_cert_file"},
		{"sql CA missing", func(c *config.Config) { c.SQL.TLSCAFile = filepath.Join(dir, "gone.pem") }, "sql.tls_ca_file"},
		{"sql tls with sqlite", func(c *config.Config) { c.SQL.Driver, c.SQL.DSN = "sqlite", "" }, "sql.driver"},
	}
	for _, tc := range cases {
		c := base
		tc.change(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), "config: "+tc.key+" = ") {
			t.Errorf("%s: %v, want an error on %s", tc.name, err, tc.key)
		}
	}
}

// Validation errors show paths and names, never the passwords or the DSN
// that sit next to them in the configuration.
func TestValidationErrorsHoldNoSecrets(t *testing.T) {
	c := config.Defaults()
	c.Redis.Mode, c.Redis.Addrs, c.Redis.Password = "single", []string{"r:6379"}, "redis-secret-1"
	c.Redis.TLSCAFile = "/nonexistent/ca.pem"
	c.SQL.Driver, c.SQL.DSN = "mysql", "u:sql-secret-2@tcp(db:3306)/delayq"
	c.SQL.TablePrefix = "bad'"
	c.SQL.TLSCertFile = "/nonexistent/c.pem"
	c.HTTP.Listen, c.HTTP.Token = "0.0.0.0:8080", "token-secret-3"
	c.HTTP.ReadTimeout = -1
	err := c.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, secret := range []string{"redis-secret-1", "sql-secret-2", "token-secret-3"} {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("the error shows %q: %v", secret, err)
		}
	}
}

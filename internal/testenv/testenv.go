// Package testenv hands tests the services they need: a namespace of their
// own on the shared test Redis, a database of their own on the shared test
// MariaDB/MySQL, an in-process miniredis, a SQLite file, and redis-server
// processes (single nodes or a cluster) that a test starts, kills and
// restarts itself, and an address that refuses connections for as long as
// the test runs (RefusedAddr: a server that is down).
//
// The shared services are found through environment variables, with the
// defaults that scripts/test-services.sh (run by `make test`) guarantees:
//
//	DELAYQ_TEST_REDIS_ADDR      127.0.0.1:6379
//	DELAYQ_TEST_MYSQL_ADDR      127.0.0.1:3306
//	DELAYQ_TEST_MYSQL_USER      root
//	DELAYQ_TEST_MYSQL_PASSWORD  (empty)
//	DELAYQ_TEST_MYSQL_DB        test
//	DELAYQ_TEST_MYSQL_PARAMS    interpolateParams=true&tx_isolation=%27READ-COMMITTED%27
//
// Redis and MySQLDSN fail the test when their service does not answer; they
// never skip. StartRedis and StartCluster skip only when redis-server is not
// installed.
//
// It also holds what every test package shares: Context (a test's context),
// QuietLogger, SyncBuffer, and the waits. A test waits on what a component
// reports, through a hook that feeds an Event or a Counter (a worker's
// Observer or OnDead, a recoverer's OnReport, a handler), or on a channel
// with Receive; WaitFor, the one poll, is for state nothing can report (another
// process, an HTTP answer, Redis's or SQL's contents, a clock).
package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// Environment variables naming the shared test services.
const (
	EnvRedisAddr     = "DELAYQ_TEST_REDIS_ADDR"
	EnvMySQLAddr     = "DELAYQ_TEST_MYSQL_ADDR"
	EnvMySQLUser     = "DELAYQ_TEST_MYSQL_USER"
	EnvMySQLPassword = "DELAYQ_TEST_MYSQL_PASSWORD"
	EnvMySQLDB       = "DELAYQ_TEST_MYSQL_DB"
	// EnvMySQLParams are extra DSN parameters of the tests' connections.
	EnvMySQLParams = "DELAYQ_TEST_MYSQL_PARAMS"
)

// Defaults used when the environment variables are unset or empty.
const (
	DefaultRedisAddr = "127.0.0.1:6379"
	DefaultMySQLAddr = "127.0.0.1:3306"
	DefaultMySQLUser = "root"
	DefaultMySQLDB   = "test"
	// DefaultMySQLParams are the ledger's production settings: one round
	// trip per statement (no server-side prepare) and READ COMMITTED, which
	// spares the batched writes InnoDB's gap locks. tx_isolation is
	// MariaDB's (and MySQL 5.7's) name; MySQL 8 wants
	// transaction_isolation=%27READ-COMMITTED%27.
	DefaultMySQLParams = "interpolateParams=true&tx_isolation=%27READ-COMMITTED%27"
)

// hint is appended to every "service does not answer" failure.
const hint = "run `make test` or scripts/test-services.sh first, or point the DELAYQ_TEST_* variables at a running service"

// getenv returns the value of key, or def when it is unset or empty.
func getenv(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// randomHex returns 2*n random lowercase hex digits.
func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("testenv: random bytes: %v", err)
	}
	return hex.EncodeToString(b)
}

// maxNameLen bounds the part of a namespace taken from the test's name.
const maxNameLen = 32

// sanitizeName keeps the letters, digits and underscores of a test name,
// turns every other run of characters into one underscore, and bounds the
// result to maxNameLen characters.
func sanitizeName(name string) string {
	var b strings.Builder
	lastUnderscore := false
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		switch {
		case ok:
			b.WriteRune(r)
			lastUnderscore = false
		case !lastUnderscore:
			b.WriteByte('_')
			lastUnderscore = true
		}
		if b.Len() >= maxNameLen {
			break
		}
	}
	return strings.Trim(b.String(), "_")
}

// namespace returns a key prefix unique to this test: "t", the sanitized
// test name, "_" and 8 random hex digits (for example
// "tTestEnqueue_dup_1f0c9a3b"); only [A-Za-z0-9_].
func namespace(t testing.TB) string {
	return "t" + sanitizeName(t.Name()) + "_" + randomHex(t, 4)
}

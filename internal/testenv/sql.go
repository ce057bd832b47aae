package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	_ "github.com/go-sql-driver/mysql" // registers the "mysql" database/sql driver
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// mysqlServer returns the address of the test MariaDB/MySQL and a DSN that
// logs in to it without selecting a database.
func mysqlServer() (addr, adminDSN string) {
	addr = getenv(EnvMySQLAddr, DefaultMySQLAddr)
	user := getenv(EnvMySQLUser, DefaultMySQLUser)
	pass := getenv(EnvMySQLPassword, "")
	// lock_wait_timeout is sent as a session variable: a DROP DATABASE that
	// waits on a metadata lock some leaked transaction holds gives up after
	// 30 s instead of the server's default of a year.
	return addr, fmt.Sprintf("%s:%s@tcp(%s)/?timeout=5s&lock_wait_timeout=30", user, pass, addr)
}

// MySQLDSN creates a database of its own for this test (named "dqt_" + 16
// random hex digits) on the test MariaDB/MySQL (DELAYQ_TEST_MYSQL_ADDR,
// _USER, _PASSWORD) and returns a go-sql-driver/mysql DSN for it, with
// parseTime=true&loc=UTC&multiStatements=true and DELAYQ_TEST_MYSQL_PARAMS
// (default DefaultMySQLParams). On cleanup it drops that
// database, and only that one.
//
// It fails the test with t.Fatal when the server does not answer or refuses
// the login; it never skips.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	addr, adminDSN := mysqlServer()
	admin, err := sql.Open("mysql", adminDSN)
	if err != nil {
		t.Fatalf("testenv: MySQL at %s (%s): %v", addr, EnvMySQLAddr, err)
	}
	defer admin.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		t.Fatalf("testenv: MySQL at %s (%s) does not answer or refuses the login: %v; %s", addr, EnvMySQLAddr, err, hint)
	}
	name := "dqt_" + randomHex(t, 8)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		t.Fatalf("testenv: MySQL at %s: CREATE DATABASE %s: %v", addr, name, err)
	}
	t.Cleanup(func() {
		if err := dropDatabase(adminDSN, name); err != nil {
			t.Errorf("testenv: MySQL at %s: DROP DATABASE %s: %v", addr, name, err)
		}
	})

	user := getenv(EnvMySQLUser, DefaultMySQLUser)
	pass := getenv(EnvMySQLPassword, "")
	return fmt.Sprintf("%s:%s@tcp(%s)/%s?parseTime=true&loc=UTC&multiStatements=true&%s", user, pass, addr, name,
		getenv(EnvMySQLParams, DefaultMySQLParams))
}

// dropDatabase drops one database over a fresh connection.
func dropDatabase(adminDSN, name string) error {
	admin, err := sql.Open("mysql", adminDSN)
	if err != nil {
		return err
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout+15*time.Second)
	defer cancel()
	_, err = admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`")
	return err
}

// gormConfig is the gorm configuration of every database testenv opens:
// nothing logged.
func gormConfig() *gorm.Config {
	return &gorm.Config{Logger: logger.Default.LogMode(logger.Silent)}
}

// MySQL opens gorm (gorm.io/driver/mysql) on MySQLDSN(t), with its logger
// silent, and closes it on cleanup (before the database is dropped).
func MySQL(t testing.TB) *gorm.DB {
	t.Helper()
	return OpenMySQL(t, MySQLDSN(t))
}

// OpenMySQL opens gorm on dsn (a database of the test's own, or a server
// the test started) with a silent logger, closed on cleanup.
func OpenMySQL(t testing.TB, dsn string) *gorm.DB {
	t.Helper()
	db, err := gorm.Open(mysql.Open(dsn), gormConfig())
	if err != nil {
		t.Fatalf("testenv: gorm open MySQL: %v", err)
	}
	closeOnCleanup(t, db)
	return db
}

// SQLite opens gorm on a fresh SQLite file in t.TempDir() (through
// github.com/glebarez/sqlite, pure Go, no cgo), with the WAL journal, a
// 10 s busy timeout and IMMEDIATE transactions, so that concurrent writers
// wait for each other instead of failing with SQLITE_BUSY. Its logger is
// silent; it is closed on cleanup.
func SQLite(t testing.TB) *gorm.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "test.db")
	dsn := "file:" + path +
		"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	db, err := gorm.Open(sqlite.Open(dsn), gormConfig())
	if err != nil {
		t.Fatalf("testenv: gorm open SQLite %s: %v", path, err)
	}
	closeOnCleanup(t, db)
	return db
}

// closeOnCleanup closes db's connection pool when the test ends.
func closeOnCleanup(t testing.TB, db *gorm.DB) {
	t.Helper()
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatalf("testenv: gorm DB: %v", err)
	}
	t.Cleanup(func() { _ = sqlDB.Close() })
}

package backend

import (
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/glebarez/sqlite"
	"github.com/sirupsen/logrus"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/delayq/delayq/app/config"
)

// sqlitePragmas make the SQLite ledger safe for concurrent writers: WAL,
// a busy timeout instead of "database is locked", write transactions that
// take the lock up front.
const sqlitePragmas = "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)&_txlock=immediate"

// OpenSQLShard opens the database of a further ledger shard (docs/design.md
// §7.1) at dsn, a go-sql-driver/mysql DSN, with c's other settings (pool,
// TLS): for `delayq bench --sql-shards`. Close closes it with the rest.
func (b *Backends) OpenSQLShard(c config.SQL, dsn string, log logrus.FieldLogger) (*gorm.DB, error) {
	if c.Driver != "mysql" {
		return nil, fmt.Errorf("backend: a ledger shard needs sql.driver mysql (it is %s)", c.Driver)
	}
	// The configured server name is shard 0's host's; a shard's
	// certificate is checked against its own DSN's host.
	c.DSN, c.TLSServerName = dsn, ""
	return b.openSQL(c, log)
}

// openSQL opens the ledger's database.
func (b *Backends) openSQL(c config.SQL, log logrus.FieldLogger) (*gorm.DB, error) {
	gcfg := &gorm.Config{Logger: logger.Discard}
	var db *gorm.DB
	var err error
	switch c.Driver {
	case "mysql":
		dsn, deregister, derr := mysqlDSN(c, log)
		if derr != nil {
			return nil, derr
		}
		if deregister != nil {
			b.closers = append(b.closers, deregister)
		}
		db, err = gorm.Open(mysql.Open(dsn), gcfg)
	case "sqlite":
		b.Embedded = true
		log.WithField("path", c.SQLitePath).Warn("SQLite ledger: for trying delayq out, not for production")
		db, err = gorm.Open(sqlite.Open(c.SQLitePath+sqlitePragmas), gcfg)
	default:
		return nil, fmt.Errorf("backend: sql.driver %q", c.Driver)
	}
	if err != nil {
		var verify *tls.CertificateVerificationError
		if errors.As(err, &verify) {
			return nil, fmt.Errorf("backend: open %s: the server's TLS certificate does not verify (check sql.tls_ca_file and sql.tls_server_name, or the DSN's tls): %w", c.Driver, err)
		}
		return nil, fmt.Errorf("backend: open %s: %w", c.Driver, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("backend: %s pool: %w", c.Driver, err)
	}
	b.closers = append(b.closers, sqlDB.Close)
	sqlDB.SetMaxOpenConns(c.MaxOpenConns)
	sqlDB.SetMaxIdleConns(c.MaxIdleConns)
	sqlDB.SetConnMaxLifetime(c.ConnMaxLifetime)
	if c.Driver == "sqlite" {
		// One writer at a time is all SQLite has; a small pool keeps
		// writers queueing in Go instead of spinning on the busy timeout.
		sqlDB.SetMaxOpenConns(min(c.MaxOpenConns, 4))
	}
	return db, nil
}

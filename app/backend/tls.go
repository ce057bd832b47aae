package backend

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/app/config"
)

// tlsFiles are the TLS settings of one backend, and the configuration
// section they came from ("redis" or "sql"), for error messages.
type tlsFiles struct {
	section                   string
	caFile, certFile, keyFile string
	serverName                string
}

// config builds the client's tls.Config: TLS 1.2 or later, the server's
// certificate verified against caFile (else the system's roots) and
// serverName (else the host dialled), and the client certificate if one is
// given. Errors name the configuration key and the file, never the key's
// contents.
func (f tlsFiles) config() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.serverName}
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, fmt.Errorf("backend: %s.tls_ca_file: %w", f.section, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("backend: %s.tls_ca_file %s: no PEM certificate in it", f.section, f.caFile)
		}
		c.RootCAs = pool
	}
	if f.certFile != "" || f.keyFile != "" {
		pair, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
		if err != nil {
			return nil, fmt.Errorf("backend: %s.tls_cert_file %s and %s.tls_key_file %s: %w",
				f.section, f.certFile, f.section, f.keyFile, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// redisTLS returns the Redis client's TLS configuration, nil without TLS.
func redisTLS(c config.Redis) (*tls.Config, error) {
	if !c.TLS {
		return nil, nil
	}
	return tlsFiles{section: "redis", caFile: c.TLSCAFile, certFile: c.TLSCertFile,
		keyFile: c.TLSKeyFile, serverName: c.TLSServerName}.config()
}

// mysqlTLSSeq numbers the TLS configurations registered with the MySQL
// driver: its registry is global, and every Open gets a name of its own.
var mysqlTLSSeq atomic.Uint64

// mysqlDSN returns the DSN to open: c.DSN as it is when no sql.tls_* key
// is set or when the DSN has a tls parameter of its own (the user's choice
// wins; a warning says the keys are ignored), else c.DSN with tls=<name> of
// a TLS configuration registered with go-sql-driver/mysql from the
// sql.tls_* keys. deregister, when not nil, removes that registration
// (once the pool is closed). Neither the DSN nor its password is ever put
// into an error or a log.
func mysqlDSN(c config.SQL, log logrus.FieldLogger) (dsn string, deregister func() error, err error) {
	if !c.TLSEnabled() {
		return c.DSN, nil, nil
	}
	parsed, err := mysql.ParseDSN(c.DSN)
	if err != nil {
		// The driver's parse errors quote no part of the DSN.
		return "", nil, fmt.Errorf("backend: sql.dsn: %w", err)
	}
	if parsed.TLSConfig != "" {
		log.WithField("dsn_tls", parsed.TLSConfig).Warn("sql.dsn has a tls parameter: it is used, and the sql.tls_* keys are ignored")
		return c.DSN, nil, nil
	}
	tc, err := tlsFiles{section: "sql", caFile: c.TLSCAFile, certFile: c.TLSCertFile,
		keyFile: c.TLSKeyFile, serverName: c.TLSServerName}.config()
	if err != nil {
		return "", nil, err
	}
	name := "delayq-" + strconv.FormatUint(mysqlTLSSeq.Add(1), 10)
	if err := mysql.RegisterTLSConfig(name, tc); err != nil {
		return "", nil, fmt.Errorf("backend: register the MySQL TLS configuration: %w", err)
	}
	deregister = func() error { mysql.DeregisterTLSConfig(name); return nil }
	// The parameters follow the last '/' (the driver parses it the same
	// way: a password may hold '/' or '?', the parameters may not).
	params := c.DSN[strings.LastIndexByte(c.DSN, '/')+1:]
	sep := "?"
	switch {
	case strings.HasSuffix(params, "?"), strings.HasSuffix(params, "&"):
		sep = ""
	case strings.Contains(params, "?"):
		sep = "&"
	}
	return c.DSN + sep + "tls=" + name, deregister, nil
}

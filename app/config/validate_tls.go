package config

import (
	"fmt"
	"os"
	"regexp"
)

// tablePrefixRE is what the ledger accepts as a table prefix (the ledger
// checks it again): the prefix goes into SQL as part of an identifier, so
// only a charset that needs no quoting may reach it.
var tablePrefixRE = regexp.MustCompile(`^[A-Za-z0-9_]{1,32}$`)

// validateSecurity checks the keys that keep input out of SQL and configure
// TLS: sql.table_prefix, and the redis.tls_* and sql.tls_* files and names.
// Values here are paths and names, never secrets, so errors may show them.
func (c *Config) validateSecurity(p *problems) {
	bad := p.bad

	if !tablePrefixRE.MatchString(c.SQL.TablePrefix) {
		bad("sql.table_prefix", fmt.Sprintf("%q", c.SQL.TablePrefix), "want 1-32 letters, digits or underscores")
	}

	// file checks that a TLS file exists and is a regular file; whether it
	// holds what it should is checked when the backend is opened.
	file := func(key, path string) {
		if path == "" {
			return
		}
		fi, err := os.Stat(path)
		switch {
		case err != nil:
			bad(key, path, "cannot use the file: %v", err)
		case !fi.Mode().IsRegular():
			bad(key, path, "not a regular file")
		}
	}
	pair := func(prefix, cert, key string) {
		if (cert == "") != (key == "") {
			bad(prefix+"tls_cert_file", cert, "give %stls_cert_file and %stls_key_file both, or neither", prefix, prefix)
		}
	}

	r := c.Redis
	if !r.TLS {
		for _, kv := range [][2]string{
			{"redis.tls_ca_file", r.TLSCAFile}, {"redis.tls_cert_file", r.TLSCertFile},
			{"redis.tls_key_file", r.TLSKeyFile}, {"redis.tls_server_name", r.TLSServerName},
		} {
			if kv[1] != "" {
				bad(kv[0], kv[1], "needs redis.tls: true")
			}
		}
	} else if r.Mode == "embedded" {
		bad("redis.tls", true, "the embedded Redis has no TLS; set redis.mode and redis.addrs")
	}
	file("redis.tls_ca_file", r.TLSCAFile)
	file("redis.tls_cert_file", r.TLSCertFile)
	file("redis.tls_key_file", r.TLSKeyFile)
	pair("redis.", r.TLSCertFile, r.TLSKeyFile)

	s := c.SQL
	if s.TLSEnabled() && s.Driver != "mysql" {
		bad("sql.driver", s.Driver, "sql.tls_* keys need driver mysql")
	}
	file("sql.tls_ca_file", s.TLSCAFile)
	file("sql.tls_cert_file", s.TLSCertFile)
	file("sql.tls_key_file", s.TLSKeyFile)
	pair("sql.", s.TLSCertFile, s.TLSKeyFile)
}

// TLSEnabled reports whether any sql.tls_* key is set: the ledger's MySQL
// connection then uses TLS with them (unless the DSN says otherwise).
func (s SQL) TLSEnabled() bool {
	return s.TLSCAFile != "" || s.TLSCertFile != "" || s.TLSKeyFile != "" || s.TLSServerName != ""
}

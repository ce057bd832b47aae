package backend_test

import (
	"context"
	"crypto/tls"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/app/backend"
	"github.com/delayq/delayq/app/config"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

func tlsLogger(buf *testenv.SyncBuffer) *logrus.Logger {
	l := logrus.New()
	l.SetOutput(buf)
	l.SetLevel(logrus.DebugLevel)
	return l
}

// tlsOpen validates cfg (as Load would) and opens it, closing what opened
// on cleanup. The error is Validate's or Open's.
func tlsOpen(t *testing.T, cfg config.Config, log logrus.FieldLogger) (*backend.Backends, error) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := backend.Open(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, nil
}

// TestRedisTLSAndPassword runs a private redis-server that speaks only TLS,
// wants a client certificate and a password, and checks that backend.Open
// works with the right CA, certificate and password from the configuration
// and fails at once, naming the key to fix, with a wrong CA, a wrong server
// name, no client certificate or a wrong password.
func TestRedisTLSAndPassword(t *testing.T) {
	t.Parallel()
	const password = "redis-pw-7f3a9c"
	pki, otherCA := testenv.NewPKI(t), testenv.NewPKI(t)
	srv := testenv.StartRedis(t, testenv.RedisOptions{TLS: pki, Password: password, ClientCerts: true})

	good := func() config.Config {
		cfg := config.Defaults()
		cfg.HTTP.Enabled = false
		cfg.SQL.SQLitePath = filepath.Join(t.TempDir(), "ledger.db")
		cfg.Redis.Mode, cfg.Redis.Addrs = "single", []string{srv.Addr}
		cfg.Redis.Password = password
		cfg.Redis.TLS = true
		cfg.Redis.TLSCAFile = pki.CAFile
		cfg.Redis.TLSCertFile, cfg.Redis.TLSKeyFile = pki.ClientCertFile, pki.ClientKeyFile
		cfg.Redis.Namespace = "tlstest"
		return cfg
	}

	t.Run("right CA, certificate and password", func(t *testing.T) {
		logs := &testenv.SyncBuffer{}
		b, err := tlsOpen(t, good(), tlsLogger(logs))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := b.Queue.Enqueue(ctx, "t", queue.NewJob{ID: "over-tls"}); err != nil {
			t.Fatalf("enqueue over TLS: %v", err)
		}
		if info, err := b.Queue.Get(ctx, "t", "over-tls"); err != nil || info.State != queue.StateWaiting {
			t.Fatalf("get over TLS: %+v %v", info, err)
		}
		if strings.Contains(logs.String(), password) {
			t.Fatal("the Redis password appears in the log")
		}
	})
	t.Run("server name from the configuration", func(t *testing.T) {
		cfg := good()
		cfg.Redis.TLSServerName = testenv.PKIServerName
		if _, err := tlsOpen(t, cfg, tlsLogger(&testenv.SyncBuffer{})); err != nil {
			t.Fatal(err)
		}
	})

	failures := []struct {
		name   string
		change func(*config.Config)
		want   string // in the error
	}{
		{"wrong CA", func(c *config.Config) { c.Redis.TLSCAFile = otherCA.CAFile }, "redis.tls_ca_file"},
		{"system roots", func(c *config.Config) { c.Redis.TLSCAFile = "" }, "redis.tls_ca_file"},
		{"wrong server name", func(c *config.Config) { c.Redis.TLSServerName = "wrong.invalid" }, "redis.tls_server_name"},
		{"no client certificate", func(c *config.Config) { c.Redis.TLSCertFile, c.Redis.TLSKeyFile = "", "" }, "redis.tls_cert_file"},
		{"client certificate of another CA", func(c *config.Config) {
			c.Redis.TLSCertFile, c.Redis.TLSKeyFile = otherCA.ClientCertFile, otherCA.ClientKeyFile
		}, "redis.tls_cert_file"},
		{"wrong password", func(c *config.Config) { c.Redis.Password = "not-" + password }, "redis.password"},
		{"no password", func(c *config.Config) { c.Redis.Password = "" }, "redis.password"},
	}
	for _, f := range failures {
		t.Run(f.name, func(t *testing.T) {
			cfg := good()
			f.change(&cfg)
			start := time.Now()
			b, err := tlsOpen(t, cfg, tlsLogger(&testenv.SyncBuffer{}))
			if err == nil {
				_ = b.Close()
				t.Fatal("Open succeeded")
			}
			t.Logf("Open: %v", err)
			if !strings.Contains(err.Error(), f.want) {
				t.Fatalf("error %q does not name %q", err, f.want)
			}
			if strings.Contains(err.Error(), password) {
				t.Fatalf("error %q shows the password", err)
			}
			if d := time.Since(start); d > 15*time.Second {
				t.Fatalf("took %v to fail", d)
			}
		})
	}
}

// TestRedisTLSDroppedAfterHandshake checks the case TLS 1.3 makes hard to
// see: a server that asks for the client's certificate, takes the
// handshake and then closes the connection without a word, as Redis does
// to a certificate it does not accept when its alert is lost to the
// close. Open must fail naming the certificate keys, not start as if
// Redis were merely down. A server that asks for no certificate and
// closes (a TLS proxy in front of a Redis that is down), and an address
// where nothing listens, are outages: Open starts.
func TestRedisTLSDroppedAfterHandshake(t *testing.T) {
	t.Parallel()
	pki := testenv.NewPKI(t)
	cert, err := tls.LoadX509KeyPair(pki.ServerCertFile, pki.ServerKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	// dropping serves TLS, asking for a client certificate (any) as auth
	// says, and closes every connection after its handshake.
	dropping := func(auth tls.ClientAuthType) (string, *atomic.Int64) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ln.Close() })
		handshakes := &atomic.Int64{}
		go func() {
			for {
				raw, err := ln.Accept()
				if err != nil {
					return
				}
				tc := tls.Server(raw, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13, ClientAuth: auth})
				if tc.Handshake() == nil {
					handshakes.Add(1)
				}
				_ = raw.Close() // no alert, no close_notify
			}
		}()
		return ln.Addr().String(), handshakes
	}
	cfg := func(addr string) config.Config {
		c := config.Defaults()
		c.HTTP.Enabled = false
		c.SQL.SQLitePath = filepath.Join(t.TempDir(), "ledger.db")
		c.Redis.Mode, c.Redis.Addrs, c.Redis.TLS = "single", []string{addr}, true
		c.Redis.TLSCAFile = pki.CAFile
		c.Redis.TLSCertFile, c.Redis.TLSKeyFile = pki.ClientCertFile, pki.ClientKeyFile
		return c
	}

	addr, handshakes := dropping(tls.RequestClientCert)
	_, err = tlsOpen(t, cfg(addr), tlsLogger(&testenv.SyncBuffer{}))
	if err == nil {
		t.Fatal("Open succeeded against a server that asks for a certificate and drops every client after the handshake")
	}
	if !strings.Contains(err.Error(), "redis.tls_cert_file") {
		t.Fatalf("error %q does not name redis.tls_cert_file", err)
	}
	if handshakes.Load() == 0 {
		t.Fatal("no handshake completed: the test did not test the drop after it")
	}

	proxy, proxied := dropping(tls.NoClientCert)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := closed.Addr().String()
	_ = closed.Close()
	for _, a := range []string{proxy, down} {
		logs := &testenv.SyncBuffer{}
		if _, err := tlsOpen(t, cfg(a), tlsLogger(logs)); err != nil {
			t.Fatalf("Open with Redis down behind %s: %v, want a start that waits for it", a, err)
		}
		if !strings.Contains(logs.String(), "does not answer yet") {
			t.Fatalf("no warning that Redis does not answer; logs:\n%s", logs)
		}
	}
	if proxied.Load() == 0 {
		t.Fatal("the proxy completed no handshake")
	}
}

// TestRedisTLSConfigRefused checks what Validate refuses before anything
// connects: TLS files without redis.tls, a certificate without its key, a
// file that does not exist.
func TestRedisTLSConfigRefused(t *testing.T) {
	t.Parallel()
	pki := testenv.NewPKI(t)
	cases := []struct {
		name   string
		change func(*config.Redis)
		key    string
	}{
		{"CA without tls", func(r *config.Redis) { r.TLS = false }, "redis.tls_ca_file"},
		{"certificate without key", func(r *config.Redis) { r.TLSKeyFile = "" }, "redis.tls_cert_file"},
		{"key without certificate", func(r *config.Redis) { r.TLSCertFile = "" }, "redis.tls_cert_file"},
		{"missing CA file", func(r *config.Redis) { r.TLSCAFile = filepath.Join(pki.Dir, "nope.pem") }, "redis.tls_ca_file"},
		{"directory as key", func(r *config.Redis) { r.TLSKeyFile = pki.Dir }, "redis.tls_key_file"},
		{"embedded with TLS", func(r *config.Redis) { r.Mode, r.Addrs = "embedded", nil }, "redis.tls"},
	}
	for _, c := range cases {
		cfg := config.Defaults()
		cfg.Redis.Mode, cfg.Redis.Addrs, cfg.Redis.TLS = "single", []string{"127.0.0.1:1"}, true
		cfg.Redis.TLSCAFile, cfg.Redis.TLSCertFile, cfg.Redis.TLSKeyFile = pki.CAFile, pki.ClientCertFile, pki.ClientKeyFile
		if err := cfg.Validate(); err != nil {
			t.Fatalf("the base configuration: %v", err)
		}
		c.change(&cfg.Redis)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), "config: "+c.key+" = ") {
			t.Errorf("%s: %v, want an error on %s", c.name, err, c.key)
		}
	}
}

// TestMySQLTLS runs a private mariadbd that requires TLS of every TCP client
// (require_secure_transport) and checks that the ledger opens over TLS from
// the sql.tls_* keys (Ssl_cipher is set on its connections), with the least
// privileges deployments/README.md lists; that a client certificate works
// for a user created REQUIRE X509; that a DSN's own tls parameter wins; and
// that a wrong CA, a wrong server name or no TLS at all fail at Open.
func TestMySQLTLS(t *testing.T) {
	t.Parallel()
	const password = "mysql-pw-4b1e8d"
	pki, otherCA := testenv.NewPKI(t), testenv.NewPKI(t)
	m := testenv.StartMariaDB(t, testenv.MariaDBOptions{PKI: pki})
	grants := "SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX"
	m.Exec(t,
		"CREATE DATABASE delayq",
		"CREATE USER 'delayq'@'127.0.0.1' IDENTIFIED BY '"+password+"'",
		"GRANT "+grants+" ON delayq.* TO 'delayq'@'127.0.0.1'",
		"CREATE USER 'delayq_x509'@'127.0.0.1' REQUIRE X509",
		"GRANT "+grants+" ON delayq.* TO 'delayq_x509'@'127.0.0.1'",
		// The runtime user of deployments/README.md: no DDL.
		"CREATE USER 'delayq_rt'@'127.0.0.1' IDENTIFIED BY '"+password+"' REQUIRE SSL",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON delayq.* TO 'delayq_rt'@'127.0.0.1'",
	)
	const params = "parseTime=true&interpolateParams=true&tx_isolation=%27READ-COMMITTED%27"

	good := func() config.Config {
		cfg := config.Defaults()
		cfg.HTTP.Enabled = false
		cfg.SQL.Driver = "mysql"
		cfg.SQL.DSN = m.DSN("delayq", password, "delayq", params)
		cfg.SQL.TLSCAFile = pki.CAFile
		return cfg
	}
	sslCipher := func(t *testing.T, b *backend.Backends) string {
		t.Helper()
		var name, value string
		if err := b.DB.Raw("SHOW SESSION STATUS LIKE 'Ssl_cipher'").Row().Scan(&name, &value); err != nil {
			t.Fatal(err)
		}
		return value
	}
	ledgerWorks := func(t *testing.T, b *backend.Backends) {
		t.Helper()
		ctx := context.Background()
		job := &queue.Job{Topic: "t", ID: "tls-" + strings.ReplaceAll(t.Name(), "/", "-"), Attempt: 1, MaxAttempts: 3,
			RunAt: time.Now().UnixMilli(), LeaseUntil: time.Now().Add(time.Minute).UnixMilli()}
		if err := ledgerops.Of(b.Ledger).Record(ctx, []*queue.Job{job}, "w"); err != nil {
			t.Fatalf("record over TLS: %v", err)
		}
		if err := ledgerops.Of(b.Ledger).Complete(ctx, []queue.Ref{job.Ref()}); err != nil {
			t.Fatalf("complete over TLS: %v", err)
		}
	}

	t.Run("CA from the configuration", func(t *testing.T) {
		logs := &testenv.SyncBuffer{}
		b, err := tlsOpen(t, good(), tlsLogger(logs))
		if err != nil {
			t.Fatal(err)
		}
		if c := sslCipher(t, b); c == "" {
			t.Fatal("Ssl_cipher is empty: the connection is not TLS")
		}
		ledgerWorks(t, b)
		if strings.Contains(logs.String(), password) {
			t.Fatal("the MySQL password appears in the log")
		}
	})
	t.Run("runtime grants only, schema already there", func(t *testing.T) {
		cfg := good()
		cfg.SQL.DSN = m.DSN("delayq_rt", password, "delayq", params)
		cfg.SQL.AutoMigrate = false
		b, err := tlsOpen(t, cfg, tlsLogger(&testenv.SyncBuffer{}))
		if err != nil {
			t.Fatal(err)
		}
		ledgerWorks(t, b)
		ctx := context.Background()
		dead := queue.DeadJob{Job: &queue.Job{Topic: "t", ID: "rt-dead", Attempt: 1, MaxAttempts: 1}, Error: "x", DiedAt: time.Now().UnixMilli()}
		if err := ledgerops.Of(b.Ledger).Bury(ctx, []queue.DeadJob{dead}); err != nil {
			t.Fatalf("bury with runtime grants: %v", err)
		}
	})
	t.Run("server name and client certificate", func(t *testing.T) {
		cfg := good()
		cfg.SQL.DSN = m.DSN("delayq_x509", "", "delayq", "") // no parameters: tls= starts them
		cfg.SQL.TLSServerName = testenv.PKIServerName
		cfg.SQL.TLSCertFile, cfg.SQL.TLSKeyFile = pki.ClientCertFile, pki.ClientKeyFile
		b, err := tlsOpen(t, cfg, tlsLogger(&testenv.SyncBuffer{}))
		if err != nil {
			t.Fatal(err)
		}
		if c := sslCipher(t, b); c == "" {
			t.Fatal("Ssl_cipher is empty")
		}
		ledgerWorks(t, b)
	})
	t.Run("the DSN's own tls parameter wins", func(t *testing.T) {
		cfg := good()
		cfg.SQL.DSN += "&tls=skip-verify"
		cfg.SQL.TLSCAFile = otherCA.CAFile // would fail if it were used
		logs := &testenv.SyncBuffer{}
		b, err := tlsOpen(t, cfg, tlsLogger(logs))
		if err != nil {
			t.Fatal(err)
		}
		if c := sslCipher(t, b); c == "" {
			t.Fatal("Ssl_cipher is empty")
		}
		if !strings.Contains(logs.String(), "sql.tls_* keys are ignored") {
			t.Fatalf("no warning that the sql.tls_* keys are ignored; log:\n%s", logs.String())
		}
	})

	failures := []struct {
		name   string
		change func(*config.Config)
		want   string
	}{
		{"wrong CA", func(c *config.Config) { c.SQL.TLSCAFile = otherCA.CAFile }, "sql.tls_ca_file"},
		{"wrong server name", func(c *config.Config) { c.SQL.TLSServerName = "wrong.invalid" }, "sql.tls_server_name"},
		// MariaDB answers a plaintext login under require_secure_transport
		// with "Access denied" (the same user logs in over TLS above).
		{"no TLS", func(c *config.Config) { c.SQL.TLSCAFile = "" }, "Access denied"},
		{"X509 user without a client certificate", func(c *config.Config) {
			c.SQL.DSN = m.DSN("delayq_x509", "", "delayq", params)
		}, "Access denied"},
	}
	for _, f := range failures {
		t.Run(f.name, func(t *testing.T) {
			cfg := good()
			f.change(&cfg)
			b, err := tlsOpen(t, cfg, tlsLogger(&testenv.SyncBuffer{}))
			if err == nil {
				_ = b.Close()
				t.Fatal("Open succeeded")
			}
			t.Logf("Open: %v", err)
			if !strings.Contains(err.Error(), f.want) {
				t.Fatalf("error %q, want it to mention %q", err, f.want)
			}
			if strings.Contains(err.Error(), password) {
				t.Fatalf("error %q shows the password", err)
			}
		})
	}
}

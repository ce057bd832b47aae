package backend

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/app/config"
)

// openRedis connects to the configured Redis, or starts the embedded one on
// a loopback port (so redis-cli can look at it too).
func (b *Backends) openRedis(c config.Redis, log logrus.FieldLogger) (redis.UniversalClient, error) {
	tlsConfig, err := redisTLS(c)
	if err != nil {
		return nil, err
	}
	opts := &redis.UniversalOptions{
		Addrs:    c.Addrs,
		Username: c.Username,
		Password: c.Password,
		// Used only by the failover client (sentinel mode).
		SentinelUsername: c.SentinelUsername,
		SentinelPassword: c.SentinelPassword,
		DB:               c.DB,
		PoolSize:         c.PoolSize,
		TLSConfig:        tlsConfig,
	}
	var rdb redis.UniversalClient
	switch c.Mode {
	case "embedded":
		m := miniredis.NewMiniRedis()
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("backend: start the embedded Redis: %w", err)
		}
		b.closers = append(b.closers, func() error { m.Close(); return nil })
		b.Embedded = true
		log.WithField("addr", m.Addr()).Warn("embedded Redis (miniredis) started: nothing survives a restart")
		rdb = redis.NewClient(&redis.Options{Addr: m.Addr()})
	case "single":
		rdb = redis.NewClient(opts.Simple())
	case "sentinel":
		opts.MasterName = c.MasterName
		rdb = redis.NewFailoverClient(opts.Failover())
	case "cluster":
		co := opts.Cluster()
		co.ClusterStateReloadInterval = c.ClusterReloadEvery
		rdb = redis.NewClusterClient(co)
	default:
		return nil, fmt.Errorf("backend: redis.mode %q", c.Mode)
	}
	b.closers = append(b.closers, rdb.Close)
	return rdb, nil
}

// redisCheckTimeout bounds the PING of checkRedis.
const redisCheckTimeout = 5 * time.Second

// checkRedis pings the configured Redis once, so that a configuration
// mistake stops the program at start with the key to fix: a server
// certificate that does not verify (redis.tls_ca_file,
// redis.tls_server_name), a TLS handshake the server refuses (a client
// certificate it wants), a plaintext server behind redis.tls, a password or
// user it refuses. A Redis that merely does not answer yet is no such
// mistake: that is logged, and the program starts (the API answers 503 and
// the workers retry until Redis is back, as after any outage).
func checkRedis(ctx context.Context, rdb redis.UniversalClient, c config.Redis, log logrus.FieldLogger) error {
	ctx, cancel := context.WithTimeout(ctx, redisCheckTimeout)
	defer cancel()
	err := rdb.Ping(ctx).Err()
	if err == nil {
		return nil
	}
	if hint := redisConfigMistake(err); hint != "" {
		return fmt.Errorf("backend: redis at %s: %s: %w", strings.Join(c.Addrs, ","), hint, err)
	}
	if c.TLS && droppedConn(err) && len(c.Addrs) > 0 {
		// With TLS 1.3 a server that refuses the client's certificate
		// says so after the client's handshake is done, and the alert may
		// be lost to the close: the PING sees only EOF or a reset, as it
		// would from a Redis going down. One connection of our own tells
		// the two apart.
		if perr := probeTLS(ctx, c); perr != nil {
			if hint := redisConfigMistake(perr); hint != "" {
				return fmt.Errorf("backend: redis at %s: %s: %w", strings.Join(c.Addrs, ","), hint, perr)
			}
		}
	}
	log.WithError(err).WithField("addrs", c.Addrs).Warn("Redis does not answer yet; starting anyway (requests get 503 and workers retry until it does)")
	return nil
}

// errDroppedAfterHandshake is probeTLS's answer for a server that took the
// TLS handshake and then closed the connection without answering a PING.
var errDroppedAfterHandshake = errors.New("the connection was closed right after the TLS handshake")

// droppedConn reports whether err is a connection that ended without a
// word: EOF or a reset.
func droppedConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// probeTLS connects to the first configured address, completes the TLS
// handshake and sends one PING. It returns nil when the server answers
// anything (a refused password included: the PING of checkRedis reports
// that), the dial's error when no connection is made (Redis down), and an
// error wrapping errDroppedAfterHandshake when the server asked for a
// client certificate in the handshake and then closed the connection
// without a word, as Redis does to a certificate it does not accept. A
// server that asked for none and closed (a TLS proxy in front of a Redis
// that is down) gets a plain error: not a configuration mistake.
func probeTLS(ctx context.Context, c config.Redis) error {
	tc, err := redisTLS(c)
	if err != nil || tc == nil {
		return err
	}
	tc = tc.Clone()
	var asked atomic.Bool
	certs := tc.Certificates
	tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		asked.Store(true)
		if len(certs) > 0 {
			return &certs[0], nil
		}
		return &tls.Certificate{}, nil // none to give: the server decides
	}
	d := tls.Dialer{Config: tc}
	conn, err := d.DialContext(ctx, "tcp", c.Addrs[0])
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err = conn.Write([]byte("PING\r\n")); err == nil {
		_, err = bufio.NewReader(conn).ReadString('\n')
	}
	if err != nil && droppedConn(err) && asked.Load() {
		return fmt.Errorf("%w: %w", errDroppedAfterHandshake, err)
	}
	return err
}

// redisConfigMistake names the configuration keys behind err, or returns ""
// when err does not come from the configuration (Redis down, a timeout).
func redisConfigMistake(err error) string {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		record   tls.RecordHeaderError
		opErr    *net.OpError
	)
	switch {
	case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &hostname), errors.As(err, &invalid):
		return "the server's TLS certificate does not verify (check redis.tls_ca_file and redis.tls_server_name)"
	case errors.As(err, &opErr) && opErr.Op == "remote error":
		// crypto/tls reports a TLS alert from the server so ("remote
		// error: tls: certificate required"); with TLS 1.3 it arrives on
		// the first read, after the handshake seemed done.
		return "the server refused the TLS handshake (check redis.tls_cert_file and redis.tls_key_file: a client certificate its CA signed)"
	case errors.As(err, &record):
		return "the server does not speak TLS (redis.tls is on)"
	case errors.Is(err, errDroppedAfterHandshake):
		return "the server closed the connection after the TLS handshake, as it does when it refuses the client certificate (check redis.tls_cert_file and redis.tls_key_file: a client certificate its CA signed)"
	}
	msg := err.Error()
	// go-redis's failover client wraps what the sentinels answered.
	if strings.Contains(msg, "sentinels") && (strings.Contains(msg, "NOAUTH") || strings.Contains(msg, "WRONGPASS")) {
		return "the sentinels refused authentication (check redis.sentinel_username and redis.sentinel_password)"
	}
	for _, prefix := range []string{"WRONGPASS", "NOAUTH", "NOPERM", "ERR AUTH", "ERR invalid password", "ERR Client sent AUTH"} {
		if strings.HasPrefix(msg, prefix) {
			return "authentication refused (check redis.username and redis.password)"
		}
	}
	return ""
}

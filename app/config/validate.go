package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/delayq/delayq/queue"
)

// Error is an invalid configuration value: the key, the value and why.
type Error struct {
	Key    string
	Value  any
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("config: %s = %v: %s", e.Key, e.Value, e.Reason)
}

// ErrInvalid is wrapped by every validation failure.
var ErrInvalid = errors.New("invalid configuration")

func (e *Error) Unwrap() error { return ErrInvalid }

var namespaceRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Validate checks every value, returning all problems joined.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key string, value any, format string, args ...any) {
		errs = append(errs, &Error{Key: key, Value: value, Reason: fmt.Sprintf(format, args...)})
	}
	oneOf := func(key, v string, allowed ...string) {
		for _, a := range allowed {
			if v == a {
				return
			}
		}
		bad(key, v, "want one of %s", strings.Join(allowed, ", "))
	}
	positive := func(key string, d time.Duration) {
		if d <= 0 {
			bad(key, d, "must be positive")
		}
	}
	cronSpec := func(key, spec string) {
		// The parser the recoverer and the sweeper use: five fields, six
		// with seconds, or a descriptor such as @every 30s.
		p := cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
		if _, err := p.Parse(spec); err != nil {
			bad(key, spec, "not a cron spec: %v", err)
		}
	}

	oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error")
	oneOf("log.format", c.Log.Format, "auto", "json", "text")

	oneOf("redis.mode", c.Redis.Mode, "embedded", "single", "sentinel", "cluster")
	switch c.Redis.Mode {
	case "single", "sentinel", "cluster":
		if len(c.Redis.Addrs) == 0 {
			bad("redis.addrs", c.Redis.Addrs, "mode %s needs at least one host:port", c.Redis.Mode)
		}
		for _, a := range c.Redis.Addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				bad("redis.addrs", a, "not host:port: %v", err)
			}
		}
	}
	if c.Redis.Mode != "sentinel" && (c.Redis.SentinelUsername != "" || c.Redis.SentinelPassword != "") {
		// The value itself is a secret: the error names the key only.
		bad("redis.sentinel_password", "(set)", "only redis.mode sentinel asks sentinels (mode is %s)", c.Redis.Mode)
	}
	if c.Redis.Mode == "sentinel" && c.Redis.MasterName == "" {
		bad("redis.master_name", "", "sentinel mode needs the master's name")
	}
	if c.Redis.DB < 0 || (c.Redis.DB != 0 && c.Redis.Mode == "cluster") {
		bad("redis.db", c.Redis.DB, "must be 0 or more, and 0 in cluster mode")
	}
	if !namespaceRE.MatchString(c.Redis.Namespace) {
		bad("redis.namespace", c.Redis.Namespace, "want 1-64 of [A-Za-z0-9_.-]")
	}

	oneOf("sql.driver", c.SQL.Driver, "sqlite", "mysql")
	if c.SQL.Driver == "mysql" && c.SQL.DSN == "" {
		bad("sql.dsn", "", "driver mysql needs a DSN")
	}
	if c.SQL.Driver == "sqlite" && c.SQL.SQLitePath == "" {
		bad("sql.sqlite_path", "", "driver sqlite needs a file path")
	}
	if c.SQL.MaxOpenConns < 1 {
		bad("sql.max_open_conns", c.SQL.MaxOpenConns, "must be positive")
	}
	if c.SQL.MaxIdleConns < 0 || c.SQL.MaxIdleConns > c.SQL.MaxOpenConns {
		bad("sql.max_idle_conns", c.SQL.MaxIdleConns, "want 0 to sql.max_open_conns (%d)", c.SQL.MaxOpenConns)
	}

	if c.Queue.MaxPayloadBytes < 1 {
		bad("queue.max_payload_bytes", c.Queue.MaxPayloadBytes, "must be positive")
	}
	positive("queue.max_delay", c.Queue.MaxDelay)
	if c.Queue.DefaultMaxAttempts < 1 || c.Queue.DefaultMaxAttempts > 100 {
		bad("queue.default_max_attempts", c.Queue.DefaultMaxAttempts, "want 1-100")
	}

	if c.HTTP.Enabled {
		host, _, err := net.SplitHostPort(c.HTTP.Listen)
		if err != nil {
			bad("http.listen", c.HTTP.Listen, "not host:port: %v", err)
		} else if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) && c.HTTP.Token == "" {
			bad("http.token", "", "listening on %s (not loopback) needs a token", c.HTTP.Listen)
		}
	}
	positive("http.read_header_timeout", c.HTTP.ReadHeaderTimeout)
	positive("http.read_timeout", c.HTTP.ReadTimeout)
	positive("http.write_timeout", c.HTTP.WriteTimeout)
	positive("http.idle_timeout", c.HTTP.IdleTimeout)
	if c.HTTP.MaxConcurrent < 1 {
		bad("http.max_concurrent", c.HTTP.MaxConcurrent, "must be positive")
	}
	if c.HTTP.MaxBodyBytes < int64(c.Queue.MaxPayloadBytes) {
		bad("http.max_body_bytes", c.HTTP.MaxBodyBytes, "must be at least queue.max_payload_bytes (%d)", c.Queue.MaxPayloadBytes)
	}

	w := c.Worker
	positive("worker.shutdown_timeout", w.ShutdownTimeout)
	if w.Concurrency < 1 || w.Concurrency > queue.MaxConcurrency {
		bad("worker.concurrency", w.Concurrency, "want 1-%d", queue.MaxConcurrency)
	}
	if w.BatchSize < 1 || w.BatchSize > 1000 {
		bad("worker.batch_size", w.BatchSize, "want 1-1000")
	}
	if w.Lease < 100*time.Millisecond {
		bad("worker.lease", w.Lease, "must be at least 100ms")
	}
	if w.Heartbeat < 0 || (w.Heartbeat > 0 && w.Heartbeat >= w.Lease) {
		bad("worker.heartbeat", w.Heartbeat, "must be shorter than worker.lease (%s); 0 means lease/3", w.Lease)
	}
	positive("worker.max_idle", w.MaxIdle)
	positive("worker.backoff_base", w.BackoffBase)
	if w.BackoffCap < w.BackoffBase {
		bad("worker.backoff_cap", w.BackoffCap, "must be at least worker.backoff_base (%s)", w.BackoffBase)
	}
	if w.MaxAttempts < 0 || w.MaxAttempts > 100 {
		bad("worker.max_attempts", w.MaxAttempts, "want 0-100")
	}
	for name, t := range w.Topics {
		key := "worker.topics." + name
		if err := queue.ValidateTopic(name); err != nil {
			bad(key, name, "not a valid topic name")
		}
		if t.Concurrency < 0 || t.BatchSize < 0 || t.BatchSize > 1000 || t.Lease < 0 || t.Timeout < 0 ||
			t.BackoffBase < 0 || t.BackoffCap < 0 || t.MaxAttempts < 0 || t.MaxAttempts > 100 {
			bad(key, fmt.Sprintf("%+v", t), "values must not be negative (batch_size at most 1000, max_attempts at most 100)")
		}
		if t.Concurrency > queue.MaxConcurrency {
			bad(key+".concurrency", t.Concurrency, "want 1-%d, or 0 for worker.concurrency", queue.MaxConcurrency)
		}
		if t.Lease != 0 && t.Lease < 100*time.Millisecond {
			bad(key+".lease", t.Lease, "must be at least 100ms")
		}
		// The heartbeat is the worker's for every topic; only its default
		// (lease/3) follows each topic's lease.
		if t.Lease != 0 && w.Heartbeat != 0 && w.Heartbeat >= t.Lease {
			bad(key+".lease", t.Lease, "must be longer than worker.heartbeat (%s)", w.Heartbeat)
		}
	}

	if c.Recovery.Enabled {
		cronSpec("recovery.spec", c.Recovery.Spec)
		// The holder refreshes the lock every LockTTL/3: below a second the
		// refresh races the expiry on a loaded host.
		if c.Recovery.LockTTL < time.Second {
			bad("recovery.lock_ttl", c.Recovery.LockTTL, "must be at least 1s")
		}
	}
	heartbeat := w.Heartbeat
	if heartbeat == 0 {
		heartbeat = w.Lease / 3
	}
	if c.Recovery.Grace <= heartbeat {
		bad("recovery.grace", c.Recovery.Grace, "must exceed the heartbeat interval (%s), or live jobs would look stale", heartbeat)
	}
	if c.Metrics.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Metrics.Listen); err != nil {
			bad("metrics.listen", c.Metrics.Listen, "not host:port: %v", err)
		}
	}
	if d := c.Dashboard; d.Enabled {
		if d.SampleEvery < 100*time.Millisecond {
			bad("dashboard.sample_every", d.SampleEvery, "must be at least 100ms")
		} else if d.History < d.SampleEvery || d.History/d.SampleEvery > 10000 {
			bad("dashboard.history", d.History, "want from dashboard.sample_every (%s) to 10000 samples of it", d.SampleEvery)
		}
	}
	if c.Orders.Enabled {
		positive("orders.payment_window", c.Orders.PaymentWindow)
		cronSpec("orders.sweeper_spec", c.Orders.SweeperSpec)
		if c.Orders.SweeperGrace < 0 {
			bad("orders.sweeper_grace", c.Orders.SweeperGrace, "must not be negative")
		}
	}
	if c.CLI.API != "" {
		if err := checkAPIURL(c.CLI.API); err != nil {
			bad("cli.api", c.CLI.API, "%v", err)
		}
	}
	errs = append(errs, c.validateSecurity()...) // validate_tls.go
	return errors.Join(errs...)
}

// checkAPIURL checks a base URL of the API: http or https, a host, and
// nothing a base URL cannot carry (a query, a fragment, credentials: the
// token goes in http.token, not in a URL that ends up in logs and shell
// history).
func checkAPIURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("not a URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("want http://host:port or https://host:port")
	case u.Host == "" || u.Hostname() == "":
		return errors.New("no host: want http://host:port")
	case u.User != nil:
		return errors.New("no credentials in the URL: the token goes in http.token (DELAYQ_HTTP_TOKEN)")
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return errors.New("a base URL has no query or fragment")
	}
	return nil
}

package config

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/delayq/delayq/jobs/httptarget"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/queue/periodic"
	"github.com/delayq/delayq/recovery"
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
	var p problems
	c.Log.validate(&p)
	c.Redis.validate(&p)
	c.SQL.validate(&p)
	c.Queue.validate(&p)
	c.HTTP.validate(&p, c.Queue)
	c.Worker.validate(&p)
	c.Recovery.validate(&p, c.Worker)
	c.Metrics.validate(&p)
	c.Dashboard.validate(&p)
	// The orders module's need of its topic is the program's to check when
	// it registers the module (app/cli): config does not know the module.
	c.Orders.validate(&p)
	c.CLI.validate(&p)
	c.validatePeriodic(&p)
	c.validateUniqueFor(&p)
	p.oneOf("tracing.exporter", c.Tracing.Exporter, "otlp", "global")
	c.validateSecurity(&p) // validate_tls.go
	return errors.Join(p...)
}

// problems collects every validation failure, in the order found.
type problems []error

func (p *problems) bad(key string, value any, format string, args ...any) {
	*p = append(*p, &Error{Key: key, Value: value, Reason: fmt.Sprintf(format, args...)})
}

func (p *problems) oneOf(key, v string, allowed ...string) {
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	p.bad(key, v, "want one of %s", strings.Join(allowed, ", "))
}

func (p *problems) positive(key string, d time.Duration) {
	if d <= 0 {
		p.bad(key, d, "must be positive")
	}
}

func (p *problems) cronSpec(key, spec string) {
	// The parser the recoverer and the sweeper use: five fields, six
	// with seconds, or a descriptor such as @every 30s.
	parser := cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
	if _, err := parser.Parse(spec); err != nil {
		p.bad(key, spec, "not a cron spec: %v", err)
	}
}

func (l Log) validate(p *problems) {
	p.oneOf("log.level", l.Level, "debug", "info", "warn", "error")
	p.oneOf("log.format", l.Format, "auto", "json", "text")
}

func (r Redis) validate(p *problems) {
	p.oneOf("redis.mode", r.Mode, "embedded", "single", "sentinel", "cluster")
	switch r.Mode {
	case "single", "sentinel", "cluster":
		if len(r.Addrs) == 0 {
			p.bad("redis.addrs", r.Addrs, "mode %s needs at least one host:port", r.Mode)
		}
		for _, a := range r.Addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				p.bad("redis.addrs", a, "not host:port: %v", err)
			}
		}
	}
	if r.Mode != "sentinel" && (r.SentinelUsername != "" || r.SentinelPassword != "") {
		// The value itself is a secret: the error names the key only.
		p.bad("redis.sentinel_password", "(set)", "only redis.mode sentinel asks sentinels (mode is %s)", r.Mode)
	}
	if r.Mode == "sentinel" && r.MasterName == "" {
		p.bad("redis.master_name", "", "sentinel mode needs the master's name")
	}
	if r.DB < 0 || (r.DB != 0 && r.Mode == "cluster") {
		p.bad("redis.db", r.DB, "must be 0 or more, and 0 in cluster mode")
	}
	if r.PoolSize < 0 {
		// go-redis would read it as its default, not as what was asked.
		p.bad("redis.pool_size", r.PoolSize, "must be 0 (the default) or more")
	}
	if r.ClusterReloadEvery < 100*time.Millisecond || r.ClusterReloadEvery > 10*time.Minute {
		p.bad("redis.cluster_reload_every", r.ClusterReloadEvery, "want 100ms to 10m")
	}
	if !namespaceRE.MatchString(r.Namespace) {
		p.bad("redis.namespace", r.Namespace, "want 1-64 of [A-Za-z0-9_.-]")
	}
}

func (s SQL) validate(p *problems) {
	p.oneOf("sql.driver", s.Driver, "sqlite", "mysql")
	if s.Driver == "mysql" && s.DSN == "" {
		p.bad("sql.dsn", "", "driver mysql needs a DSN")
	}
	if len(s.Shards) > 0 && s.Driver != "mysql" {
		p.bad("sql.shards", fmt.Sprintf("%d DSNs", len(s.Shards)), "ledger shards need driver mysql (it is %s)", s.Driver)
	}
	seen := map[string]int{s.DSN: 0}
	for i, dsn := range s.Shards {
		key := fmt.Sprintf("sql.shards[%d]", i)
		if strings.TrimSpace(dsn) == "" {
			p.bad(key, "", "an empty DSN")
			continue
		}
		if j, dup := seen[dsn]; dup {
			// The same tables twice would put two shards' rows in one
			// place, and each shard's relay would push the other's.
			p.bad(key, "(a DSN)", "the same DSN as shard %d: each shard is a database of its own", j)
		}
		seen[dsn] = i + 1
	}
	if s.Driver == "sqlite" && s.SQLitePath == "" {
		p.bad("sql.sqlite_path", "", "driver sqlite needs a file path")
	}
	if s.MaxOpenConns < 1 {
		p.bad("sql.max_open_conns", s.MaxOpenConns, "must be positive")
	}
	if s.MaxIdleConns < 0 || s.MaxIdleConns > s.MaxOpenConns {
		p.bad("sql.max_idle_conns", s.MaxIdleConns, "want 0 to sql.max_open_conns (%d)", s.MaxOpenConns)
	}
	if s.GroupCommit != -1 && (s.GroupCommit < 1 || s.GroupCommit > 10000) {
		p.bad("sql.group_commit", s.GroupCommit, "want -1 (off) or 1-10000")
	}
	if s.GroupCommitDepth < 1 || s.GroupCommitDepth > 16 {
		p.bad("sql.group_commit_depth", s.GroupCommitDepth, "want 1-16")
	}
	if s.NotReadyWait < 0 || s.NotReadyWait > time.Minute {
		p.bad("sql.not_ready_wait", s.NotReadyWait, "want 0 (try once) to 1m")
	}
	if s.GroupLinger > time.Second {
		p.bad("sql.group_linger", s.GroupLinger, "want at most 1s (negative: never wait)")
	}
}

func (q Queue) validate(p *problems) {
	if q.MaxPayloadBytes < 1 {
		p.bad("queue.max_payload_bytes", q.MaxPayloadBytes, "must be positive")
	}
	p.positive("queue.max_delay", q.MaxDelay)
	if q.DefaultMaxAttempts < 1 || q.DefaultMaxAttempts > 100 {
		p.bad("queue.default_max_attempts", q.DefaultMaxAttempts, "want 1-100")
	}
	if q.Coalesce != -1 && (q.Coalesce < 1 || q.Coalesce > 10000) {
		p.bad("queue.coalesce", q.Coalesce, "want -1 (off) or 1-10000")
	}
	if q.CoalesceInFlight < 1 || q.CoalesceInFlight > 64 {
		p.bad("queue.coalesce_in_flight", q.CoalesceInFlight, "want 1-64")
	}
	if _, err := queue.ParseDurability(q.Durability); err != nil {
		p.bad("queue.durability", q.Durability, "want redis or durable")
	}
	for name, t := range q.Topics {
		key := "queue.topics." + name
		if err := queue.ValidateTopic(name); err != nil {
			p.bad(key, name, "not a valid topic name")
		}
		if _, err := queue.ParseDurability(t.Durability); t.Durability != "" && err != nil {
			p.bad(key+".durability", t.Durability, "want redis or durable")
		}
		if t.History != "" && t.History != "on" && t.History != "off" {
			p.bad(key+".history", t.History, "want on or off")
		}
		if t.Partitions < 0 || t.Partitions > queue.MaxPartitions {
			p.bad(key+".partitions", t.Partitions, "want 1-%d (0: as stored)", queue.MaxPartitions)
		}
		if t.UniqueFor < 0 || t.UniqueFor > queue.MaxUniqueFor || (t.UniqueFor > 0 && t.UniqueFor < time.Millisecond) {
			p.bad(key+".unique_for", t.UniqueFor, "want 0 (none) or 1ms to %s", queue.MaxUniqueFor)
		}
		if t.UniqueFor > 0 && t.History == "off" && q.durable(name) {
			p.bad(key+".unique_for", t.UniqueFor, "a durable topic's window is read from its job history, which %s.history turns off", key)
		}
	}
	if q.Horizon < time.Second {
		p.bad("queue.horizon", q.Horizon, "want at least 1s")
	}
	p.positive("queue.push_timeout", q.PushTimeout)
	if q.UncertainRecheck < time.Second || q.UncertainRecheck > time.Hour {
		p.bad("queue.uncertain_recheck", q.UncertainRecheck, "want 1s to 1h")
	}
	if q.TombstoneTTL < time.Second {
		p.bad("queue.tombstone_ttl", q.TombstoneTTL, "want at least 1s")
	}
	if q.LayoutRefresh < 10*time.Millisecond || q.LayoutRefresh > time.Minute {
		p.bad("queue.layout_refresh", q.LayoutRefresh, "want 10ms to 1m")
	}
}

// validate checks the API's settings; a body must fit the largest payload
// of q.
func (h HTTP) validate(p *problems, q Queue) {
	if h.Enabled {
		host, err := splitListen(h.Listen)
		if err != nil {
			p.bad("http.listen", h.Listen, "%v", err)
		} else if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) && h.Token == "" {
			p.bad("http.token", "", "listening on %s (not loopback) needs a token", h.Listen)
		}
	}
	p.positive("http.read_header_timeout", h.ReadHeaderTimeout)
	p.positive("http.read_timeout", h.ReadTimeout)
	p.positive("http.write_timeout", h.WriteTimeout)
	p.positive("http.idle_timeout", h.IdleTimeout)
	if h.MaxConcurrent < 1 {
		p.bad("http.max_concurrent", h.MaxConcurrent, "must be positive")
	}
	if h.MaxBodyBytes < int64(q.MaxPayloadBytes) {
		p.bad("http.max_body_bytes", h.MaxBodyBytes, "must be at least queue.max_payload_bytes (%d)", q.MaxPayloadBytes)
	}
}

func (w Worker) validate(p *problems) {
	p.positive("worker.shutdown_timeout", w.ShutdownTimeout)
	if w.LedgerHold < time.Second {
		p.bad("worker.ledger_hold", w.LedgerHold, "want at least 1s")
	}
	if w.KeyWait < 10*time.Millisecond || w.KeyWait > time.Minute {
		p.bad("worker.key_wait", w.KeyWait, "want 10ms to 1m")
	}
	if w.RegistryEvery < 10*time.Millisecond {
		p.bad("worker.registry_every", w.RegistryEvery, "want at least 10ms")
	}
	if w.Concurrency < 1 || w.Concurrency > queue.MaxConcurrency {
		p.bad("worker.concurrency", w.Concurrency, "want 1-%d", queue.MaxConcurrency)
	}
	if w.BatchSize < 1 || w.BatchSize > 1000 {
		p.bad("worker.batch_size", w.BatchSize, "want 1-1000")
	}
	if w.Prefetch < -1 || w.Prefetch > queue.MaxConcurrency {
		p.bad("worker.prefetch", w.Prefetch, "want -1 (none), 0 (8 × batch_size) or up to %d", queue.MaxConcurrency)
	}
	if w.Lease < 100*time.Millisecond {
		p.bad("worker.lease", w.Lease, "must be at least 100ms")
	}
	if err := queue.ValidateClaimAhead(w.ClaimAhead, w.Lease); err != nil {
		p.bad("worker.claim_ahead", w.ClaimAhead, "%v (negative: none, 0: %s)", err, queue.DefaultClaimAhead)
	}
	if w.Heartbeat < 0 || (w.Heartbeat > 0 && w.Heartbeat >= w.Lease) {
		p.bad("worker.heartbeat", w.Heartbeat, "must be shorter than worker.lease (%s); 0 means lease/3", w.Lease)
	}
	p.positive("worker.max_idle", w.MaxIdle)
	p.positive("worker.backoff_base", w.BackoffBase)
	if w.BackoffCap < w.BackoffBase {
		p.bad("worker.backoff_cap", w.BackoffCap, "must be at least worker.backoff_base (%s)", w.BackoffBase)
	}
	if w.MaxAttempts < 0 || w.MaxAttempts > 100 {
		p.bad("worker.max_attempts", w.MaxAttempts, "want 0-100")
	}
	if w.OldestEvery < 1 || w.OldestEvery > queue.MaxOldestEvery {
		p.bad("worker.oldest_every", w.OldestEvery, "want 1 (due order alone) to %d", queue.MaxOldestEvery)
	}
	for name, t := range w.Topics {
		t.validate(p, "worker.topics."+name, name, w)
		if t.Target != nil {
			t.Target.validate(p, "worker.topics."+name+".target", w.TargetAllowHosts)
		}
	}
	w.validatePools(p)
	for _, h := range w.TargetAllowHosts {
		if !httptarget.ValidHostPattern(h) {
			p.bad("worker.target_allow_hosts", h, `want a host name or "*.domain"`)
		}
	}
}

// validatePools checks worker.pools with queue.ValidatePools, naming the
// key at fault. Which topics have a handler the start checks (it knows
// them).
func (w Worker) validatePools(p *problems) {
	var pe *queue.PoolError
	if !errors.As(queue.ValidatePools(w.QueuePools()), &pe) {
		return
	}
	key := "worker.pools." + pe.Pool
	switch field, topic, one := strings.Cut(pe.Field, "."); {
	case one:
		key += ".topics." + topic
	case field == "weights":
		key += ".topics"
	case field != "name":
		key += "." + field
	}
	p.bad(key, pe.Value, "%s", pe.Want)
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validate checks an HTTP target (key is its config key) as the handler
// will, but for its CA file, which the start reads.
func (t Target) validate(p *problems, key string, allowHosts []string) {
	errs := []error{t.HTTPTarget(nil, allowHosts).Check()}
	if j, ok := errs[0].(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var ce *httptarget.ConfigError
		if errors.As(e, &ce) && ce.Field != "allow_hosts" { // reported once, under the worker's key
			p.bad(key+"."+ce.Field, ce.Value, "%s", ce.Reason)
		}
	}
	if t.SecretEnv != "" && !envNameRE.MatchString(t.SecretEnv) {
		p.bad(key+".secret_env", t.SecretEnv, "not an environment variable name")
	}
}

// validate checks the overrides of topic name (key is its config key)
// against the worker's heartbeat.
func (t Topic) validate(p *problems, key, name string, w Worker) {
	heartbeat := w.Heartbeat
	if err := queue.ValidateTopic(name); err != nil {
		p.bad(key, name, "not a valid topic name")
	}
	if t.Concurrency < 0 || t.BatchSize < 0 || t.BatchSize > 1000 || t.Lease < 0 || t.Timeout < 0 ||
		t.BackoffBase < 0 || t.BackoffCap < 0 || t.MaxAttempts < 0 || t.MaxAttempts > 100 {
		p.bad(key, fmt.Sprintf("%+v", t), "values must not be negative (batch_size at most 1000, max_attempts at most 100)")
	}
	if t.Concurrency > queue.MaxConcurrency {
		p.bad(key+".concurrency", t.Concurrency, "want 1-%d, or 0 for worker.concurrency", queue.MaxConcurrency)
	}
	if t.Prefetch < -1 || t.Prefetch > queue.MaxConcurrency {
		p.bad(key+".prefetch", t.Prefetch, "want -1 (none), 0 (worker.prefetch) or up to %d", queue.MaxConcurrency)
	}
	if t.OldestEvery < 0 || t.OldestEvery > queue.MaxOldestEvery {
		p.bad(key+".oldest_every", t.OldestEvery, "want 1 (due order alone) to %d, or 0 for worker.oldest_every", queue.MaxOldestEvery)
	}
	// What the topic runs with: its own values or the worker's.
	ahead := cmp.Or(t.ClaimAhead, w.ClaimAhead)
	if err := queue.ValidateClaimAhead(ahead, cmp.Or(t.Lease, w.Lease)); err != nil {
		p.bad(key+".claim_ahead", ahead, "%v (negative: none, 0: worker.claim_ahead)", err)
	}
	if t.Lease != 0 && t.Lease < 100*time.Millisecond {
		p.bad(key+".lease", t.Lease, "must be at least 100ms")
	}
	t.validateRate(p, key)
	// The heartbeat is the worker's for every topic; only its default
	// (lease/3) follows each topic's lease.
	if t.Lease != 0 && heartbeat != 0 && heartbeat >= t.Lease {
		p.bad(key+".lease", t.Lease, "must be longer than worker.heartbeat (%s)", heartbeat)
	}
}

// maxRateStartLag bounds rate_start_lag: a lag is a wait every job of the
// topic takes, and a typo of a few zeros must not park them for minutes.
const maxRateStartLag = 10 * time.Second

// validateRate checks the rate limit of a topic (key is its config key).
func (t Topic) validateRate(p *problems, key string) {
	switch r := t.RateLimit; {
	case math.IsNaN(r) || math.IsInf(r, 0) || r < 0 || (r > 0 && r < queue.MinRatePerSecond) || r > queue.MaxRatePerSecond:
		p.bad(key+".rate_limit", r, "want %v-%v handler starts per second, or 0 for no limit", queue.MinRatePerSecond, queue.MaxRatePerSecond)
	}
	switch {
	case t.RateBurst < 0 || t.RateBurst > queue.MaxRateBurst:
		p.bad(key+".rate_burst", t.RateBurst, "want 1-%d, or 0 for rate_limit/10 (at least 1)", queue.MaxRateBurst)
	case t.RateBurst > 0 && !(t.RateLimit > 0):
		p.bad(key+".rate_burst", t.RateBurst, "needs a rate_limit")
	}
	if t.RateStartLag > maxRateStartLag {
		p.bad(key+".rate_start_lag", t.RateStartLag, "want at most %s (negative: off)", maxRateStartLag)
	}
}

// validate checks the recoverer's settings; its grace must outlast the
// heartbeat of w, whether or not it runs here (recover runs it once).
func (r Recovery) validate(p *problems, w Worker) {
	if r.Enabled {
		p.cronSpec("recovery.spec", r.Spec)
		// The holder refreshes the lock every LockTTL/3: below a second the
		// refresh races the expiry on a loaded host.
		if r.LockTTL < time.Second {
			p.bad("recovery.lock_ttl", r.LockTTL, "must be at least 1s")
		}
		if r.RelayEvery < time.Millisecond || r.RelayEvery > time.Minute {
			p.bad("recovery.relay_every", r.RelayEvery, "want 1ms to 1m")
		}
		if r.RelayGrace < 0 {
			p.bad("recovery.relay_grace", r.RelayGrace, "must not be negative")
		}
		if r.RelayFullEvery < r.RelayEvery {
			p.bad("recovery.relay_full_every", r.RelayFullEvery, "want at least recovery.relay_every")
		}
		if r.RelayCheckEvery < r.RelayEvery || r.RelayCheckEvery > r.RelayFullEvery || r.RelayCheckEvery > recovery.MaxRelayCheckEvery {
			p.bad("recovery.relay_check_every", r.RelayCheckEvery, "want recovery.relay_every to recovery.relay_full_every, at most %s", recovery.MaxRelayCheckEvery)
		}
		if r.RelayIdleEvery < time.Second || r.RelayIdleEvery%time.Second != 0 || r.RelayIdleEvery > max(r.RelayCheckEvery, time.Second) {
			p.bad("recovery.relay_idle_every", r.RelayIdleEvery, "want whole seconds from 1s to recovery.relay_check_every")
		}
		if r.RelayHandOverAfter < r.RelayEvery {
			p.bad("recovery.relay_handover_after", r.RelayHandOverAfter, "want at least recovery.relay_every")
		}
		if r.RelayLockTTL < 3*r.RelayEvery || r.RelayLockTTL < time.Second {
			p.bad("recovery.relay_lock_ttl", r.RelayLockTTL, "want at least 1s and 3 × recovery.relay_every")
		}
	}
	if r.HistoryPurgeBatch < 1 || r.HistoryPurgeBatch > 10_000 {
		p.bad("recovery.history_purge_batch", r.HistoryPurgeBatch, "want 1 to 10000 rows")
	}
	if !(r.HistoryPurgeDuty > 0 && r.HistoryPurgeDuty <= 1) {
		p.bad("recovery.history_purge_duty", r.HistoryPurgeDuty, "want a share of the time above 0, at most 1")
	}
	if heartbeat := w.HeartbeatInterval(); r.Grace <= heartbeat {
		p.bad("recovery.grace", r.Grace, "must exceed the heartbeat interval (%s), or live jobs would look stale", heartbeat)
	}
}

// splitListen checks a listen address, host:port with a port of 0-65535
// (0: any free one), and returns its host: the listener would refuse the
// rest only after the backends had started.
func splitListen(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("not host:port: %w", err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || strconv.FormatUint(n, 10) != port {
		return "", fmt.Errorf("port %q: want a number from 0 to 65535", port)
	}
	return host, nil
}

func (m Metrics) validate(p *problems) {
	if m.Listen != "" {
		if _, err := splitListen(m.Listen); err != nil {
			p.bad("metrics.listen", m.Listen, "%v", err)
		}
	}
}

func (d Dashboard) validate(p *problems) {
	if !d.Enabled {
		return
	}
	if d.SampleEvery < 100*time.Millisecond {
		p.bad("dashboard.sample_every", d.SampleEvery, "must be at least 100ms")
	} else if d.History < d.SampleEvery || d.History/d.SampleEvery > 10000 {
		p.bad("dashboard.history", d.History, "want from dashboard.sample_every (%s) to 10000 samples of it", d.SampleEvery)
	}
}

func (o Orders) validate(p *problems) {
	if !o.Enabled {
		return
	}
	p.positive("orders.payment_window", o.PaymentWindow)
	p.cronSpec("orders.sweeper_spec", o.SweeperSpec)
	if o.SweeperGrace < 0 {
		p.bad("orders.sweeper_grace", o.SweeperGrace, "must not be negative")
	}
	// As recovery.lock_ttl: refreshed every third of it, below a second
	// the refresh races the expiry on a loaded host.
	if o.SweeperLockTTL < time.Second {
		p.bad("orders.sweeper_lock_ttl", o.SweeperLockTTL, "must be at least 1s")
	}
}

func (c CLI) validate(p *problems) {
	if c.API != "" {
		if err := checkAPIURL(c.API); err != nil {
			p.bad("cli.api", c.API, "%v", err)
		}
	}
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
	case strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/v1"):
		// The routes start with /v1: this base would ask for /v1/v1/...
		return fmt.Errorf("the base URL, without /v1: %s://%s%s", u.Scheme, u.Host, strings.TrimSuffix(strings.TrimRight(u.Path, "/"), "/v1"))
	}
	return nil
}

// validatePeriodic checks the periodic jobs; keys are periodic[i].field.
// validateUniqueFor checks that a durable topic's history is kept at least
// as long as its uniqueness window, which is read from it.
func (c *Config) validateUniqueFor(p *problems) {
	for name, w := range c.Queue.DurableUniqueFor() {
		keep := c.Recovery.HistoryRetention
		if r := c.Queue.Topics[name].HistoryRetention; r != 0 {
			keep = r
		}
		if keep >= 0 && keep < w {
			p.bad("queue.topics."+name+".unique_for", w,
				"a durable topic's window is read from its job history, which is kept %s (recovery.history_retention or queue.topics.%s.history_retention)", keep, name)
		}
	}
}

func (c *Config) validatePeriodic(p *problems) {
	seen := map[string]int{}
	for i, pj := range c.Periodic {
		key := func(field string) string { return fmt.Sprintf("periodic[%d].%s", i, field) }
		s, err := pj.Schedule()
		var ce *Error
		if errors.As(err, &ce) {
			p.bad(key(ce.Key), ce.Value, "%s", ce.Reason)
			continue
		}
		if err := s.Validate(); err != nil {
			var pe *periodic.Error
			if errors.As(err, &pe) {
				var v any
				switch pe.Field {
				case "name":
					v = pj.Name
				case "spec":
					v = pj.Spec
				case "location":
					v = pj.Location
				case "missed":
					v = pj.Missed
				case "max_attempts":
					v = pj.MaxAttempts
				case "priority":
					v = pj.Priority
				}
				p.bad(key(pe.Field), v, "%s", pe.Reason)
			} else {
				p.bad(key("spec"), pj.Spec, "%v", err)
			}
			continue
		}
		if err := queue.ValidateTopic(pj.Topic); err != nil {
			p.bad(key("topic"), pj.Topic, "%v", err)
		}
		if len(s.Payload) > c.Queue.MaxPayloadBytes {
			p.bad(key("payload"), fmt.Sprintf("(%d bytes)", len(s.Payload)), "over queue.max_payload_bytes (%d)", c.Queue.MaxPayloadBytes)
		}
		if j, ok := seen[pj.Name]; ok {
			p.bad(key("name"), pj.Name, "periodic[%d] has the same name", j)
		}
		seen[pj.Name] = i
	}
}

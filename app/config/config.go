// Package config is the delayq program's configuration: every key with its
// default, loaded from a YAML file, then DELAYQ_* environment variables,
// then command-line flags (each overriding the one before), and validated
// before anything starts. configs/delayq.yaml writes out every default.
package config

import (
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/delayq/delayq/jobs/httptarget"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/queue/periodic"
)

// Config is the whole configuration. The koanf tags are the YAML keys; the
// environment variable of a key is DELAYQ_<SECTION>_<KEY> in upper case
// (DELAYQ_REDIS_ADDRS, DELAYQ_HTTP_TOKEN, DELAYQ_WORKER_CONCURRENCY).
type Config struct {
	Log       Log       `koanf:"log"`
	Redis     Redis     `koanf:"redis"`
	SQL       SQL       `koanf:"sql"`
	Queue     Queue     `koanf:"queue"`
	HTTP      HTTP      `koanf:"http"`
	Worker    Worker    `koanf:"worker"`
	Recovery  Recovery  `koanf:"recovery"`
	Orders    Orders    `koanf:"orders"`
	Metrics   Metrics   `koanf:"metrics"`
	Dashboard Dashboard `koanf:"dashboard"`
	CLI       CLI       `koanf:"cli"`
	Tracing   Tracing   `koanf:"tracing"`
	// Periodic lists the periodic jobs (docs/design.md §4.15): each tick
	// of each enqueues one job, however many serve and worker processes
	// run them. Default [] (none).
	Periodic []Periodic `koanf:"periodic"`
}

// Tracing configures OpenTelemetry traces (docs/design.md §4.21).
type Tracing struct {
	// Enabled keeps each enqueue's trace context with its job (an API
	// request's traceparent header, a library caller's span) and runs
	// every job in a span of that trace. Default false: no trace is kept,
	// no span made.
	Enabled bool `koanf:"enabled"`
	// Exporter is where the spans go: otlp (the OTLP/HTTP exporter, set up
	// by the standard OTEL_EXPORTER_OTLP_* variables; OTEL_SERVICE_NAME,
	// OTEL_RESOURCE_ATTRIBUTES and OTEL_TRACES_SAMPLER apply too) or global
	// (the process's global TracerProvider: a program that embeds delayq's
	// and set one up). Default otlp.
	Exporter string `koanf:"exporter"`
}

// Log configures logging.
type Log struct {
	Level  string `koanf:"level"`  // debug, info, warn, error. Default info.
	Format string `koanf:"format"` // auto (text on a terminal, else JSON), json or text. Default auto.
}

// Redis selects the Redis deployment.
type Redis struct {
	// Mode is embedded (an in-process Redis for trying delayq out: loses
	// everything on exit, not for production), single, sentinel or
	// cluster. Default embedded.
	Mode       string   `koanf:"mode"`
	Addrs      []string `koanf:"addrs"`       // host:port of the node, the sentinels or the cluster seeds
	MasterName string   `koanf:"master_name"` // sentinel only
	// Username and Password authenticate to the Redis nodes (AUTH: an ACL
	// user, or requirepass with Username ""). Keep the password out of
	// files: DELAYQ_REDIS_PASSWORD. Never logged.
	Username string `koanf:"username"`
	Password string `koanf:"password"`
	// SentinelUsername and SentinelPassword authenticate to the sentinels
	// (their requirepass or ACL user), which are asked without AUTH when
	// both are "". Sentinel mode only; DELAYQ_REDIS_SENTINEL_PASSWORD.
	// Never logged. Default "".
	SentinelUsername string `koanf:"sentinel_username"`
	SentinelPassword string `koanf:"sentinel_password"`
	DB               int    `koanf:"db"` // single and sentinel only. Default 0.
	// TLS connects with TLS (1.2 or later), to the nodes and to the
	// sentinels alike; the server's certificate is verified against the
	// system's roots, or TLSCAFile. Default false.
	TLS bool `koanf:"tls"`
	// TLSCAFile is a PEM file of the CA certificates that sign the
	// servers' certificates, instead of the system's roots. Needs tls.
	// Default "".
	TLSCAFile string `koanf:"tls_ca_file"`
	// TLSCertFile and TLSKeyFile are a client certificate and its key
	// (PEM), for a server that asks for one (tls-auth-clients); both or
	// neither. Need tls. Default "".
	TLSCertFile string `koanf:"tls_cert_file"`
	TLSKeyFile  string `koanf:"tls_key_file"`
	// TLSServerName is the name the servers' certificates must carry;
	// "" means the host of each address. Needs tls. Default "".
	TLSServerName string `koanf:"tls_server_name"`
	// PoolSize is the most connections to Redis of this process. 0 means
	// 10 per CPU (go-redis's default, enough for the workers), or, when
	// the API is on, http.max_concurrent/8 if that is more, at most 1,000:
	// a request holds a connection only for its round trip, a small part
	// of its time, so an eighth of the requests in flight keeps the pool
	// from being the queue they wait in (400 client connections on 20
	// Redis connections: 19,300 req/s; on 128: 22,000, and 1.5-2 times the rate
	// of 32 on a loaded host). The cap stays well under Redis's maxclients
	// (10,000 by default, shared by every process).
	PoolSize int `koanf:"pool_size"`
	// ClusterReloadEvery is how often, at the most, the cluster client
	// reloads its map of which node serves which slot (cluster mode). A
	// master that died leaves no redirect to follow: its slots' calls fail
	// until the next reload, go-redis's default 60s; delayq's 2s is one
	// CLUSTER SLOTS every 2 s per process, and a failover costs seconds,
	// not a minute. 100ms to 10m. Default 2s.
	ClusterReloadEvery time.Duration `koanf:"cluster_reload_every"`
	// Namespace prefixes every key, so several deployments can share one
	// Redis. Default dq.
	Namespace string `koanf:"namespace"`
}

// SQL selects the ledger's database.
type SQL struct {
	// Driver is sqlite (a local file: for trying delayq out) or mysql
	// (production; MariaDB and TiDB too). Default sqlite.
	Driver string `koanf:"driver"`
	// DSN is the go-sql-driver/mysql DSN. Use interpolateParams=true and
	// READ COMMITTED isolation (see deployments/README.md).
	DSN string `koanf:"dsn"`
	// Shards are the DSNs of the ledger's further shards, each best an SQL
	// server of its own (docs/design.md §7.1, "Ledger shards"): DSN is
	// shard 0, the home shard, and Shards[i] is shard i+1. Partition p of
	// a topic lives on shard p mod N (N = 1 + len(Shards)), a topic of one
	// partition on FNV-1a of its name mod N; so every process must list the
	// same shards in the same order, which the home shard checks at start.
	// Each shard takes the other sql.* settings (pool, TLS but its server
	// name, table prefix). In DELAYQ_SQL_SHARDS the DSNs are
	// comma-separated. mysql driver only. Default none: one shard.
	Shards []string `koanf:"shards"`
	// SQLitePath is the SQLite file. Default delayq.db.
	SQLitePath      string        `koanf:"sqlite_path"`
	MaxOpenConns    int           `koanf:"max_open_conns"`    // Default 20.
	MaxIdleConns    int           `koanf:"max_idle_conns"`    // Default 10.
	ConnMaxLifetime time.Duration `koanf:"conn_max_lifetime"` // Default 30m.
	// TablePrefix starts the ledger's table names: 1-32 letters, digits
	// or underscores. Default dq_.
	TablePrefix string `koanf:"table_prefix"`
	// TLS of the MySQL connection: setting any of these four connects
	// with TLS (1.2 or later), verifying the server's certificate against
	// TLSCAFile (default: the system's roots) and the name TLSServerName
	// (default: the DSN's host), and sending the client certificate
	// TLSCertFile with its key TLSKeyFile (both or neither) if given. A
	// DSN that has a tls parameter of its own keeps it, and these are then
	// ignored (with a warning). mysql driver only. Default "".
	TLSCAFile     string `koanf:"tls_ca_file"`
	TLSCertFile   string `koanf:"tls_cert_file"`
	TLSKeyFile    string `koanf:"tls_key_file"`
	TLSServerName string `koanf:"tls_server_name"`
	// AutoMigrate applies the ledger's missing schema migrations at start.
	// Default true; production may prefer `delayq migrate` or schema.sql
	// (a process that does not migrate logs the migrations it finds
	// missing).
	AutoMigrate bool `koanf:"auto_migrate"`
	// GroupCommit is the most worker writes (records and settlements) one
	// ledger transaction carries when they arrive while a commit is in
	// flight (ledger.Options.GroupCommit, docs/design.md §4.5); -1 turns
	// group commit off. Default 64.
	GroupCommit int `koanf:"group_commit"`
	// GroupLinger is how long a settlement waits for the next record's
	// commit while records flow (ledger.Options.GroupLinger); negative:
	// never. Default 5ms.
	GroupLinger time.Duration `koanf:"group_linger"`
	// GroupCommitDepth is how many grouped commits may be in flight at
	// once (ledger.Options.GroupCommitDepth), 1-16. Default 2. SQLite
	// has one writer: the ledger uses 1 there whatever this says.
	GroupCommitDepth int `koanf:"group_commit_depth"`
	// NotReadyWait is how long a ledger write that a Galera node refused
	// as not ready (error 1047: out of the cluster's primary component) is
	// tried again before it fails retryably (ledger.Options.NotReadyWait,
	// deployments/README.md "Galera"); 0 tries once. Default 3s, at most
	// 1m.
	NotReadyWait time.Duration `koanf:"not_ready_wait"`
}

// Queue sets the data plane's limits.
type Queue struct {
	MaxPayloadBytes    int           `koanf:"max_payload_bytes"`    // Default 1 MiB.
	MaxDelay           time.Duration `koanf:"max_delay"`            // Default 8760h (a year).
	DefaultMaxAttempts int           `koanf:"default_max_attempts"` // Default 25.
	// Coalesce is the most jobs one enqueue script call carries when
	// concurrent enqueues to a topic are coalesced (those arriving while a
	// call is in flight go together). Default 1000; -1 turns it off.
	Coalesce int `koanf:"coalesce"`
	// CoalesceInFlight is how many coalesced enqueue calls of one topic
	// may be in flight at once, so Redis works on one while the client
	// answers the callers of the other. Default 2 (1-64).
	CoalesceInFlight int `koanf:"coalesce_in_flight"`
	// Durability is the durability of every topic not in Topics
	// (docs/design.md §4.11): redis keeps a waiting job in Redis only (the
	// fastest enqueue; Redis's persistence protects it until its first
	// claim), durable commits it to the SQL ledger before the enqueue
	// answers, so no Redis loss can lose it. Default redis: a durable
	// enqueue costs a SQL commit (shared by concurrent enqueues), so each
	// topic opts in.
	Durability string `koanf:"durability"`
	// Topics sets the durability of single topics. Default: none. With
	// orders.enabled the program makes order_close durable unless it is
	// set here (the orders module needs it so, and refuses anything else).
	Topics map[string]QueueTopic `koanf:"topics"`
	// Horizon: a durable job due further ahead than this stays in SQL
	// only, and the relay loads it into Redis ahead of its due time, so
	// Redis memory holds the near future only. Default 1h.
	Horizon time.Duration `koanf:"horizon"`
	// PushTimeout bounds the push of a durable job to Redis after its
	// commit; a failed push is left to the relay and pushes are skipped
	// for as long. Default 1s.
	PushTimeout time.Duration `koanf:"push_timeout"`
	// UncertainRecheck is how long after a durable enqueue whose commit
	// failed with an unknown outcome (its SQL connection or server died
	// mid-commit) the relay checks the whole horizon once more: a Galera
	// node's last commits become visible on the survivors only after they
	// evicted it. 1s to 1h. Default 20s.
	UncertainRecheck time.Duration `koanf:"uncertain_recheck"`
	// TombstoneTTL is how long Redis remembers a durable job acked or any
	// job cancelled, so no relay or recovery pass can bring it back from a
	// row read just before. Default 10s.
	TombstoneTTL time.Duration `koanf:"tombstone_ttl"`
	// LayoutRefresh is how long a process keeps a topic's partition count
	// before reading it again: after a raise, enqueues and claims follow
	// within it. 10ms to 1m. Default 2s.
	LayoutRefresh time.Duration `koanf:"layout_refresh"`
}

// QueueTopic is one topic's queue settings.
type QueueTopic struct {
	// Durability is redis or durable; "" means queue.durability.
	Durability string `koanf:"durability"`
	// History is on or off: whether the topic's finished jobs leave a
	// history row (docs/design.md §4.18). "" means on.
	History string `koanf:"history"`
	// HistoryRetention is how long its history rows are kept; 0 means
	// recovery.history_retention, negative for ever.
	HistoryRetention time.Duration `koanf:"history_retention"`
	// Partitions raises the topic's partition count to at least this when
	// the program starts (docs/design.md §7.1): a stored setting of the
	// topic, never lowered. 0 means as stored (1 unless raised).
	Partitions int `koanf:"partitions"`
	// UniqueFor is the topic's uniqueness window (docs/design.md §4.2.1):
	// a job's id stays taken this long after the job finished, whatever
	// its outcome, so an enqueue of it inside the window is a duplicate.
	// Every process must give a topic the same. A durable topic's window
	// is read from its job history, which must then be on and kept at
	// least as long. 0 means none; at most 720h.
	UniqueFor time.Duration `koanf:"unique_for"`
}

// durable says whether the topic name is durable by this configuration.
func (q Queue) durable(name string) bool {
	d := q.Topics[name].Durability
	if d == "" {
		d = q.Durability
	}
	return d == string(queue.DurabilityDurable)
}

// UniqueFor lists the topics' uniqueness windows
// (queue.topics.<t>.unique_for), where they set one: the queue client's.
func (q Queue) UniqueFor() map[string]time.Duration {
	out := map[string]time.Duration{}
	for name, t := range q.Topics {
		if t.UniqueFor > 0 {
			out[name] = t.UniqueFor
		}
	}
	return out
}

// DurableUniqueFor lists the uniqueness windows of the durable topics: the
// ledger's (ledger.Options.UniqueFor), which reads them from the history.
func (q Queue) DurableUniqueFor() map[string]time.Duration {
	out := map[string]time.Duration{}
	for name, w := range q.UniqueFor() {
		if q.durable(name) {
			out[name] = w
		}
	}
	return out
}

// Partitions lists the partition counts set under queue.topics.
func (q Queue) Partitions() map[string]int {
	out := make(map[string]int)
	for name, t := range q.Topics {
		if t.Partitions > 0 {
			out[name] = t.Partitions
		}
	}
	return out
}

// NoHistory lists the topics whose history is off (queue.topics.<t>.history).
func (q Queue) NoHistory() []string {
	var out []string
	for name, t := range q.Topics {
		if t.History == "off" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// HistoryRetentions are the topics' own history retentions
// (queue.topics.<t>.history_retention), where they set one.
func (q Queue) HistoryRetentions() map[string]time.Duration {
	out := map[string]time.Duration{}
	for name, t := range q.Topics {
		if t.HistoryRetention != 0 {
			out[name] = t.HistoryRetention
		}
	}
	return out
}

// HTTP configures the API server.
type HTTP struct {
	Enabled bool   `koanf:"enabled"` // Default true.
	Listen  string `koanf:"listen"`  // Default 127.0.0.1:8080.
	// Token, if set, is the bearer token every /v1 route requires.
	Token    string `koanf:"token"`
	ReadOnly bool   `koanf:"read_only"` // refuse requeue, purge and recovery runs. Default false.
	// ReadHeaderTimeout bounds sending a request's headers: the guard
	// against slowloris clients that hold connections by trickling them.
	// Any working client sends them in milliseconds. Default 5s.
	ReadHeaderTimeout time.Duration `koanf:"read_header_timeout"`
	// ReadTimeout bounds reading one whole request, body included, from
	// its first byte (a keep-alive connection's wait between requests is
	// IdleTimeout's): a 2 MiB body needs well under a second on any
	// working link. Default 15s.
	ReadTimeout time.Duration `koanf:"read_timeout"`
	// WriteTimeout bounds a request from the end of its headers to the end
	// of its answer; longer than ReadTimeout because a recovery run
	// answers only when its pass is done. Default 30s.
	WriteTimeout time.Duration `koanf:"write_timeout"`
	// IdleTimeout is how long a keep-alive connection may wait for its next
	// request. Keeping connections open is what lets a busy client reuse
	// them (a new connection costs a handshake and a goroutine); each idle
	// one costs about 20 KiB. It is longer than common clients' own idle
	// timeouts (Go's 90s), so the client closes first and never sends a
	// request on a connection the server is closing. Default 2m.
	IdleTimeout time.Duration `koanf:"idle_timeout"`
	// MaxConcurrent caps the requests in flight; the ones beyond get an
	// immediate 503 overloaded (no queue: shedding early beats making every
	// request slow). An HTTP/1.1 connection carries one request at a time,
	// so this is also how many busy client connections are served at once:
	// 1,024 leaves room for 400 and more (the reference benchmark's 400
	// never reach it). It sizes the Redis pool (redis.pool_size). Default
	// 1024.
	MaxConcurrent int `koanf:"max_concurrent"`
	// MaxBodyBytes caps request bodies (413 beyond): the largest payload
	// in base64 and the rest of the request fit. Default 2 MiB.
	MaxBodyBytes int64 `koanf:"max_body_bytes"`
}

// Worker configures the job workers.
type Worker struct {
	Enabled         bool          `koanf:"enabled"`          // Default true.
	ID              string        `koanf:"id"`               // Default host:pid.
	ShutdownTimeout time.Duration `koanf:"shutdown_timeout"` // Default 30s.
	// RegistryEvery is how often each worker process writes its entry in
	// the workers' registry (delayq workers); one 1.5 × this late shows
	// as gone. Default 5s.
	RegistryEvery time.Duration `koanf:"registry_every"`
	// LedgerHold is how long a worker keeps the jobs it holds while its
	// ledger does not answer, before it lets them go for a worker that
	// reaches the ledger (queue.WorkerConfig.LedgerHold). Default 1m.
	LedgerHold time.Duration `koanf:"ledger_hold"`
	// KeyWait is how long a claimed job of an ordering key waits to be
	// claimed again when the ledger says another job of its key is in
	// flight or retrying (queue.WorkerConfig.KeyWait; docs/design.md
	// §4.24). Default 1s.
	KeyWait time.Duration `koanf:"key_wait"`
	// Defaults of every topic; Topics overrides them per topic.
	Concurrency int `koanf:"concurrency"` // Default 10.
	BatchSize   int `koanf:"batch_size"`  // Default 100.
	// Prefetch is the most jobs beyond its free handler slots a topic's
	// fetcher may claim while the topic has a backlog and quick handlers,
	// so that one ledger commit records more of them; it holds no more
	// than its handlers start in about 10ms (queue.TopicConfig.Prefetch).
	// Default 0: 8 × batch_size (800); -1: none.
	Prefetch int `koanf:"prefetch"`
	// ClaimAhead is how long before its due time a job may be claimed and
	// recorded; its handler still starts at the due time, never before
	// (queue.TopicConfig.ClaimAhead). Default 0: 20ms; negative: none.
	ClaimAhead  time.Duration    `koanf:"claim_ahead"`
	Lease       time.Duration    `koanf:"lease"`        // Default 30s.
	Heartbeat   time.Duration    `koanf:"heartbeat"`    // Default lease/3.
	MaxIdle     time.Duration    `koanf:"max_idle"`     // Default 1s.
	BackoffBase time.Duration    `koanf:"backoff_base"` // Default 1s.
	BackoffCap  time.Duration    `koanf:"backoff_cap"`  // Default 1h.
	MaxAttempts int              `koanf:"max_attempts"` // 0 = each job's own.
	Topics      map[string]Topic `koanf:"topics"`
	// OldestEvery: while jobs of raised priority wait, one due job in this
	// many claimed from a topic is the one due longest, whatever its
	// priority, so none waits forever (queue.TopicConfig.OldestEvery);
	// 1 claims by due time alone. 1 to queue.MaxOldestEvery. Default
	// queue.DefaultOldestEvery.
	OldestEvery int `koanf:"oldest_every"`
	// Pools give several topics one shared pool of handlers, split by
	// weight while all have due work (queue.Pool, docs/design.md §4.22):
	// pool name -> its concurrency and its topics' weights. A pooled
	// topic's concurrency is its pool's. Default none.
	Pools map[string]Pool `koanf:"pools"`
	// TargetAllowHosts, if not empty, are the only hosts an HTTP target
	// (worker.topics.<t>.target.url) may name: "api.example.com", or
	// "*.example.com" for the names under it. Default [] (any host).
	TargetAllowHosts []string `koanf:"target_allow_hosts"`
}

// Pool is one shared pool of handlers (worker.pools.<name>).
type Pool struct {
	// Concurrency is how many jobs of the pool's topics run at once,
	// 1-10,000. Required.
	Concurrency int `koanf:"concurrency"`
	// Topics are the pool's topics, each with its weight, 1-1000: while
	// all have due work, a topic of weight 3 runs three times as many as
	// one of weight 1. A topic is in one pool at most.
	Topics map[string]int `koanf:"topics"`
}

// QueuePools are the worker's pools as the queue takes them, by name.
func (w Worker) QueuePools() []queue.Pool {
	names := slices.Sorted(maps.Keys(w.Pools))
	out := make([]queue.Pool, len(names))
	for i, name := range names {
		out[i] = queue.Pool{Name: name, Concurrency: w.Pools[name].Concurrency, Weights: w.Pools[name].Topics}
	}
	return out
}

// PoolOf is the name of the pool topic is in, and its weight there; ""
// when it is in none.
func (w Worker) PoolOf(topic string) (string, int) {
	for name, p := range w.Pools {
		if wt, ok := p.Topics[topic]; ok {
			return name, wt
		}
	}
	return "", 0
}

// HeartbeatInterval is how often the workers renew their leases: Heartbeat,
// or else the worker's default for Lease.
func (w Worker) HeartbeatInterval() time.Duration {
	if w.Heartbeat != 0 {
		return w.Heartbeat
	}
	return queue.DefaultHeartbeat(w.Lease)
}

// TopicSettings returns topic name's overrides with the worker's defaults
// filled in where the program itself needs them: concurrency (its pool's,
// for a topic in worker.pools: an HTTP target's connections are sized by
// it) and the backoff (the queue fills in the rest).
func (w Worker) TopicSettings(name string) Topic {
	t := w.Topics[name]
	if t.Concurrency == 0 {
		t.Concurrency = w.Concurrency
	}
	if pool, _ := w.PoolOf(name); pool != "" {
		t.Concurrency = w.Pools[pool].Concurrency
	}
	if t.BackoffBase == 0 {
		t.BackoffBase = w.BackoffBase
	}
	if t.BackoffCap == 0 {
		t.BackoffCap = w.BackoffCap
	}
	return t
}

// AttemptLimit is how many attempts topic name's workers allow a job at
// most: worker.topics.<name>.max_attempts, else worker.max_attempts; 0
// means each job's own. A job's claim caps its max_attempts to it, so the
// API and the CLI show a waiting job's max_attempts capped the same way.
func (w Worker) AttemptLimit(name string) int {
	if n := w.Topics[name].MaxAttempts; n > 0 {
		return n
	}
	return w.MaxAttempts
}

// RateLimit is topic name's rate limit with its default burst filled in;
// the zero value when it has none.
func (w Worker) RateLimit(name string) queue.RateLimit {
	t := w.Topics[name]
	if t.RateLimit <= 0 {
		return queue.RateLimit{}
	}
	l := queue.RateLimit{PerSecond: t.RateLimit, Burst: t.RateBurst}
	if l.Burst == 0 {
		l.Burst = queue.DefaultRateBurst(l.PerSecond)
	}
	return l
}

// RateLimits are the rate limits of every topic that has one.
func (w Worker) RateLimits() map[string]queue.RateLimit {
	out := make(map[string]queue.RateLimit)
	for name := range w.Topics {
		if l := w.RateLimit(name); l.PerSecond > 0 {
			out[name] = l
		}
	}
	return out
}

// Topic overrides the worker defaults for one topic; zero fields inherit.
type Topic struct {
	Concurrency int           `koanf:"concurrency"`
	BatchSize   int           `koanf:"batch_size"`
	Prefetch    int           `koanf:"prefetch"`
	ClaimAhead  time.Duration `koanf:"claim_ahead"`
	Lease       time.Duration `koanf:"lease"`
	Timeout     time.Duration `koanf:"timeout"`
	BackoffBase time.Duration `koanf:"backoff_base"`
	BackoffCap  time.Duration `koanf:"backoff_cap"`
	MaxAttempts int           `koanf:"max_attempts"`
	// OldestEvery overrides worker.oldest_every for the topic; 0 inherits.
	OldestEvery int `koanf:"oldest_every"`
	// RateLimit caps the topic's handler starts per second across every
	// worker of the cluster (docs/design.md §4.16): every process that
	// handles the topic must set the same; 0.001 to 1,000,000. Default 0:
	// no limit.
	RateLimit float64 `koanf:"rate_limit"`
	// RateBurst is the most starts at once after an idle spell (the token
	// bucket's size). Default: a tenth of rate_limit, at least 1.
	RateBurst int `koanf:"rate_burst"`
	// RateStartLag is how long after its claim a batch's handlers start at
	// the earliest on a rate-limited topic, so the starts keep the claims'
	// pacing whatever the ledger write took (queue.TopicConfig.RateStartLag).
	// Default 100ms; -1ns (any negative) turns it off; at most 10s.
	RateStartLag time.Duration `koanf:"rate_start_lag"`
	// Target, if set, makes the topic an HTTP-target topic: its jobs are
	// delivered to an endpoint by the built-in handler (docs/design.md
	// §4.12), in serve and worker alike.
	Target *Target `koanf:"target"`
}

// Target is the endpoint of an HTTP-target topic; zero fields take the
// defaults.
type Target struct {
	URL     string            `koanf:"url"`     // http:// or https://, no credentials.
	Method  string            `koanf:"method"`  // POST, PUT or PATCH. Default POST.
	Headers map[string]string `koanf:"headers"` // extra static headers (not Delayq-*, hop-by-hop, Content-Type...).
	Timeout time.Duration     `koanf:"timeout"` // one request, answer included. Default 10s.
	// SuccessStatuses complete the job: codes (204), ranges (200-299) or
	// classes (2xx). Default [2xx].
	SuccessStatuses []string `koanf:"success_statuses"`
	// PermanentStatuses bury the job at once, same syntax. Default: 4xx
	// but 408 and 429.
	PermanentStatuses []string `koanf:"permanent_statuses"`
	// SecretEnv names the environment variable that holds the signing
	// secret (Delayq-Signature); a variable named and not set stops the
	// start. Default "" (unsigned).
	SecretEnv string `koanf:"secret_env"`
	// TLSCAFile is a PEM file of the CAs that sign the target's
	// certificate, instead of the system's roots. Default "".
	TLSCAFile string `koanf:"tls_ca_file"`
}

// HTTPTarget is the handler configuration of t, with secret (read from
// SecretEnv by the caller) and the worker's allowed hosts; the caller adds
// the rest (concurrency, Retry-After cap, version, observer, logger).
func (t Target) HTTPTarget(secret []byte, allowHosts []string) httptarget.Config {
	return httptarget.Config{
		URL:               t.URL,
		Method:            t.Method,
		Headers:           t.Headers,
		Timeout:           t.Timeout,
		SuccessStatuses:   t.SuccessStatuses,
		PermanentStatuses: t.PermanentStatuses,
		Secret:            secret,
		TLSCAFile:         t.TLSCAFile,
		AllowHosts:        allowHosts,
	}
}

// Recovery configures the recoverer and the durable topics' relay.
type Recovery struct {
	// Enabled runs the recoverer and the relay in this process (one
	// process at a time works, by their locks). At least one running
	// process must have it on: without a relay, durable jobs beyond the
	// horizon are never loaded into Redis. Default true.
	Enabled bool   `koanf:"enabled"`
	Spec    string `koanf:"spec"` // cron spec. Default @every 30s.
	// Grace is how long past its lease a ledger row must be before it
	// counts as stale; more than the heartbeat. Default 1m.
	Grace  time.Duration `koanf:"grace"`
	DryRun bool          `koanf:"dry_run"` // report, change nothing. Default false.
	// LockTTL is how long the one-recoverer-at-a-time lock lives unless its
	// holder refreshes it: a recoverer that died holding it, or a lock that
	// a Sentinel failover carried over from a run the old primary was
	// doing, blocks recovery for up to this long. Default 1m.
	LockTTL time.Duration `koanf:"lock_ttl"`
	// RelayEvery is how often the relay ticks: it reads Redis (its mark,
	// the enqueuers' notes, the next load time) and passes over the durable
	// topics' waiting rows when woken (a row entering the horizon, a push
	// lost or skipped, a Redis data loss, an error). Default 200ms.
	RelayEvery time.Duration `koanf:"relay_every"`
	// RelayGrace is how long past its due time a durable job may be missing
	// from Redis before the relay pushes it; relay_every + relay_grace bound
	// how late a job whose push was lost runs. Default 300ms.
	RelayGrace time.Duration `koanf:"relay_grace"`
	// RelayLockTTL is how long the one-relay-at-a-time lock outlives a
	// relay that died holding it. Default 3s.
	RelayLockTTL time.Duration `koanf:"relay_lock_ttl"`
	// RelayFullEvery is how often the relay checks every durable job due
	// within the horizon against Redis, overdue ones included: the
	// backstop for a push lost where its windows cannot see. Default 5m.
	RelayFullEvery time.Duration `koanf:"relay_full_every"`
	// RelayCheckEvery is how often the relay passes over SQL when nothing
	// woke it: the backstop of the wakes (a lost push whose note could not
	// be written). relay_every to relay_full_every, at most 30s. Default
	// 10s.
	RelayCheckEvery time.Duration `koanf:"relay_check_every"`
	// RelayIdleEvery is the longest an idle relay (no note pending,
	// nothing to load or check sooner) waits between ticks, blocked on the
	// bell every enqueuer's note rings; it bounds how late a FLUSHALL of
	// Redis (data lost without a restart) starts the reload. Whole
	// seconds, 1s to relay_check_every. Default 1s.
	RelayIdleEvery time.Duration `koanf:"relay_idle_every"`
	// RelayHandOverAfter is how long the relay's passes may all fail
	// before the process that holds its lock releases it for another
	// process to try (its own SQL may be what is down: a Galera node that
	// died under it); it tries again after relay_lock_ttl. At least
	// relay_every. Default 5s.
	RelayHandOverAfter time.Duration `koanf:"relay_handover_after"`
	// HistoryRetention is how long the job history's rows are kept (each
	// recovery run deletes older ones, 500 per statement); a topic may
	// set its own (queue.topics.<t>.history_retention). Negative: for
	// ever. Default 168h (a week).
	HistoryRetention time.Duration `koanf:"history_retention"`
	// HistoryPurgeBatch is the most history rows one DELETE of that purge
	// removes, 1 to 10000. Default 500.
	HistoryPurgeBatch int `koanf:"history_purge_batch"`
	// HistoryPurgeDuty is the largest share of the time the purge spends
	// deleting (it rests after each DELETE), above 0 and at most 1: a
	// million-row backlog then costs a running drain about that share of
	// the SQL server. Default 0.05.
	HistoryPurgeDuty float64 `koanf:"history_purge_duty"`
}

// Orders configures the order auto-close module (jobs/orderclose), the
// program's demo of a business module.
type Orders struct {
	// Enabled registers the module: its tables, HTTP routes, close handler
	// and sweeper. Default false, so that a service running `delayq serve`
	// gets no demo tables or topic; `delayq demo` always turns it on, and
	// configs/delayq.yaml sets it.
	Enabled bool `koanf:"enabled"`

	PaymentWindow time.Duration `koanf:"payment_window"` // Default 30m.
	SweeperSpec   string        `koanf:"sweeper_spec"`   // Default @every 1m.
	SweeperGrace  time.Duration `koanf:"sweeper_grace"`  // Default 1m.
	// SweeperLockTTL is how long the one-sweeper-at-a-time lock lives unless
	// its holder refreshes it (every third of it): a process that died
	// holding it (killed mid-sweep) holds off every other sweeper for up to
	// this long; one that shuts down releases it. Default 1m.
	SweeperLockTTL time.Duration `koanf:"sweeper_lock_ttl"`
}

// Metrics configures the Prometheus endpoint.
type Metrics struct {
	// Enabled serves GET /metrics on the API's listener (no token). Default
	// true.
	Enabled bool `koanf:"enabled"`
	// Listen, if set, also serves /metrics on a listener of its own
	// (host:port): the way to scrape a `delayq worker` process, which has
	// no API. Default "" (none).
	Listen string `koanf:"listen"`
}

// Dashboard configures the live dashboard page.
type Dashboard struct {
	// Enabled serves the dashboard at GET / on the API's listener. Default
	// true.
	Enabled bool `koanf:"enabled"`
	// SampleEvery is how often the charts get a point. Default 2s.
	SampleEvery time.Duration `koanf:"sample_every"`
	// History is how far back the charts go. Default 5m.
	History time.Duration `koanf:"history"`
}

// CLI configures how the operator commands (enqueue, cancel, get, stats,
// dead, ledger, recover, smoke) reach the jobs.
type CLI struct {
	// API is the base URL (http://host:port) of a running instance's HTTP
	// API: when set, the operator commands send their requests there, with
	// http.token as the bearer token. "" means: with redis.mode embedded
	// (the CLI would otherwise get a throwaway Redis of its own), the API at
	// http.listen; with a Redis configured, Redis and SQL directly.
	// Default "".
	API string `koanf:"api"`
}

// Defaults returns the configuration with every default filled in.
func Defaults() Config {
	return Config{
		Log:   Log{Level: "info", Format: "auto"},
		Redis: Redis{Mode: "embedded", Addrs: []string{}, Namespace: "dq", ClusterReloadEvery: 2 * time.Second},
		SQL: SQL{Driver: "sqlite", SQLitePath: "delayq.db", Shards: []string{}, MaxOpenConns: 20, MaxIdleConns: 10,
			ConnMaxLifetime: 30 * time.Minute, TablePrefix: "dq_", AutoMigrate: true,
			GroupCommit: ledger.DefaultGroupCommit, GroupLinger: ledger.DefaultGroupLinger,
			GroupCommitDepth: ledger.DefaultGroupCommitDepth, NotReadyWait: ledger.DefaultNotReadyWait},
		Queue: Queue{MaxPayloadBytes: 1 << 20, MaxDelay: 365 * 24 * time.Hour, DefaultMaxAttempts: 25, Coalesce: 1000, CoalesceInFlight: 2,
			Durability: "redis", Topics: map[string]QueueTopic{},
			Horizon: time.Hour, PushTimeout: time.Second, UncertainRecheck: 20 * time.Second, TombstoneTTL: 10 * time.Second,
			LayoutRefresh: 2 * time.Second},
		HTTP: HTTP{Enabled: true, Listen: "127.0.0.1:8080", ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout: 15 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
			MaxConcurrent: 1024, MaxBodyBytes: 2 << 20},
		Worker: Worker{Enabled: true, ShutdownTimeout: 30 * time.Second, RegistryEvery: 5 * time.Second, LedgerHold: queue.DefaultLedgerHold, KeyWait: time.Second, Concurrency: 10, BatchSize: 100,
			Lease: 30 * time.Second, MaxIdle: time.Second, BackoffBase: time.Second, BackoffCap: time.Hour,
			OldestEvery: queue.DefaultOldestEvery, Topics: map[string]Topic{}, Pools: map[string]Pool{}, TargetAllowHosts: []string{}},
		Recovery: Recovery{Enabled: true, Spec: "@every 30s", Grace: time.Minute, LockTTL: time.Minute,
			RelayEvery: 200 * time.Millisecond, RelayGrace: 300 * time.Millisecond, RelayLockTTL: 3 * time.Second,
			RelayFullEvery: 5 * time.Minute, RelayCheckEvery: 10 * time.Second,
			RelayIdleEvery: time.Second, RelayHandOverAfter: 5 * time.Second, HistoryRetention: 7 * 24 * time.Hour,
			HistoryPurgeBatch: ledger.DefaultPurgeBatch, HistoryPurgeDuty: ledger.DefaultPurgeDuty},
		Orders: Orders{Enabled: false, PaymentWindow: 30 * time.Minute, SweeperSpec: "@every 1m", SweeperGrace: time.Minute,
			SweeperLockTTL: time.Minute},
		Metrics:   Metrics{Enabled: true},
		Dashboard: Dashboard{Enabled: true, SampleEvery: 2 * time.Second, History: 5 * time.Minute},
		Periodic:  []Periodic{},
		Tracing:   Tracing{Exporter: "otlp"},
	}
}

// ConfigureLifecycles writes queue.durability and the topics' durability into
// the queue client's configuration, which decides each topic's lifecycle
// from them (internal/dataplane/lifecycle.go).
func (q Queue) ConfigureLifecycles(c *queue.Config) {
	c.Durability = queue.Durability(q.Durability)
	c.TopicDurability = make(map[string]queue.Durability, len(q.Topics))
	for name, t := range q.Topics {
		if t.Durability != "" {
			c.TopicDurability[name] = queue.Durability(t.Durability)
		}
	}
}

// Periodic is one periodic job (package queue/periodic).
type Periodic struct {
	// Name identifies the schedule across processes and restarts and
	// starts its jobs' ids ("<name>:<tick Unix ms>"): 1-64 of
	// [A-Za-z0-9_.-], unique.
	Name string `koanf:"name"`
	// Spec is a robfig/cron spec: five fields, six with seconds first
	// ("*/10 * * * * *"), or @every/@daily..., optionally with a
	// CRON_TZ=<zone> prefix.
	Spec string `koanf:"spec"`
	// Location is the IANA zone of a spec without CRON_TZ=. Default ""
	// (UTC).
	Location string `koanf:"location"`
	// Topic the jobs go to (a redis or a durable topic).
	Topic string `koanf:"topic"`
	// Payload of every job: a string as is, or YAML (a map, a list) sent
	// as its JSON. Default "" (empty).
	Payload any `koanf:"payload"`
	// MaxAttempts of every job; 0 means queue.default_max_attempts.
	MaxAttempts int `koanf:"max_attempts"`
	// Priority of every job within its topic, 0 (the default) to 3
	// (docs/design.md §4.23).
	Priority int `koanf:"priority"`
	// Missed is what to do about ticks missed while no process ran the
	// schedule: skip (nothing) or once (one job, for the latest). Default
	// skip.
	Missed string `koanf:"missed"`
}

// Schedule is p as the scheduler takes it; the error says which field is
// bad (Validate has checked them all).
func (p Periodic) Schedule() (periodic.Schedule, error) {
	s := periodic.Schedule{Name: p.Name, Spec: p.Spec, Topic: p.Topic, MaxAttempts: p.MaxAttempts, Priority: p.Priority,
		Missed: periodic.Missed(p.Missed)}
	if p.Location != "" {
		loc, err := time.LoadLocation(p.Location)
		if err != nil {
			return s, &Error{Key: "location", Value: p.Location, Reason: err.Error()}
		}
		s.Location = loc
	}
	b, err := periodic.PayloadOf(p.Payload)
	if err != nil {
		return s, &Error{Key: "payload", Value: p.Payload, Reason: err.Error()}
	}
	s.Payload = b
	return s, nil
}

// Schedules returns the periodic jobs as the scheduler takes them.
func (c Config) Schedules() ([]periodic.Schedule, error) {
	out := make([]periodic.Schedule, 0, len(c.Periodic))
	for _, p := range c.Periodic {
		s, err := p.Schedule()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

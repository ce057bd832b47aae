package config_test

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/delayq/delayq/app/config"
	"github.com/delayq/delayq/queue"
)

// configs/delayq.yaml writes out every default: loading it must give
// exactly Defaults(), but for the orders module it turns on (with the
// durable topic that module needs) so that the README's walk-through finds
// it.
func TestShippedFileHoldsTheDefaults(t *testing.T) {
	got, err := config.Load("../../configs/delayq.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := config.Defaults()
	if want.Orders.Enabled || len(want.Queue.Topics) != 0 {
		t.Fatalf("defaults: orders.enabled %v, queue.topics %v: want the orders module off and no topic", want.Orders.Enabled, want.Queue.Topics)
	}
	want.Orders.Enabled = true
	want.Queue.Topics = map[string]config.QueueTopic{"order_close": {Durability: "durable"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("configs/delayq.yaml differs from the defaults:\n got %+v\nwant %+v", got, want)
	}
}

func TestProductionExampleLoads(t *testing.T) {
	t.Setenv("DELAYQ_SQL_DSN", "u:p@tcp(db:3306)/delayq?parseTime=true")
	t.Setenv("DELAYQ_HTTP_TOKEN", "secret")
	c, err := config.Load("../../configs/production.example.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Redis.Mode != "single" || c.SQL.Driver != "mysql" || c.Worker.Topics["order_close"].Concurrency != 50 {
		t.Fatalf("production example: %+v", c)
	}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "delayq.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// File < environment < flags, key by key.
func TestPrecedence(t *testing.T) {
	path := writeFile(t, "redis:\n  mode: single\n  addrs: [file:6379]\nworker:\n  concurrency: 7\n  lease: 2m\nhttp:\n  listen: 127.0.0.1:9000\n")
	t.Setenv("DELAYQ_WORKER_CONCURRENCY", "8")
	t.Setenv("DELAYQ_HTTP_LISTEN", "127.0.0.1:9001")
	t.Setenv("DELAYQ_TEST_REDIS_ADDR", "not configuration") // other DELAYQ_ variables are ignored
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	config.AddFlags(fs)
	if err := fs.Parse([]string{"--listen", "127.0.0.1:9002"}); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path, fs)
	if err != nil {
		t.Fatal(err)
	}
	if c.Redis.Addrs[0] != "file:6379" || c.Worker.Lease != 2*time.Minute {
		t.Errorf("file values lost: %+v %+v", c.Redis, c.Worker)
	}
	if c.Worker.Concurrency != 8 {
		t.Errorf("env did not override the file: concurrency %d", c.Worker.Concurrency)
	}
	if c.HTTP.Listen != "127.0.0.1:9002" {
		t.Errorf("flag did not override env: listen %s", c.HTTP.Listen)
	}
	if c.Worker.BatchSize != 100 {
		t.Errorf("default lost: batch size %d", c.Worker.BatchSize)
	}
}

func TestEnvListAndFlagsSwitchBackends(t *testing.T) {
	t.Setenv("DELAYQ_REDIS_ADDRS", "a:1,b:2")
	t.Setenv("DELAYQ_REDIS_MODE", "cluster")
	t.Setenv("DELAYQ_SQL_SHARDS", "u:p@tcp(y:3306)/d,u:p@tcp(z:3306)/d")
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	config.AddFlags(fs)
	if err := fs.Parse([]string{"--sql-dsn", "u:p@tcp(x:3306)/d"}); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load("", fs)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Redis.Addrs, []string{"a:1", "b:2"}) || c.Redis.Mode != "cluster" || c.SQL.Driver != "mysql" {
		t.Fatalf("got %+v %+v", c.Redis, c.SQL)
	}
	if !reflect.DeepEqual(c.SQL.Shards, []string{"u:p@tcp(y:3306)/d", "u:p@tcp(z:3306)/d"}) {
		t.Fatalf("DELAYQ_SQL_SHARDS gave %q", c.SQL.Shards)
	}
}

// Every section takes its variables: DELAYQ_TRACING_* too.
func TestEnvTracing(t *testing.T) {
	t.Setenv("DELAYQ_TRACING_ENABLED", "true")
	c, err := config.Load("", nil)
	if err != nil || !c.Tracing.Enabled || c.Tracing.Exporter != "otlp" {
		t.Fatalf("DELAYQ_TRACING_ENABLED: %+v %v", c.Tracing, err)
	}
	t.Setenv("DELAYQ_TRACING_EXPORTER", "bogus")
	if _, err := config.Load("", nil); err == nil || !strings.Contains(err.Error(), "tracing.exporter") {
		t.Fatalf("DELAYQ_TRACING_EXPORTER=bogus: %v", err)
	}
}

// Invalid config is refused with the key, the value and why.
func TestInvalidConfigNamesTheKey(t *testing.T) {
	cases := []struct{ yaml, key string }{
		{"redis:\n  mode: clustr\n", "redis.mode"},
		{"redis:\n  mode: single\n", "redis.addrs"},
		{"redis:\n  mode: single\n  addrs: [nohostport]\n", "redis.addrs"},
		{"sql:\n  driver: mysql\n", "sql.dsn"},
		{"sql:\n  shards: [\"u@tcp(h:3306)/b\"]\n", "sql.shards"},
		{"sql:\n  driver: mysql\n  dsn: u@tcp(h:3306)/a\n  shards: [\"u@tcp(h:3306)/b\", \" \"]\n", "sql.shards[1]"},
		{"sql:\n  driver: mysql\n  dsn: u@tcp(h:3306)/a\n  shards: [\"u@tcp(h:3306)/b\", \"u@tcp(h:3306)/a\"]\n", "sql.shards[1]"},
		{"worker:\n  lease: 10ms\n", "worker.lease"},
		{"queue:\n  topics:\n    pay: {unique_for: -1s}\n", "queue.topics.pay.unique_for"},
		{"queue:\n  topics:\n    pay: {unique_for: 721h}\n", "queue.topics.pay.unique_for"},
		{"queue:\n  topics:\n    pay: {durability: durable, history: off, unique_for: 1h}\n", "queue.topics.pay.unique_for"},
		{"queue:\n  topics:\n    pay: {durability: durable, unique_for: 200h}\n", "queue.topics.pay.unique_for"},
		{"queue:\n  topics:\n    pay: {durability: durable, unique_for: 2h, history_retention: 1h}\n", "queue.topics.pay.unique_for"},
		{"worker:\n  heartbeat: 40s\n", "worker.heartbeat"},
		{"worker:\n  claim_ahead: 2s\n", "worker.claim_ahead"},
		{"worker:\n  lease: 1s\n  claim_ahead: 500ms\n", "worker.claim_ahead"},
		{"worker:\n  topics:\n    sms: {claim_ahead: 1500ms}\n", "worker.topics.sms.claim_ahead"},
		{"worker:\n  topics:\n    sms: {lease: 200ms, claim_ahead: 100ms}\n", "worker.topics.sms.claim_ahead"},
		{"worker:\n  claim_ahead: 500ms\n  topics:\n    sms: {lease: 1s}\n", "worker.topics.sms.claim_ahead"},
		{"recovery:\n  grace: 5s\n", "recovery.grace"},
		{"redis:\n  mode: single\n  addrs: [\"127.0.0.1:6379\"]\n  sentinel_password: s3\n", "redis.sentinel_password"},
		{"recovery:\n  lock_ttl: 100ms\n", "recovery.lock_ttl"},
		{"recovery:\n  history_purge_batch: 0\n", "recovery.history_purge_batch"},
		{"recovery:\n  history_purge_batch: 20000\n", "recovery.history_purge_batch"},
		{"recovery:\n  history_purge_duty: 0\n", "recovery.history_purge_duty"},
		{"recovery:\n  history_purge_duty: 1.5\n", "recovery.history_purge_duty"},
		{"recovery:\n  history_purge_duty: .nan\n", "recovery.history_purge_duty"},
		{"sql:\n  not_ready_wait: -1s\n", "sql.not_ready_wait"},
		{"worker:\n  ledger_hold: 10ms\n", "worker.ledger_hold"},
		{"sql:\n  not_ready_wait: 2m\n", "sql.not_ready_wait"},
		{"orders:\n  enabled: true\n  sweeper_lock_ttl: 100ms\n", "orders.sweeper_lock_ttl"},
		{"orders:\n  enabled: true\n  sweeper_lock_ttl: -1s\n", "orders.sweeper_lock_ttl"},
		{"recovery:\n  spec: every thirty seconds\n", "recovery.spec"},
		{"http:\n  listen: 0.0.0.0:8080\n", "http.token"},
		{"redis:\n  pool_size: -1\n", "redis.pool_size"},
		{"queue:\n  coalesce: 0\n", "queue.coalesce"},
		{"queue:\n  coalesce: 20000\n", "queue.coalesce"},
		{"queue:\n  coalesce_in_flight: 0\n", "queue.coalesce_in_flight"},
		{"worker:\n  topics:\n    'bad topic': {concurrency: 1}\n", "worker.topics.bad topic"},
		{"worker:\n  topics:\n    sms: {rate_limit: -5}\n", "worker.topics.sms.rate_limit"},
		{"worker:\n  topics:\n    sms: {rate_limit: .nan}\n", "worker.topics.sms.rate_limit"},
		{"worker:\n  topics:\n    sms: {rate_limit: .inf}\n", "worker.topics.sms.rate_limit"},
		{"worker:\n  topics:\n    sms: {rate_limit: 10, rate_burst: -1}\n", "worker.topics.sms.rate_burst"},
		{"worker:\n  topics:\n    sms: {rate_burst: 5}\n", "worker.topics.sms.rate_burst"},
		{"worker:\n  topics:\n    sms: {rate_limit: 10, rate_start_lag: 1h}\n", "worker.topics.sms.rate_start_lag"},
		{"worker:\n  oldest_every: 0\n", "worker.oldest_every"},
		{"worker:\n  oldest_every: 1001\n", "worker.oldest_every"},
		{"worker:\n  topics:\n    sms: {oldest_every: -1}\n", "worker.topics.sms.oldest_every"},
		{"worker:\n  topics:\n    sms: {oldest_every: 1001}\n", "worker.topics.sms.oldest_every"},
		{"worker:\n  topics:\n    sms: {rate_limit: 0.00001}\n", "worker.topics.sms.rate_limit"},
		{"worker:\n  topics:\n    sms: {rate_limit: 10, rate_burst: 2000000}\n", "worker.topics.sms.rate_burst"},
		{"worker:\n  pools:\n    p: {topics: {a: 1}}\n", "worker.pools.p.concurrency"},
		{"worker:\n  pools:\n    p: {concurrency: 20000, topics: {a: 1}}\n", "worker.pools.p.concurrency"},
		{"worker:\n  pools:\n    p: {concurrency: 4}\n", "worker.pools.p.topics"},
		{"worker:\n  pools:\n    p: {concurrency: 4, topics: {a: 0}}\n", "worker.pools.p.topics.a"},
		{"worker:\n  pools:\n    p: {concurrency: 4, topics: {a: 1001}}\n", "worker.pools.p.topics.a"},
		{"worker:\n  pools:\n    p: {concurrency: 4, topics: {'bad topic': 1}}\n", "worker.pools.p.topics.bad topic"},
		{"worker:\n  pools:\n    'a/b': {concurrency: 4, topics: {a: 1}}\n", "worker.pools.a/b"},
		{"worker:\n  pools:\n    p: {concurrency: 4, topics: {a: 1}}\n    q: {concurrency: 4, topics: {a: 2}}\n", "worker.pools.q.topics.a"},
		{"metrics:\n  listen: nohostport\n", "metrics.listen"},
		{"metrics:\n  listen: 127.0.0.1:99999\n", "metrics.listen"},
		{"http:\n  listen: 127.0.0.1:99999\n", "http.listen"},
		{"http:\n  listen: 127.0.0.1:-1\n", "http.listen"},
		{"dashboard:\n  sample_every: 1ms\n", "dashboard.sample_every"},
		{"dashboard:\n  history: 1s\n", "dashboard.history"},
		{"cli:\n  api: 127.0.0.1:8080\n", "cli.api"},
		{"cli:\n  api: ftp://h:1\n", "cli.api"},
		{"cli:\n  api: http://h:1/v1\n", "cli.api"},
		{"cli:\n  api: http://h:1/delayq/v1/\n", "cli.api"},
		{"cli:\n  api: http://user:secret@h:1\n", "cli.api"},
		{"cli:\n  api: http://h:1/?x=1\n", "cli.api"},
		{"periodic:\n  - {name: a, spec: '61 * * * * *', topic: t}\n", "periodic[0].spec"},
		{"periodic:\n  - {name: 'a:b', spec: '@hourly', topic: t}\n", "periodic[0].name"},
		{"periodic:\n  - {name: a, spec: '@hourly', topic: 'bad topic'}\n", "periodic[0].topic"},
		{"periodic:\n  - {name: a, spec: '@hourly', topic: t, missed: twice}\n", "periodic[0].missed"},
		{"periodic:\n  - {name: a, spec: '@hourly', topic: t, priority: 4}\n", "periodic[0].priority"},
		{"periodic:\n  - {name: a, spec: '@hourly', topic: t, location: Mars/Olympus}\n", "periodic[0].location"},
		{"periodic:\n  - {name: a, spec: '@hourly', topic: t, max_attempts: 1000}\n", "periodic[0].max_attempts"},
		{"periodic:\n  - {name: a, spec: '@hourly', topic: t}\n  - {name: a, spec: '@daily', topic: u}\n", "periodic[1].name"},
	}
	for _, tc := range cases {
		_, err := config.Load(writeFile(t, tc.yaml), nil)
		var ce *config.Error
		if !errors.As(err, &ce) || !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%q: err = %v, want a config.Error naming %s", tc.yaml, err, tc.key)
		}
	}
}

func TestUnknownKeysAndBadTypesAreRefused(t *testing.T) {
	for _, body := range []string{"redis:\n  adrs: [a:1]\n", "worker:\n  concurrency: many\n", "nosuchsection: 1\n"} {
		if _, err := config.Load(writeFile(t, body), nil); err == nil {
			t.Errorf("%q accepted", body)
		}
	}
	t.Setenv("DELAYQ_REDIS_ADRS", "a:1")
	if _, err := config.Load("", nil); err == nil || !strings.Contains(err.Error(), "adrs") {
		t.Errorf("unknown env key: %v", err)
	}
}

// A value the weakly typed decoder would have turned into another one is
// refused, naming its key: a fraction or an out-of-range number for an
// integer, a yes/no for a number, a number for a yes/no, a bare number
// for a duration; from the file and from the environment alike. Whole
// numbers written as 3.0, and durations and numbers as strings, still
// load.
func TestValuesAreNotCoerced(t *testing.T) {
	for _, c := range []struct{ yaml, key string }{
		{"worker:\n  concurrency: 2.5\n", "worker.concurrency"},
		{"worker:\n  concurrency: true\n", "worker.concurrency"},
		{"worker:\n  concurrency: 99999999999999999999\n", "worker.concurrency"},
		{"worker:\n  lease: 30\n", "worker.lease"},
		{"worker:\n  lease: true\n", "worker.lease"},
		{"worker:\n  enabled: 1\n", "worker.enabled"},
		{"worker:\n  pools:\n    p: {concurrency: 4, topics: {a: 2.5}}\n", "worker.pools"},
		{"worker:\n  topics:\n    t: {rate_limit: true}\n", "worker.topics"},
		{"queue:\n  default_max_attempts: 1.5\n", "queue.default_max_attempts"},
		{"worker:\n  concurrency: 9223372036854775808\n", "worker.concurrency"},
	} {
		_, err := config.Load(writeFile(t, c.yaml), nil)
		if err == nil || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%q: %v, want an error naming %s", c.yaml, err, c.key)
		}
	}
	for env, key := range map[string]string{
		"DELAYQ_WORKER_CONCURRENCY": "2.5", "DELAYQ_WORKER_LEASE": "30", "DELAYQ_WORKER_ENABLED": "yes please",
	} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, key)
			if _, err := config.Load("", nil); err == nil {
				t.Errorf("%s=%s accepted", env, key)
			}
		})
	}
	c, err := config.Load(writeFile(t, "worker:\n  concurrency: 3.0\n  lease: 45s\n  topics:\n    t: {rate_limit: 2.5}\n"), nil)
	if err != nil || c.Worker.Concurrency != 3 || c.Worker.Lease != 45*time.Second || c.Worker.Topics["t"].RateLimit != 2.5 {
		t.Fatalf("good values: %+v, %v", c.Worker, err)
	}
	t.Setenv("DELAYQ_WORKER_CONCURRENCY", "7")
	t.Setenv("DELAYQ_WORKER_ENABLED", "false")
	t.Setenv("DELAYQ_REDIS_DB", "") // empty: unset (a templated ${VAR:-})
	if c, err := config.Load("", nil); err != nil || c.Worker.Concurrency != 7 || c.Worker.Enabled {
		t.Fatalf("from the environment: %v, concurrency %d, enabled %v", err, c.Worker.Concurrency, c.Worker.Enabled)
	}
}

// cli.api comes from the file, DELAYQ_CLI_API or --api, in that order of
// precedence.
func TestCLIAPISources(t *testing.T) {
	path := writeFile(t, "cli:\n  api: http://file:8080\n")
	c, err := config.Load(path, nil)
	if err != nil || c.CLI.API != "http://file:8080" {
		t.Fatalf("file: %q, %v", c.CLI.API, err)
	}
	t.Setenv("DELAYQ_CLI_API", "http://env:8080")
	if c, err = config.Load(path, nil); err != nil || c.CLI.API != "http://env:8080" {
		t.Fatalf("env: %q, %v", c.CLI.API, err)
	}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	config.AddFlags(fs)
	if err := fs.Parse([]string{"--api", "https://flag:8443/delayq"}); err != nil {
		t.Fatal(err)
	}
	if c, err = config.Load(path, fs); err != nil || c.CLI.API != "https://flag:8443/delayq" {
		t.Fatalf("flag: %q, %v", c.CLI.API, err)
	}
}

func TestTopicRateLimit(t *testing.T) {
	cfg, err := config.Load(writeFile(t, "worker:\n  topics:\n    sms: {rate_limit: 500}\n    push: {rate_limit: 0.5, rate_burst: 3}\n    mail: {concurrency: 2}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Worker.RateLimits()
	want := map[string]queue.RateLimit{"sms": {PerSecond: 500, Burst: 50}, "push": {PerSecond: 0.5, Burst: 3}}
	if !maps.Equal(got, want) {
		t.Fatalf("rate limits %v, want %v", got, want)
	}
	if l := cfg.Worker.RateLimit("mail"); l != (queue.RateLimit{}) {
		t.Fatalf("mail has limit %+v", l)
	}
}

// worker.oldest_every and a topic's own, from the file and the
// environment; a topic without one inherits (0). The bounds are the
// queue's: the largest it takes loads.
func TestOldestEvery(t *testing.T) {
	cfg, err := config.Load(writeFile(t, "worker:\n  topics:\n    sms: {oldest_every: 1}\n    mail: {concurrency: 2}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Worker.OldestEvery != queue.DefaultOldestEvery || cfg.Worker.Topics["sms"].OldestEvery != 1 || cfg.Worker.Topics["mail"].OldestEvery != 0 {
		t.Fatalf("oldest_every: worker %d, sms %d, mail %d; want %d, 1, 0",
			cfg.Worker.OldestEvery, cfg.Worker.Topics["sms"].OldestEvery, cfg.Worker.Topics["mail"].OldestEvery, queue.DefaultOldestEvery)
	}
	t.Setenv("DELAYQ_WORKER_OLDEST_EVERY", "1000")
	if cfg, err = config.Load("", nil); err != nil || cfg.Worker.OldestEvery != queue.MaxOldestEvery {
		t.Fatalf("DELAYQ_WORKER_OLDEST_EVERY=1000: %d, %v", cfg.Worker.OldestEvery, err)
	}
}

// worker.pools as the queue takes them: sorted by name, with their topics'
// weights; PoolOf finds a topic's.
func TestWorkerPools(t *testing.T) {
	cfg, err := config.Load(writeFile(t, "worker:\n  pools:\n    notify: {concurrency: 40, topics: {mail: 3, sms: 1}}\n    bulk: {concurrency: 5, topics: {report: 1}}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Worker.QueuePools()
	if len(got) != 2 || got[0].Name != "bulk" || got[1].Name != "notify" || got[1].Concurrency != 40 ||
		!maps.Equal(got[1].Weights, map[string]int{"mail": 3, "sms": 1}) || queue.ValidatePools(got) != nil {
		t.Fatalf("pools %+v", got)
	}
	if p, w := cfg.Worker.PoolOf("sms"); p != "notify" || w != 1 {
		t.Fatalf("PoolOf(sms) = %s, %d", p, w)
	}
	if p, _ := cfg.Worker.PoolOf("other"); p != "" {
		t.Fatalf("PoolOf(other) = %s", p)
	}
	// A pooled topic's effective concurrency is its pool's (an HTTP
	// target's connections are sized by it).
	if c := cfg.Worker.TopicSettings("sms").Concurrency; c != 40 {
		t.Fatalf("sms's concurrency %d, want its pool's 40", c)
	}
	if c := cfg.Worker.TopicSettings("other").Concurrency; c != 10 {
		t.Fatalf("other's concurrency %d, want the worker's 10", c)
	}
}

// A periodic job from the file: its payload as JSON (or a string as is),
// its zone loaded.
func TestPeriodicFromFile(t *testing.T) {
	c, err := config.Load(writeFile(t, `
periodic:
  - name: report
    spec: "0 30 2 * * *"
    location: Europe/Berlin
    topic: reports
    payload: {kind: nightly, n: 2}
    missed: once
  - name: ping
    spec: "@every 10s"
    topic: pings
    payload: hello
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Schedules()
	if err != nil || len(s) != 2 {
		t.Fatalf("schedules %+v %v", s, err)
	}
	if s[0].Location == nil || s[0].Location.String() != "Europe/Berlin" || string(s[0].Payload) != `{"kind":"nightly","n":2}` || s[0].Missed != "once" {
		t.Fatalf("report: %+v", s[0])
	}
	if string(s[1].Payload) != "hello" || s[1].Location != nil {
		t.Fatalf("ping: %+v", s[1])
	}
	if _, err := config.Load(writeFile(t, "periodic:\n  - {name: a, spec: '@hourly', topic: t, colour: red}\n"), nil); err == nil {
		t.Fatal("unknown periodic key accepted")
	}
}

package config_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/delayq/delayq/app/config"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// configKeys returns every configuration key, read from the koanf tags of
// Config (so keys added later are known without touching this file), and
// the keys of map sections, whose entries are the user's own names.
func configKeys() (keys map[string]bool, maps []string) {
	keys = map[string]bool{}
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("koanf")
			if tag == "" {
				continue
			}
			key := prefix + tag
			keys[key] = true
			switch f.Type.Kind() {
			case reflect.Struct:
				walk(f.Type, key+".")
			case reflect.Map:
				maps = append(maps, key+".")
			}
		}
	}
	walk(reflect.TypeOf(config.Config{}), "")
	return keys, maps
}

// checkLoadError fails unless err is one of the two kinds Load documents:
// invalid values, where every joined error is a *config.Error naming a real
// key (and the whole matches config.ErrInvalid); or a file, syntax, unknown
// key or type problem, which wraps its cause. Both start with "config: ".
func checkLoadError(t *testing.T, err error, keys map[string]bool, maps []string) {
	t.Helper()
	if !strings.HasPrefix(err.Error(), "config: ") {
		t.Fatalf("error %q does not start with \"config: \"", err)
	}
	if !errors.Is(err, config.ErrInvalid) {
		if errors.Unwrap(err) == nil {
			t.Fatalf("load error %q (%T) wraps no cause", err, err)
		}
		return
	}
	leaves := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		leaves = j.Unwrap()
	}
	for _, leaf := range leaves {
		var ce *config.Error
		if !errors.As(leaf, &ce) || !errors.Is(leaf, config.ErrInvalid) {
			t.Fatalf("validation error %q (%T) is not a *config.Error", leaf, leaf)
		}
		known := keys[ce.Key]
		for _, m := range maps {
			known = known || (strings.HasPrefix(ce.Key, m) && len(ce.Key) > len(m))
		}
		if !known || ce.Reason == "" {
			t.Fatalf("validation error %+v: want a known key and a reason", ce)
		}
	}
}

// nopLedger lets the fuzz target build a worker; it is never called.
type nopLedger struct{}

func (nopLedger) Record(context.Context, []*queue.Job, string) error           { return nil }
func (nopLedger) Complete(context.Context, []queue.Ref) error                  { return nil }
func (nopLedger) CompleteResults(context.Context, []queue.Ref, [][]byte) error { return nil }
func (nopLedger) CancelRows(context.Context, []queue.Ref) error                { return nil }
func (nopLedger) Cancelled(context.Context, []*queue.Job) error                { return nil }
func (nopLedger) Unclaim(context.Context, []queue.Ref) error                   { return nil }
func (nopLedger) DropRows(context.Context, []queue.Ref) error                  { return nil }
func (nopLedger) DropClaim(context.Context, queue.Ref, string) error           { return nil }
func (nopLedger) Extend(context.Context, []queue.Ref, int64) error             { return nil }
func (nopLedger) MarkRetrying(context.Context, []dataplane.RetryRequest) error { return nil }
func (nopLedger) Bury(context.Context, []queue.DeadJob) error                  { return nil }
func (nopLedger) Lookup(context.Context, string, string) (*dataplane.RestoreRow, error) {
	return nil, nil
}

// checkStarts fails unless the components a config configures accept it,
// mapped the way app/backend and app/cli map it: Load's promise is that a
// config it accepts does not fail later, at start, on a value it let
// through.
func checkStarts(t *testing.T, c config.Config, db *gorm.DB) {
	t.Helper()
	q, err := dataplane.New(nil, queue.Config{
		Namespace:          c.Redis.Namespace,
		MaxPayloadBytes:    c.Queue.MaxPayloadBytes,
		MaxDelay:           c.Queue.MaxDelay,
		DefaultMaxAttempts: c.Queue.DefaultMaxAttempts,
		Coalesce:           c.Queue.Coalesce,
		CoalesceInFlight:   c.Queue.CoalesceInFlight,
	})
	if err != nil {
		t.Fatalf("Load accepted a config the queue refuses: %v", err)
	}
	if _, err := ledger.New(db, ledger.Options{TablePrefix: c.SQL.TablePrefix}); err != nil {
		t.Fatalf("Load accepted a config the ledger refuses: %v", err)
	}
	wc := c.Worker
	w, err := dataplane.NewWorker(q, nopLedger{}, queue.WorkerConfig{ID: wc.ID, ShutdownTimeout: wc.ShutdownTimeout, MaxIdle: wc.MaxIdle,
		Topic: queue.TopicConfig{
			Concurrency: wc.Concurrency, BatchSize: wc.BatchSize, Lease: wc.Lease, Heartbeat: wc.Heartbeat,
			MaxAttempts: wc.MaxAttempts, Backoff: queue.Backoff{Base: wc.BackoffBase, Cap: wc.BackoffCap},
		},
	})
	if err != nil {
		t.Fatalf("Load accepted a worker config the queue refuses: %v", err)
	}
	h := queue.HandlerFunc(func(context.Context, *queue.Job) error { return nil })
	// A handler for a topic the config does not name runs on the worker
	// defaults alone, as order_close does when worker.topics leaves it out.
	topics := map[string]config.Topic{"fuzz_defaults_only": {}}
	for name, tp := range wc.Topics {
		topics[name] = tp
	}
	for name, tp := range topics {
		tc := queue.TopicConfig{
			Concurrency: tp.Concurrency, BatchSize: tp.BatchSize, Lease: tp.Lease, Timeout: tp.Timeout,
			MaxAttempts: tp.MaxAttempts, Backoff: queue.Backoff{Base: tp.BackoffBase, Cap: tp.BackoffCap},
		}
		if err := w.Handle(name, h, tc); err != nil {
			t.Fatalf("Load accepted worker.topics.%s, which the worker refuses: %v", name, err)
		}
	}
}

// TestWorkerConcurrencyIsBounded: the worker makes a channel of
// worker.concurrency (or a topic's) slots per topic and starts that many
// goroutines: 2^62 made registering a handler panic ("makechan: size out of
// range"), a billion made `delayq` try to allocate 8 GB at start. Load
// refuses it, naming the key (found by FuzzLoadFile).
func TestWorkerConcurrencyIsBounded(t *testing.T) {
	for _, body := range []string{
		"worker:\n  concurrency: 4611686018427387904\n",
		"worker:\n  topics:\n    t: {concurrency: 1000000000}\n",
	} {
		_, err := config.Load(writeFile(t, body), nil)
		var ce *config.Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "concurrency") {
			t.Errorf("%q: err = %v, want a config.Error naming the concurrency", body, err)
		}
	}
}

// TestTopicLeaseAboveWorkerHeartbeat is a case FuzzLoadFile found: this
// config loaded, and then `delayq` refused to start once a handler for t
// was registered ("heartbeat 5s: must be positive and shorter than the
// lease 1s"). Load refuses it, naming worker.topics.t.lease.
func TestTopicLeaseAboveWorkerHeartbeat(t *testing.T) {
	_, err := config.Load(writeFile(t, "worker:\n  heartbeat: 5s\n  topics:\n    t: {lease: 1s}\n"), nil)
	var ce *config.Error
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "worker.topics.t.lease") {
		t.Fatalf("err = %v, want a config.Error naming worker.topics.t.lease", err)
	}
}

// fuzzLoader is what both config targets share: the known keys and a
// SQLite handle for the ledger check, built once per fuzzing process.
type fuzzLoader struct {
	keys map[string]bool
	maps []string
	db   *gorm.DB
}

func newFuzzLoader(f *testing.F) *fuzzLoader {
	keys, maps := configKeys()
	return &fuzzLoader{keys: keys, maps: maps, db: testenv.SQLite(f)}
}

// load runs the real loader and checks whichever way it went.
func (l *fuzzLoader) load(t *testing.T, path string) {
	t.Helper()
	c, err := config.Load(path, nil)
	if err != nil {
		checkLoadError(t, err, l.keys, l.maps)
		return
	}
	checkStarts(t, c, l.db)
}

// yamlSeeds are f.Add seeds of FuzzLoadFile; testdata/fuzz holds more.
var yamlSeeds = []string{
	"",
	"redis:\n  mode: single\n  addrs: [127.0.0.1:6379]\nsql:\n  driver: mysql\n  dsn: u:p@tcp(db:3306)/delayq\n",
	"worker:\n  concurrency: 7\n  lease: 2m\n  topics:\n    order_close: {concurrency: 50, lease: 1m, max_attempts: 5}\n",
	"worker:\n  heartbeat: 5s\n  topics:\n    t: {lease: 1s}\n",
	"queue:\n  max_payload_bytes: 1\n  max_delay: 1ns\n  default_max_attempts: 100\nhttp:\n  max_body_bytes: 1\n",
	"http:\n  listen: 0.0.0.0:8080\n",
	"dashboard:\n  sample_every: 100ms\n  history: 16m40s\n",
	"recovery:\n  spec: '*/5 * * * * *'\n  grace: 11s\n",
	"redis:\n  adrs: [a:1]\n",
	"worker: [1, 2]\n",
	"worker:\n  topics:\n    'a.b': {concurrency: 1}\n",
	"a: &a [*a, *a]\n",
	"sql:\n  table_prefix: \"x\\u00e9\"\n",
	"log:\n  level: \"\\0\"\n",
}

// FuzzLoadFile loads arbitrary bytes as the YAML file. Properties: no
// panic; a refusal is a *config.Error naming a real key (invalid value) or
// a wrapped load error (syntax, unknown key, wrong type); an accepted config
// is accepted by the queue, the ledger and the worker it configures.
func FuzzLoadFile(f *testing.F) {
	for _, s := range yamlSeeds {
		f.Add([]byte(s))
	}
	l := newFuzzLoader(f)
	// One file, rewritten per input: the fuzzer runs a process's inputs one
	// at a time, and a directory per input would cost more than the load.
	path := filepath.Join(f.TempDir(), "delayq.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		l.load(t, path)
	})
}

// setenv sets DELAYQ_<name> to value for this input, unless the pair
// cannot be an environment variable at all (it then returns false).
func setenv(t *testing.T, name, value string) bool {
	if name == "" || strings.ContainsAny(name, "=\x00") || strings.ContainsRune(value, 0) {
		return false
	}
	t.Setenv(config.EnvPrefix+name, value)
	return true
}

// FuzzLoadEnv loads the defaults with two arbitrary DELAYQ_* variables
// (two, so that keys that depend on each other, such as the Redis mode
// and its addresses, can meet). Properties as FuzzLoadFile's.
func FuzzLoadEnv(f *testing.F) {
	f.Add("REDIS_MODE", "cluster", "REDIS_ADDRS", "a:1,b:2")
	f.Add("REDIS_ADDRS", "", "REDIS_MODE", "single")
	f.Add("REDIS_ADDRS", ",,", "REDIS_MODE", "sentinel")
	f.Add("WORKER_CONCURRENCY", "many", "WORKER_LEASE", "10ms")
	f.Add("WORKER_HEARTBEAT", "5s", "WORKER_TOPICS", "t")
	f.Add("QUEUE_MAX_DELAY", "-1h", "QUEUE_MAX_PAYLOAD_BYTES", "9223372036854775808")
	f.Add("HTTP_LISTEN", "[::1]:80", "HTTP_ENABLED", "maybe")
	f.Add("REDIS_ADRS", "a:1", "TEST_REDIS_ADDR", "x")
	f.Add("SQL_TABLE_PREFIX", "dq_;DROP", "SQL_DRIVER", "mysql")
	f.Add("log_level", "debug", "LOG_FORMAT", "j\u00e9son")
	l := newFuzzLoader(f)
	f.Fuzz(func(t *testing.T, name1, value1, name2, value2 string) {
		if !setenv(t, name1, value1) || !setenv(t, name2, value2) {
			return
		}
		l.load(t, "")
	})
}

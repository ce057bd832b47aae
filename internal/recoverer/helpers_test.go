package recoverer_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// renv is a recovery test's world: its own Redis namespace, its own MariaDB
// database with a migrated ledger, and a logger whose entries the test can
// read.
type renv struct {
	c    *dataplane.Client
	rdb  redis.UniversalClient
	ns   string
	led  *ledger.Ledger
	log  *logrus.Logger
	hook *logtest.Hook
}

func newREnv(t testing.TB) renv {
	t.Helper()
	rdb, ns := testenv.Redis(t)
	c, err := dataplane.New(rdb, queue.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	led, err := ledger.New(testenv.MySQL(t), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := led.Migrate(testenv.Context(t)); err != nil {
		t.Fatal(err)
	}
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	if os.Getenv("DELAYQ_TEST_LOG") != "" {
		log.SetOutput(os.Stderr)
	}
	return renv{c: c, rdb: rdb, ns: ns, led: led, log: log, hook: hook}
}

// recoverer returns a recoverer over the test's world; cfg's zero fields
// take test-friendly values.
func (e renv) recoverer(t testing.TB, cfg recoverer.Config) *recoverer.Recoverer {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = e.log
	}
	if cfg.Grace == 0 {
		cfg.Grace = 2 * time.Second
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = time.Second
	}
	r, err := recoverer.New(e.c, ledgerops.Of(e.led), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// redisNow returns Redis's clock in Unix ms.
// wipeNamespace deletes every key of the test's namespace, as a Redis that
// lost its data would have none of them.
func (e renv) wipeNamespace(t testing.TB) {
	t.Helper()
	ctx := testenv.Context(t)
	keys, err := e.rdb.Keys(ctx, e.ns+":*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys of %s: %d, %v", e.ns, len(keys), err)
	}
	if err := e.rdb.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
}

func (e renv) redisNow(t testing.TB) int64 {
	t.Helper()
	tm, err := e.rdb.Time(testenv.Context(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixMilli()
}

// row describes a ledger row a test writes directly.
type row struct {
	topic, id  string
	attempt    int
	runAt      int64
	leaseUntil int64
	retrying   bool
	lastError  string
}

// record writes rows to the ledger as a worker would (Record, then
// MarkRetrying for the retrying ones), in batches.
func (e renv) record(t testing.TB, rows []row) {
	t.Helper()
	ctx := testenv.Context(t)
	for lo := 0; lo < len(rows); lo += 4000 {
		batch := rows[lo:min(lo+4000, len(rows))]
		jobs := make([]*queue.Job, len(batch))
		var marks []dataplane.RetryRequest
		for i, r := range batch {
			jobs[i] = &queue.Job{Topic: r.topic, ID: r.id, Payload: []byte(fmt.Sprintf(`{"id":%q}`, r.id)),
				Attempt: r.attempt, MaxAttempts: 5, RunAt: r.runAt, LeaseUntil: r.leaseUntil}
			if r.retrying {
				marks = append(marks, dataplane.RetryRequest{Ref: jobs[i].Ref(), RunAt: r.runAt, LeaseUntil: r.leaseUntil, Error: r.lastError})
			}
		}
		if err := ledgerops.Of(e.led).Record(ctx, jobs, "test-worker:1"); err != nil {
			t.Fatal(err)
		}
		if err := ledgerops.Of(e.led).MarkRetrying(ctx, marks); err != nil {
			t.Fatal(err)
		}
	}
}

// claimAndRecord enqueues ids to topic, claims them and records them with a
// lease_until already stale: jobs Redis still tracks (leased) whose rows
// look abandoned.
func (e renv) claimAndRecord(t testing.TB, topic string, ids []string, leaseUntil int64) {
	t.Helper()
	ctx := testenv.Context(t)
	jobs := make([]queue.NewJob, len(ids))
	for i, id := range ids {
		jobs[i] = queue.NewJob{ID: id}
	}
	if _, err := e.c.EnqueueBatch(ctx, topic, jobs); err != nil {
		t.Fatal(err)
	}
	cl, err := e.c.Claim(ctx, topic, len(ids), time.Hour)
	if err != nil || len(cl.Jobs) != len(ids) {
		t.Fatalf("claim: %d jobs, %v", len(cl.Jobs), err)
	}
	for _, j := range cl.Jobs {
		j.LeaseUntil = leaseUntil
	}
	if err := ledgerops.Of(e.led).Record(ctx, cl.Jobs, "test-worker:1"); err != nil {
		t.Fatal(err)
	}
}

// ensureEpoch writes topics' epoch markers, as an earlier run would have.
func (e renv) ensureEpoch(t testing.TB, topics ...string) {
	t.Helper()
	if _, err := e.c.EnsureEpoch(testenv.Context(t), topics, "test"); err != nil {
		t.Fatal(err)
	}
}

// state returns a job's state in Redis.
func (e renv) state(t testing.TB, topic, id string) *queue.JobInfo {
	t.Helper()
	info, err := e.c.Get(testenv.Context(t), topic, id)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// dropTopic deletes a topic's keys: Redis lost its data (the shared test
// Redis is never flushed).
func (e renv) dropTopic(t testing.TB, topic string) {
	t.Helper()
	p := e.ns + ":{" + topic + "}:"
	if err := e.rdb.Del(testenv.Context(t), p+"due", p+"job", p+"lease", p+"dead", p+"epoch").Err(); err != nil {
		t.Fatal(err)
	}
}

// logged returns the entries logged at level whose message contains msg.
func (e renv) logged(level logrus.Level, msg string) []*logrus.Entry {
	var out []*logrus.Entry
	for _, en := range e.hook.AllEntries() {
		if en.Level == level && strings.Contains(en.Message, msg) {
			out = append(out, en)
		}
	}
	return out
}

package httpapi

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/coalesce"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// failure is one way a backend fails to answer, as its client reports it.
type failure struct {
	name string
	err  error
}

// netFailures are the errors the net package returns for a dial refused, a
// dial and a read that time out, a connection reset, and a read on a
// connection closed under it: made for real, not written by hand.
func netFailures(t *testing.T) (refused, dialTimeout, readTimeout, reset, closed error) {
	t.Helper()
	_, refused = net.Dial("tcp", testenv.RefusedAddr(t))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, dialTimeout = (&net.Dialer{Timeout: time.Nanosecond}).Dial("tcp", ln.Addr().String())
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	_, readTimeout = c.Read(make([]byte, 1))
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := s.(*net.TCPConn).SetLinger(0); err != nil { // close with a RST
		t.Fatal(err)
	}
	s.Close()
	_, reset = c.Read(make([]byte, 1))
	c.Close()
	_, closed = c.Read(make([]byte, 1))
	for what, err := range map[string]error{"refused": refused, "dial timeout": dialTimeout,
		"read timeout": readTimeout, "reset": reset, "closed": closed} {
		if err == nil {
			t.Fatalf("no %s error", what)
		}
	}
	if !errors.Is(reset, syscall.ECONNRESET) {
		t.Fatalf("read after a RST: %v, want connection reset", reset)
	}
	return refused, dialTimeout, readTimeout, reset, closed
}

// notRedisError is what go-redis returns when another server answers on
// Redis's address: here an HTTP server, which answers HELLO with a 400.
func notRedisError(t *testing.T) error {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Listener.Addr().String(), MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	err := rdb.Ping(testenv.Context(t)).Err()
	if err == nil {
		t.Fatal("PING to an HTTP server succeeded")
	}
	return err
}

// expiredContextError is an operation's deadline, passed.
func expiredContextError() error {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	return ctx.Err()
}

// redisFailures are the errors go-redis returns when Redis is down, cannot
// be reached, or is not what answers on its address; with, for each failure
// of the net package, the same one whose chain a wrapper cut (%v).
func redisFailures(t *testing.T) []failure {
	refused, dialTimeout, readTimeout, reset, closed := netFailures(t)
	fs := []failure{
		{"connection refused", refused},
		{"dial timeout", dialTimeout},
		{"read timeout", readTimeout},
		{"connection reset", reset},
		{"use of closed network connection", closed},
		{"EOF", io.EOF},
		{"unexpected EOF", io.ErrUnexpectedEOF},
		{"pool timeout", redis.ErrPoolTimeout},
		{"pool exhausted", redis.ErrPoolExhausted},
		{"client closed", redis.ErrClosed},
		{"operation deadline", expiredContextError()},
		{"another server on the address", notRedisError(t)},
		{"a peer that sends no CRLF", errors.New(`redis: invalid reply: "SSH-2.0-OpenSSH_9.6\n"`)},
		// go-redis's connection errors it does not export.
		{"connection not available", errors.New("redis: connection not available")},
		{"connection not usable", errors.New("redis: connection is not usable")},
		{"connection desynchronized", errors.New("redis: connection unusable (reply stream desynchronized): panic: x")},
		{"pool without a free turn", errors.New("redis: connection pool has no free turn")},
	}
	for _, f := range fs[:5] {
		fs = append(fs, failure{f.name + ", chain cut", fmt.Errorf("queue: %v", f.err)})
	}
	return fs
}

// downRedis is a go-redis hook that fails every command with err, as the
// client does when Redis fails that way: each failure goes through the
// queue's own calls without a Redis to break. wait, if set, runs first.
type downRedis struct {
	err  error
	wait func(ctx context.Context)
}

func (h downRedis) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h downRedis) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.wait != nil && cmd.Name() != "zrange" { // not an enqueue's read of its topic's layout
			h.wait(ctx)
		}
		cmd.SetErr(h.err)
		return h.err
	}
}

func (h downRedis) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			cmd.SetErr(h.err)
		}
		return h.err
	}
}

// expect503 fails unless err, tagged as the handler of the call tags it
// (fromRedis, fromSQL), is answered 503 backend_unavailable naming backend.
func expect503(t *testing.T, what string, tag func(error) error, err error, backend string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	e := classify(tag(err))
	if e.Status != http.StatusServiceUnavailable || e.Code != CodeBackendUnavailable || !strings.HasPrefix(e.Message, backend+" ") {
		t.Fatalf("%s: %d %s %q, want 503 %s naming %s; error: %v", what, e.Status, e.Code, e.Message, CodeBackendUnavailable, backend, err)
	}
}

// Whatever go-redis returns when Redis is down, the queue's calls the API
// makes fail with an error the API answers 503 naming redis, never 500:
// a client retries a 503. Lone calls, a batch, and a coalesced enqueue
// (the caller that waited behind another's call gets its call's error).
func TestRedisFailuresAre503(t *testing.T) {
	t.Parallel()
	for _, f := range redisFailures(t) {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			ctx := testenv.Context(t)
			l, err := ledger.New(testenv.SQLite(t), ledger.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			var first atomic.Bool
			entered, release := make(chan struct{}), make(chan struct{})
			rdb := redis.NewClient(&redis.Options{Addr: testenv.RefusedAddr(t), MaxRetries: -1, DialerRetries: 1})
			t.Cleanup(func() { _ = rdb.Close() })
			rdb.AddHook(downRedis{err: f.err, wait: func(ctx context.Context) {
				if first.CompareAndSwap(false, true) {
					close(entered)
					select {
					case <-release:
					case <-ctx.Done():
					}
				}
			}})
			// One call in flight: the second enqueue waits for it.
			q, err := dataplane.New(rdb, queue.Config{CoalesceInFlight: 1})
			if err != nil {
				t.Fatal(err)
			}

			// Coalesced: b waits behind a's call, then goes out in the
			// next one; each fails with its own call's error.
			errs := make(chan error, 2)
			enqueue := func(id string) {
				_, err := q.Enqueue(ctx, "t", queue.NewJob{ID: id})
				errs <- err
			}
			go enqueue("a")
			<-entered
			go enqueue("b")
			testenv.WaitFor(ctx, t, "b to wait behind a's call", func() bool { return q.EnqueueWaiting("t") == 1 })
			close(release)
			expect503(t, "coalesced enqueue", fromRedis, <-errs, "redis")
			expect503(t, "coalesced enqueue", fromRedis, <-errs, "redis")

			_, err = q.Enqueue(ctx, "t", queue.NewJob{ID: "c"})
			expect503(t, "enqueue", fromRedis, err, "redis")
			_, err = q.EnqueueBatch(ctx, "t", []queue.NewJob{{ID: "d"}, {ID: "e"}})
			expect503(t, "batch", fromRedis, err, "redis")
			_, err = q.Find(ctx, ledgerops.Of(l), "t", "a")
			expect503(t, "find", fromRedis, err, "redis")
			_, err = q.Cancel(ctx, ledgerops.Of(l), "t", "a")
			expect503(t, "cancel", fromRedis, err, "redis")
			_, err = q.Reschedule(ctx, ledgerops.Of(l), "t", "a", queue.RescheduleIn(time.Minute))
			expect503(t, "reschedule", fromRedis, err, "redis")
			_, err = q.Stats(ctx, "t")
			expect503(t, "stats", fromRedis, err, "redis")
			_, err = q.Topics(ctx)
			expect503(t, "topics", fromRedis, err, "redis")
		})
	}
}

// sqlFailures are the errors database/sql and the MySQL driver return when
// the SQL server is down or cannot be reached.
func sqlFailures(t *testing.T) []failure {
	refused, _, readTimeout, reset, closed := netFailures(t)
	return []failure{
		{"connection refused", refused},
		{"read timeout", readTimeout},
		{"connection reset", reset},
		{"use of closed network connection", closed},
		{"bad connection", driver.ErrBadConn},
		{"invalid connection", mysql.ErrInvalidConn},
		{"connection done", sql.ErrConnDone},
		{"too many connections", &mysql.MySQLError{Number: 1040, Message: "Too many connections"}},
		{"server gone away", &mysql.MySQLError{Number: 2006, Message: "MySQL server has gone away"}},
		{"lost connection", &mysql.MySQLError{Number: 2013, Message: "Lost connection to MySQL server during query"}},
		{"operation deadline", expiredContextError()},
		{"unexpected EOF", io.ErrUnexpectedEOF},
		{"connection refused, chain cut", fmt.Errorf("ledger: %v", refused)},
		{"bad connection, chain cut", fmt.Errorf("ledger: %v", driver.ErrBadConn)},
	}
}

// failSQL makes every statement of db fail with err before it is sent, as
// database/sql does when the server is down.
func failSQL(t *testing.T, db *gorm.DB, err error) {
	t.Helper()
	fail := func(tx *gorm.DB) { _ = tx.AddError(err) }
	cb := db.Callback()
	for name, register := range map[string]func(string, func(*gorm.DB)) error{
		"create": cb.Create().Before("*").Register, "query": cb.Query().Before("*").Register,
		"update": cb.Update().Before("*").Register, "delete": cb.Delete().Before("*").Register,
		"row": cb.Row().Before("*").Register, "raw": cb.Raw().Before("*").Register,
	} {
		if err := register("test:sql_down", fail); err != nil {
			t.Fatalf("gorm %s callback: %v", name, err)
		}
	}
}

// Whatever database/sql returns when SQL is down, the ledger's calls (the
// API's own, and those the queue makes for it: a durable enqueue, a cancel,
// a lookup) fail with an error the API answers 503 naming sql.
func TestSQLFailuresAre503(t *testing.T) {
	t.Parallel()
	for _, f := range sqlFailures(t) {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			ctx := testenv.Context(t)
			db := testenv.SQLite(t)
			l, err := ledger.New(db, ledger.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			rdb, ns := testenv.MiniRedis(t)
			q, err := dataplane.New(rdb, queue.Config{Namespace: ns, Store: l,
				TopicDurability: map[string]queue.Durability{"dur": queue.DurabilityDurable}})
			if err != nil {
				t.Fatal(err)
			}
			failSQL(t, db, f.err)

			_, err = q.Enqueue(ctx, "dur", queue.NewJob{ID: "a"})
			expect503(t, "durable enqueue", fromRedis, err, "sql")
			_, err = q.EnqueueBatch(ctx, "dur", []queue.NewJob{{ID: "b"}, {ID: "c"}})
			expect503(t, "durable batch", fromRedis, err, "sql")
			_, err = q.Cancel(ctx, ledgerops.Of(l), "t", "unknown")
			expect503(t, "cancel of a job Redis does not know", fromRedis, err, "sql")
			_, err = q.Find(ctx, ledgerops.Of(l), "dur", "unknown")
			expect503(t, "find of a job Redis does not know", fromRedis, err, "sql")
			_, err = l.Row(ctx, "t", "a")
			expect503(t, "ledger row", fromSQL, err, "sql")
			_, err = l.InFlight(ctx, "", 10)
			expect503(t, "ledger in flight", fromSQL, err, "sql")
		})
	}
}

// What is not a backend failing stays a 500: a bug is ours to fix, and a
// client retrying it would only repeat it.
func TestBugsAre500(t *testing.T) {
	for _, f := range []failure{
		{"a reply of another type than the command expects", fmt.Errorf("queue: enqueue to t: %w", errors.New(`redis: can't parse int reply: "*2"`))},
		{"a script error", fmt.Errorf("queue: claim from t: %w", errors.New("ERR user_script:12: Script attempted to access nonexistent global variable 'x'"))},
		{"a reply of the wrong length", errors.New("queue: enqueue to t: reply of 2 values for 1 jobs")},
		{"a malformed envelope", fmt.Errorf("queue: get t/a: %w: version 9", queue.ErrBadEnvelope)},
		{"a panic in a coalesced call", fmt.Errorf("%w: boom", coalesce.ErrPanic)},
		{"a coalesced call's short result", fmt.Errorf("%w: 1 results for 2 items", coalesce.ErrShortResult)},
	} {
		if e := classify(fromRedis(f.err)); e.Status != http.StatusInternalServerError || e.Code != CodeInternal {
			t.Errorf("%s: %d %s, want 500 %s", f.name, e.Status, e.Code, CodeInternal)
		}
	}
	if e := classify(fromSQL(&mysql.MySQLError{Number: 1146, Message: "Table 'test.jobs' doesn't exist"})); e.Status != http.StatusInternalServerError {
		t.Errorf("a missing table: %d %s, want 500", e.Status, e.Code)
	}
}

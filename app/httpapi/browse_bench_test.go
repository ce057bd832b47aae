package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// browseJobs is the size of the job browser's benchmarks: the issue's
// target is a page and an id search under 100 ms with a million waiting
// jobs in one topic.
const browseJobs = 1_000_000

// serve runs one GET through the whole handler and fails on another
// status than want.
func serve(b *testing.B, h http.Handler, path string, want int) {
	r, err := http.NewRequest(http.MethodGet, path, nil)
	if err != nil {
		b.Fatal(err)
	}
	w := &discardWriter{h: http.Header{}}
	h.ServeHTTP(w, r)
	if w.status != want {
		b.Fatalf("GET %s: status %d, want %d", path, w.status, want)
	}
}

// BenchmarkJobBrowser measures the job browser's reads through the whole
// handler on the shared Redis and MariaDB, with 1,000,000 waiting jobs in
// one topic (loaded with the batch enqueue before the timer; it takes a
// while, which is why this runs only with -bench): a page of 100 at the
// first, middle and last offset, and the search by exact id (Redis and the
// ledger row). GET /healthz and a Redis PING through the same process are
// the same-minute baselines. Run:
//
//	go test -run '^$' -bench BenchmarkJobBrowser -benchtime 200x ./app/httpapi/
func BenchmarkJobBrowser(b *testing.B) {
	rdb, ns := testenv.Redis(b)
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns})
	if err != nil {
		b.Fatal(err)
	}
	l, err := ledger.New(testenv.MySQL(b), ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := l.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Deps{Queue: q, Ledger: l, Logger: testenv.QuietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	loadWaiting(b, q, "bench", browseJobs)
	b.Logf("loaded %d waiting jobs in %v", browseJobs, time.Since(start).Round(time.Millisecond))
	if st, err := q.Stats(ctx, "bench"); err != nil || st.Due != browseJobs {
		b.Fatalf("stats after the load: %+v %v", st, err)
	}

	b.Run("baseline_healthz", func(b *testing.B) {
		for b.Loop() {
			serve(b, h, "/healthz", http.StatusOK)
		}
	})
	b.Run("baseline_redis_ping", func(b *testing.B) {
		for b.Loop() {
			if err := rdb.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, at := range []struct {
		name   string
		offset int
	}{{"first", 0}, {"middle", browseJobs / 2}, {"last", browseJobs - 100}} {
		b.Run("page_"+at.name, func(b *testing.B) {
			path := fmt.Sprintf("/v1/topics/bench/jobs?state=waiting&offset=%d&limit=100", at.offset)
			for b.Loop() {
				serve(b, h, path, http.StatusOK)
			}
		})
	}
	b.Run("exact_id", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			serve(b, h, fmt.Sprintf("/v1/topics/bench/jobs/order_close:%08d", (i*7919)%browseJobs), http.StatusOK)
		}
	})
}

// loadWaiting enqueues n jobs to topic in batches of the queue's largest,
// a few batches at a time, ids order_close:00000000 on, due an hour from
// now and later, one millisecond apart.
func loadWaiting(b *testing.B, q *dataplane.Client, topic string, n int) {
	b.Helper()
	const batch = 1000 // queue.Config.MaxBatch's default
	runAt := time.Now().Add(time.Hour).UnixMilli()
	ctx := context.Background()
	next := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			jobs := make([]queue.NewJob, 0, batch)
			for lo := range next {
				jobs = jobs[:0]
				for i := lo; i < min(lo+batch, n); i++ {
					jobs = append(jobs, queue.NewJob{ID: fmt.Sprintf("order_close:%08d", i), RunAt: runAt + int64(i),
						Payload: []byte(`{"order_no":"` + fmt.Sprint(i) + `"}`)})
				}
				if _, err := q.EnqueueBatch(ctx, topic, jobs); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for lo := 0; lo < n; lo += batch {
		select {
		case next <- lo:
		case err := <-errs:
			close(next)
			wg.Wait()
			b.Fatal(err)
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

// BenchmarkJobBrowserSQLPrefix measures the id prefix search of a durable
// topic and its scheduled_sql listing through the handler, on 1,000,000
// ledger rows in MariaDB (written in one INSERT ... SELECT from MariaDB's
// sequence engine; skipped on a server without it). Run:
//
//	go test -run '^$' -bench BenchmarkJobBrowserSQLPrefix -benchtime 200x ./app/httpapi/
func BenchmarkJobBrowserSQLPrefix(b *testing.B) {
	rdb, ns := testenv.Redis(b)
	db := testenv.MySQL(b)
	l, err := ledger.New(db, ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := l.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns, Store: l, Horizon: time.Hour,
		TopicDurability: map[string]queue.Durability{"orders": queue.DurabilityDurable}})
	if err != nil {
		b.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Deps{Queue: q, Ledger: l, Logger: testenv.QuietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	runAt := time.Now().Add(24 * time.Hour).UnixMilli()
	err = db.WithContext(ctx).Exec("INSERT INTO `"+l.LedgerTable()+"` (topic, job_id, payload, attempt, max_attempts, run_at, claimed_at,"+
		" lease_until, worker, state, last_error, updated_at, enqueued_at)"+
		" SELECT 'orders', CONCAT('order_close:', LPAD(seq, 8, '0')), '{}', 0, 25, ? + seq, 0, ?, '', ?, '', 0, 0"+
		fmt.Sprintf(" FROM seq_1_to_%d", browseJobs), runAt, ledger.NeverStale, queue.StateWaiting).Error
	if err != nil {
		if strings.Contains(err.Error(), "seq_1_to") {
			b.Skipf("no sequence engine on this SQL server (MariaDB has one): %v", err)
		}
		b.Fatal(err)
	}
	b.Logf("inserted %d ledger rows in %v", browseJobs, time.Since(start).Round(time.Millisecond))

	b.Run("baseline_healthz", func(b *testing.B) {
		for b.Loop() {
			serve(b, h, "/healthz", http.StatusOK)
		}
	})
	b.Run("baseline_sql_ping", func(b *testing.B) {
		sqlDB, err := db.DB()
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := sqlDB.PingContext(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("prefix_one_order", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			serve(b, h, fmt.Sprintf("/v1/topics/orders/jobs?prefix=order_close:%08d", 1+(i*7919)%browseJobs), http.StatusOK)
		}
	})
	b.Run("prefix_page_of_100", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			serve(b, h, fmt.Sprintf("/v1/topics/orders/jobs?prefix=order_close:00%02d&limit=100", (i*13)%100), http.StatusOK)
		}
	})
	b.Run("exact_id_sql_only", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			serve(b, h, fmt.Sprintf("/v1/topics/orders/jobs/order_close:%08d", 1+(i*7919)%browseJobs), http.StatusOK)
		}
	})
	b.Run("scheduled_sql_page", func(b *testing.B) {
		for b.Loop() {
			serve(b, h, "/v1/topics/orders/jobs?state=scheduled_sql&limit=100", http.StatusOK)
		}
	})
}

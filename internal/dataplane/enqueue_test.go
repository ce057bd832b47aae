package dataplane_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
)

func TestEnqueueWritesEnvelopeAndDueEntry(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		payload := []byte(`{"order_no":"123"}`)
		r := mustEnqueue(t, e, "orders", dataplane.NewJob{ID: "order_close:123", Payload: payload, Delay: time.Hour, MaxAttempts: 5})
		info := mustGet(t, e, "orders", "order_close:123")
		if info.State != dataplane.StateWaiting || info.Score != r.RunAt {
			t.Fatalf("state %s score %d, want scheduled at %d", info.State, info.Score, r.RunAt)
		}
		j := info.Job
		if j.Attempt != 0 || j.MaxAttempts != 5 || !bytes.Equal(j.Payload, payload) {
			t.Fatalf("envelope %+v", j)
		}
		if d := j.RunAt - j.EnqueuedAt; d != time.Hour.Milliseconds() {
			t.Fatalf("run at - enqueued at = %d ms, want exactly one hour from Redis's clock", d)
		}
		// Readable in redis-cli: the raw hash value shows the JSON as is.
		raw, err := e.rdb.HGet(testenv.Context(t), e.ns+":{orders}:job", "order_close:123").Result()
		if err != nil || !strings.HasSuffix(raw, string(payload)) {
			t.Fatalf("raw envelope %q (%v) does not end with the JSON payload", raw, err)
		}
		topics, err := e.c.Topics(testenv.Context(t))
		if err != nil || len(topics) != 1 || topics[0] != "orders" {
			t.Fatalf("topics = %v, %v", topics, err)
		}
	})
}

func TestEnqueueDefaultsAndPastRunAt(t *testing.T) {
	forEachBackend(t, dataplane.Config{DefaultMaxAttempts: 7}, func(t *testing.T, e env) {
		r := mustEnqueue(t, e, "t", dataplane.NewJob{ID: "past", RunAt: time.Date(2010, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()})
		info := mustGet(t, e, "t", "past")
		if info.Job.MaxAttempts != 7 {
			t.Fatalf("max attempts %d, want the configured default 7", info.Job.MaxAttempts)
		}
		if r.RunAt != info.Job.EnqueuedAt {
			t.Fatalf("a due time in the past must mean due now: run at %d, enqueued %d", r.RunAt, info.Job.EnqueuedAt)
		}
		c := mustClaim(t, e, "t", 10, time.Minute)
		if len(c.Jobs) != 1 {
			t.Fatalf("claimed %v, want the past-due job", ids(c.Jobs))
		}
	})
}

func TestEnqueueBinaryPayloadRoundTrips(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		payload := make([]byte, 256*3)
		for i := range payload {
			payload[i] = byte(i)
		}
		payload = append(payload, "|1|2|3|\r\n"...)
		mustEnqueue(t, e, "bin", dataplane.NewJob{ID: "b", Payload: payload})
		c := mustClaim(t, e, "bin", 1, time.Minute)
		if len(c.Jobs) != 1 || !bytes.Equal(c.Jobs[0].Payload, payload) {
			t.Fatalf("payload did not round-trip")
		}
		// Also through a retry and a bury, which rewrite the envelope.
		if _, err := e.c.Retry(testenv.Context(t), []dataplane.RetryRequest{{Ref: c.Jobs[0].Ref(), Error: "x|y"}}); err != nil {
			t.Fatal(err)
		}
		c = mustClaim(t, e, "bin", 1, time.Minute)
		if n, _, err := e.c.Bury(testenv.Context(t), []dataplane.DeadJob{{Job: c.Jobs[0], Error: "gone\x00"}}); err != nil || n != 1 {
			t.Fatalf("bury = %d, %v", n, err)
		}
		info := mustGet(t, e, "bin", "b")
		if !bytes.Equal(info.Job.Payload, payload) || info.Job.LastError != "gone\x00" {
			t.Fatalf("after retry and bury: error %q, payload equal %v", info.Job.LastError, bytes.Equal(info.Job.Payload, payload))
		}
	})
}

func TestEnqueueDuplicateInEveryState(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		first := mustEnqueue(t, e, "t", dataplane.NewJob{ID: "due", Payload: []byte("one"), Delay: time.Hour})
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "leased", Payload: []byte("one")})
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "dead", Payload: []byte("one")})
		c := mustClaim(t, e, "t", 10, time.Minute)
		if len(c.Jobs) != 2 {
			t.Fatalf("claimed %v", ids(c.Jobs))
		}
		for _, j := range c.Jobs {
			if j.ID == "dead" {
				if _, _, err := e.c.Bury(ctx, []dataplane.DeadJob{{Job: j, Error: "r"}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, id := range []string{"due", "leased", "dead"} {
			r, err := e.c.Enqueue(ctx, "t", dataplane.NewJob{ID: id, Payload: []byte("two")})
			if err != nil || !r.Duplicate {
				t.Fatalf("second enqueue of %s = %+v, %v; want duplicate", id, r, err)
			}
			if id == "due" && r.RunAt != first.RunAt {
				t.Fatalf("duplicate of a waiting job reports run at %d, want %d", r.RunAt, first.RunAt)
			}
			if got := mustGet(t, e, "t", id).Job.Payload; string(got) != "one" {
				t.Fatalf("duplicate overwrote %s: payload %q", id, got)
			}
		}
		st, err := e.c.Stats(ctx, "t")
		if err != nil || st.Due != 1 || st.InFlight != 1 || st.Dead != 1 {
			t.Fatalf("stats %+v, %v: duplicates must write nothing", st, err)
		}
	})
}

func TestEnqueueBatch(t *testing.T) {
	forEachBackend(t, dataplane.Config{MaxBatch: 1000}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "old"})
		jobs := make([]dataplane.NewJob, 0, 1000)
		for i := 0; i < 996; i++ {
			jobs = append(jobs, dataplane.NewJob{ID: fmt.Sprintf("j%d", i), Payload: []byte(fmt.Sprint(i))})
		}
		jobs = append(jobs,
			dataplane.NewJob{ID: "old"},                    // already in Redis
			dataplane.NewJob{ID: "j5"},                     // twice in this batch
			dataplane.NewJob{ID: "bad id"},                 // invalid
			dataplane.NewJob{ID: "x", Delay: -time.Second}, // invalid
		)
		res, err := e.c.EnqueueBatch(ctx, "t", jobs)
		if err != nil {
			t.Fatal(err)
		}
		count := map[dataplane.BatchStatus]int{}
		for i, r := range res {
			count[r.Status]++
			if r.ID != jobs[i].ID {
				t.Fatalf("result %d is for %s, want %s", i, r.ID, jobs[i].ID)
			}
		}
		if count[dataplane.BatchCreated] != 996 || count[dataplane.BatchDuplicate] != 2 || count[dataplane.BatchInvalid] != 2 {
			t.Fatalf("counts %v", count)
		}
		if !errors.Is(res[998].Err, dataplane.ErrInvalidID) || !errors.Is(res[999].Err, dataplane.ErrInvalidRunAt) {
			t.Fatalf("invalid results: %v / %v", res[998].Err, res[999].Err)
		}
		st, _ := e.c.Stats(ctx, "t")
		if st.Due != 997 {
			t.Fatalf("due = %d, want 997", st.Due)
		}
		if got := string(mustGet(t, e, "t", "j5").Job.Payload); got != "5" {
			t.Fatalf("in-batch duplicate overwrote j5: %q", got)
		}
		_, err = e.c.EnqueueBatch(ctx, "t", make([]dataplane.NewJob, 1001))
		if !errors.Is(err, dataplane.ErrBatchTooLarge) {
			t.Fatalf("1,001 jobs: %v, want ErrBatchTooLarge", err)
		}
	})
}

func TestEnqueuePublishesWakeForNewHead(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		sub := e.rdb.Subscribe(ctx, e.c.WakeChannel("t"))
		defer sub.Close()
		if _, err := sub.Receive(ctx); err != nil { // subscription confirmed
			t.Fatal(err)
		}
		ch := sub.Channel()
		r := mustEnqueue(t, e, "t", dataplane.NewJob{ID: "later", Delay: time.Hour})
		expectWake(t, ch, r.RunAt)
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "even-later", Delay: 2 * time.Hour}) // not a new head: no message
		r = mustEnqueue(t, e, "t", dataplane.NewJob{ID: "sooner", Delay: time.Minute})
		expectWake(t, ch, r.RunAt) // the first message after "later" must be this one
	})
}

func expectWake(t *testing.T, ch <-chan *redis.Message, want int64) {
	t.Helper()
	select {
	case m := <-ch:
		if m.Payload != fmt.Sprint(want) {
			t.Fatalf("wake payload %q, want %d", m.Payload, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no wake message for due time %d", want)
	}
}

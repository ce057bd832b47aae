package dataplane

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/internal/testenv"
)

// stallOnce delays the caller once, after Redis ran the first command for
// which stall says yes: a process that stalls after Redis ran its claim and
// before it reads the reply.
type stallOnce struct {
	stall func(cmd redis.Cmder) bool
	d     time.Duration
	done  atomic.Bool
}

func (s *stallOnce) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *stallOnce) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (s *stallOnce) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if s.stall(cmd) && s.done.CompareAndSwap(false, true) {
			time.Sleep(s.d)
		}
		return err
	}
}

// A worker that stalls between Redis running its claim and reading the
// reply, past the lease, must see the lease as run out: the job is not run
// on that claim but on the next one (attempt 2). When the worker's clock
// was taken from the reply's arrival, it ran behind Redis by the stall and
// ran attempt 1 on a lease that had expired.
func TestAStallBeforeTheClaimsReplyDoesNotRunAnExpiredLease(t *testing.T) {
	c, w := idleWorker(t, &memLedger{rows: map[string]int{}})
	ctx := testenv.ContextTimeout(t, 30*time.Second)
	if _, err := c.Enqueue(ctx, "t", NewJob{ID: "j"}); err != nil {
		t.Fatal(err)
	}
	claimSHA := c.scripts.claim.Hash()
	c.rdb.AddHook(&stallOnce{d: 1500 * time.Millisecond, stall: func(cmd redis.Cmder) bool {
		// A claim that handed out a job: its reply's fourth value lists
		// the claimed jobs.
		a := cmd.Args()
		if len(a) < 2 || a[0] != "evalsha" || a[1] != claimSHA || cmd.Err() != nil {
			return false
		}
		reply, _ := cmd.(*redis.Cmd).Val().([]any)
		if len(reply) < 4 {
			return false
		}
		jobs, _ := reply[3].([]any)
		return len(jobs) > 0
	}})
	ran := make(chan int, 4)
	if err := w.Handle("t", HandlerFunc(func(_ context.Context, j *Job) error {
		ran <- j.Attempt
		return nil
	}), TopicConfig{Lease: time.Second, Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	testenv.Start(t, w.Run)
	select {
	case a := <-ran:
		if a != 2 {
			t.Fatalf("the job ran first on attempt %d, on a lease that ran out during the stall; want attempt 2", a)
		}
	case <-ctx.Done():
		t.Fatal("the job never ran")
	}
}

// redisClock.seen keeps a tight offset through a claim whose reply came late,
// and moves to the ahead end of a claim's range when the offset falls out
// of it.
func TestClockSeenKeepsTheTightestOffset(t *testing.T) {
	var clk redisClock
	at := func(us int64) time.Time { return time.UnixMicro(us) }
	const redisNow = 1_000_000_000
	for _, c := range []struct {
		what          string
		sent, replied int64 // local µs
		want          int64
	}{
		{"first claim: the ahead end", 999_000_000, 999_000_100, 1_000_000},
		{"a tight claim inside the range", 999_000_040, 999_000_060, 1_000_000 - 40},
		{"a late reply: kept", 999_000_000, 1_001_500_000, 1_000_000 - 40},
		{"a clock step: the ahead end", 998_000_000, 998_000_100, 2_000_000},
	} {
		clk.seen(redisNow, at(c.sent), at(c.replied))
		if got := clk.offset.Load(); got != c.want {
			t.Errorf("%s: offset %d µs, want %d", c.what, got, c.want)
		}
	}
}

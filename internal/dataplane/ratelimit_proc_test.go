package dataplane_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sirupsen/logrus"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
)

// envRateChild, when set, makes the test binary a rate-limited worker
// process (rateWorkerSpec as JSON) instead of running the tests.
const envRateChild = "DELAYQ_TEST_RATE_WORKER"

// rateChildLease is the lease of the rate-limit children's topic: longer
// than the test, so that no heartbeat renews a lease (a handler reads its
// claim's time as LeaseUntil - lease).
const rateChildLease = 10 * time.Minute

func TestMain(m *testing.M) {
	if spec := os.Getenv(envRateChild); spec != "" {
		if err := rateWorkerMain(spec); err != nil {
			fmt.Fprintln(os.Stderr, "rate worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// rateWorkerSpec configures a worker process of the rate-limit test: it
// handles Topic under the limit, and each handler start pushes the local
// clock (Unix µs; every process runs on this host) to the list Starts.
// The start that makes the list Total long pushes to Done.
type rateWorkerSpec struct {
	RedisAddr, Namespace, DSN, ID string
	Topic, Starts, Done           string
	Total                         int64
	Rate                          float64
	Burst, Concurrency            int
}

func rateWorkerMain(specJSON string) error {
	var s rateWorkerSpec
	if err := json.Unmarshal([]byte(specJSON), &s); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() { // the test closes stdin (or dies): stop
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	rdb := redis.NewClient(&redis.Options{Addr: s.RedisAddr})
	defer rdb.Close()
	q, err := dataplane.New(rdb, dataplane.Config{Namespace: s.Namespace})
	if err != nil {
		return err
	}
	db, err := gorm.Open(mysql.Open(s.DSN), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return err
	}
	led, err := ledger.New(db, ledger.Options{})
	if err != nil {
		return err
	}
	log := logrus.New()
	log.SetOutput(os.Stderr)
	log.SetLevel(logrus.WarnLevel)
	w, err := dataplane.NewWorker(q, ledgerops.Of(led), dataplane.WorkerConfig{ID: s.ID, Logger: log})
	if err != nil {
		return err
	}
	h := dataplane.HandlerFunc(func(ctx context.Context, j *dataplane.Job) error {
		// The claim's time (Redis's clock) is the lease's start: the
		// heartbeat (every lease/3) renews the leases of jobs waiting to
		// start too, which would move it later, so the lease outlasts
		// the test and no heartbeat comes.
		claimed := j.LeaseUntil - rateChildLease.Milliseconds()
		n, err := rdb.RPush(ctx, s.Starts, fmt.Sprintf("%d:%d", time.Now().UnixMicro(), claimed)).Result()
		if err != nil {
			return err
		}
		if n == s.Total {
			return rdb.RPush(ctx, s.Done, "1").Err()
		}
		return nil
	})
	if err := w.Handle(s.Topic, h, dataplane.TopicConfig{Concurrency: s.Concurrency, RateLimit: s.Rate, RateBurst: s.Burst, Lease: rateChildLease}); err != nil {
		return err
	}
	return w.Run(ctx)
}

// startRateWorker starts the test binary as a worker process; it is
// stopped (stdin closed, then killed by pid if it lingers) at cleanup.
func startRateWorker(t *testing.T, s rateWorkerSpec) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), s.ID+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close() // the child holds its own copy
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), envRateChild+"="+string(b))
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a ^C to the test does not reach it
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s (pid %d): %v", s.ID, cmd.Process.Pid, err)
			}
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("%s (pid %d) did not stop: killed", s.ID, cmd.Process.Pid)
		}
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil && len(b) > 0 {
				t.Logf("%s log:\n%s", s.ID, b[max(0, len(b)-4000):])
			}
		}
	})
}

// maxInWindow is the most times in any window [t, t+w) of sorted ts.
func maxInWindow(ts []int64, w int64) int {
	best, lo := 0, 0
	for hi := range ts {
		for ts[hi]-ts[lo] >= w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// Four worker processes share one topic's limit: every 1 s window of
// claims holds at most rate + burst, and the whole backlog takes jobs/rate
// within 5 % (the short variant: never faster, at most twice as long);
// handler starts too, give or take the claim-to-start delay. The long
// variant (make chaos) is issue 17's: 500/s, 20,000 jobs, 40 s.
func TestRateLimitChaosWorkerProcesses(t *testing.T) {
	// The short variant runs beside the rest of make test on a busy host:
	// it asserts the limit exactly but takes only a generous upper bound on
	// the total (workers that fall behind lose the tokens beyond the burst).
	rate, jobs, slowest := 400.0, 1600, 2.0
	if os.Getenv("DELAYQ_CHAOS") == "long" {
		rate, jobs, slowest = 500, 20_000, 1.05
	}
	burst := dataplane.DefaultRateBurst(rate)
	rdb, ns := testenv.Redis(t)
	c, err := dataplane.New(rdb, dataplane.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	dsn := testenv.MySQLDSN(t)
	db, err := gorm.Open(mysql.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
	})
	migratedLedger(t, db)
	enqueueMany(t, c, "rl", "j", jobs, nil)

	spec := rateWorkerSpec{
		RedisAddr: rdb.(*redis.Client).Options().Addr, Namespace: ns, DSN: dsn,
		Topic: "rl", Starts: ns + ":starts", Done: ns + ":done", Total: int64(jobs),
		Rate: rate, Burst: burst, Concurrency: 50,
	}
	for i := 0; i < 4; i++ {
		spec.ID = fmt.Sprintf("rate-worker-%d", i)
		startRateWorker(t, spec)
	}
	expected := time.Duration(float64(jobs) / rate * float64(time.Second))
	ctx := testenv.ContextTimeout(t, 2*expected+60*time.Second)
	if _, err := rdb.BLPop(ctx, 0, spec.Done).Result(); err != nil {
		n, _ := rdb.LLen(context.Background(), spec.Starts).Result()
		t.Fatalf("waiting for %d handler starts (%d so far): %v", jobs, n, err)
	}
	raw, err := rdb.LRange(ctx, spec.Starts, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != jobs {
		t.Fatalf("%d handler starts, want %d (each job once)", len(raw), jobs)
	}
	// starts are handler starts (local clock, µs), claims the claims that
	// handed each job out (Redis's clock, ms: the same host clock).
	starts, claims := make([]int64, len(raw)), make([]int64, len(raw))
	minLag, maxLag := int64(math.MaxInt64), int64(math.MinInt64)
	for i, s := range raw {
		a, b, _ := strings.Cut(s, ":")
		if starts[i], err = strconv.ParseInt(a, 10, 64); err != nil {
			t.Fatal(err)
		}
		if claims[i], err = strconv.ParseInt(b, 10, 64); err != nil {
			t.Fatal(err)
		}
		lag := starts[i]/1000 - claims[i]
		minLag, maxLag = min(minLag, lag), max(maxLag, lag)
	}
	slices.Sort(starts)
	slices.Sort(claims)
	limit := int(rate) + burst
	claimWindow := maxInWindow(claims, 1000)
	claimTotal := time.Duration(claims[len(claims)-1]-claims[0]) * time.Millisecond
	startWindow := maxInWindow(starts, time.Second.Microseconds())
	startTotal := time.Duration(starts[len(starts)-1]-starts[0]) * time.Microsecond
	spread := time.Duration(maxLag-minLag) * time.Millisecond
	t.Logf("rate %v/s, burst %d, %d jobs, 4 processes (jobs/rate %s): busiest 1 s window of claims %d, of handler starts %d; "+
		"first to last claim %s, start %s; claim to start %d-%d ms",
		rate, burst, jobs, expected, claimWindow, startWindow, claimTotal, startTotal, minLag, maxLag)
	// The claim script enforces the limit exactly, on Redis's clock.
	if claimWindow > limit {
		t.Errorf("busiest 1 s window held %d claimed jobs, more than rate + burst = %d", claimWindow, limit)
	}
	// Never faster than the tokens allow (the burst at once, the rest at
	// the rate), within 5 % of jobs/rate; slower only by slowest.
	fastest := time.Duration(float64(jobs-burst-1) / rate * float64(time.Second))
	if claimTotal < fastest || claimTotal < expected*95/100 || claimTotal > time.Duration(float64(expected)*slowest) {
		t.Errorf("first to last claim took %s: want %s at least, within 5%% of %s (at most × %v)", claimTotal, fastest, expected, slowest)
	}
	// A handler starts once its claim is in the ledger, and no earlier than
	// RateStartLag (default 100 ms) after the claim: starts follow the
	// claims shifted by the lag, so a window of starts can hold the claims
	// of a window widened only by the spread beyond it (a ledger write
	// slower than the lag, a loaded host).
	if lagMs := dataplane.DefaultRateStartLag.Milliseconds(); minLag < lagMs-2 {
		t.Errorf("a handler started %d ms after its claim: want at least the start lag, %d ms", minLag, lagMs)
	}
	// The slack below grows with the spread: bounded, or the checks could
	// not fail (a write that took seconds is a stalled host, not a pass).
	if spread > 3*time.Second {
		t.Errorf("claim to start ranged over %s: the start checks below mean nothing beyond 3s", spread)
	}
	if slack := int(math.Ceil(rate * spread.Seconds())); startWindow > limit+slack {
		t.Errorf("busiest 1 s window held %d handler starts, more than rate + burst = %d + %d for the claim-to-start spread of %s",
			startWindow, limit, slack, spread)
	}
	if startTotal < expected*95/100-spread || startTotal > time.Duration(float64(expected)*slowest)+spread {
		t.Errorf("first to last start took %s, not within 5%% of %s (at most × %v; ± the claim-to-start spread %s)", startTotal, expected, slowest, spread)
	}
}

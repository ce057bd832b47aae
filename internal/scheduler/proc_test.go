package scheduler_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
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
	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/internal/scheduler"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/recovery"
)

// envChild makes the test binary a scheduler process (childMain) with the
// JSON childSpec in it.
const envChild = "DELAYQ_PERIODIC_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(envChild); spec != "" {
		os.Exit(childMain(spec))
	}
	os.Exit(m.Run())
}

// childSpec configures a scheduler process: it runs the schedules "r" (a
// Redis topic) and "d" (a durable one), each every second, a worker on both
// topics and the relay, as `delayq serve` would.
type childSpec struct {
	RedisAddr string
	Namespace string
	DSN       string
	ID        string
}

// firstRuns is the HASH (under the test's namespace) that counts, per job
// id, the runs of its first attempt: a tick enqueued twice would run its
// first attempt twice; a retry after a killed worker is a later attempt.
func firstRuns(ns string) string { return ns + ":test:first_runs" }

func childMain(raw string) int {
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	go func() { // the test keeps stdin open: EOF means it is gone, so go too
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(3)
	}()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := logrus.New()
	log.SetLevel(logrus.InfoLevel)
	rdb := redis.NewClient(&redis.Options{Addr: spec.RedisAddr})
	defer rdb.Close()
	db, err := gorm.Open(mysql.Open(spec.DSN), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		log.WithError(err).Error("open SQL")
		return 1
	}
	led, err := ledger.New(db, ledger.Options{})
	if err != nil {
		log.WithError(err).Error("ledger")
		return 1
	}
	q, err := dataplane.New(rdb, queue.Config{Namespace: spec.Namespace, Store: led,
		TopicDurability: map[string]queue.Durability{"dur": queue.DurabilityDurable}})
	if err != nil {
		log.WithError(err).Error("queue")
		return 1
	}
	s, err := scheduler.New(q, ledgerops.Of(led), []scheduler.Schedule{
		{Name: "r", Spec: "* * * * * *", Topic: "t", Missed: scheduler.MissedOnce},
		{Name: "d", Spec: "* * * * * *", Topic: "dur", Missed: scheduler.MissedOnce},
	}, scheduler.Options{Logger: log.WithField("proc", spec.ID)})
	if err != nil {
		log.WithError(err).Error("scheduler")
		return 1
	}
	w, err := dataplane.NewWorker(q, ledgerops.Of(led), queue.WorkerConfig{ID: spec.ID, Logger: log,
		Topic: queue.TopicConfig{Concurrency: 4, Lease: 2 * time.Second}})
	if err != nil {
		log.WithError(err).Error("worker")
		return 1
	}
	h := queue.HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		if j.Attempt == 1 {
			return rdb.HIncrBy(ctx, firstRuns(spec.Namespace), j.Topic+"/"+j.ID, 1).Err()
		}
		return nil
	})
	for _, topic := range []string{"t", "dur"} {
		if err := w.Handle(topic, h, queue.TopicConfig{}); err != nil {
			log.WithError(err).Error("handle")
			return 1
		}
	}
	relay, err := recoverer.NewRelay(q, ledgerops.Of(led), recovery.RelayConfig{Logger: log})
	if err != nil {
		log.WithError(err).Error("relay")
		return 1
	}
	done := make(chan error, 3)
	go func() { done <- s.Run(ctx) }()
	go func() { done <- w.Run(ctx) }()
	go func() { done <- relay.Run(ctx) }()
	fmt.Println("ready")
	var errs []error
	for range 3 {
		errs = append(errs, <-done)
	}
	if err := errors.Join(errs...); err != nil {
		log.WithError(err).Error("run")
		return 1
	}
	return 0
}

// proc is a running child.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  string
	// stdin is held open (kept referenced: a collected pipe closes) until
	// the test process exits: its EOF stops the child.
	stdin io.WriteCloser
}

func startChild(t *testing.T, spec childSpec) *proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(spec)
	p := &proc{done: make(chan struct{}), log: filepath.Join(t.TempDir(), spec.ID+".log")}
	logf, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	p.cmd = exec.Command(exe, "-test.run=^$")
	p.cmd.Env = append(os.Environ(), envChild+"="+string(b))
	p.cmd.Stderr = logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ok := sc.Scan() && sc.Text() == "ready"
		ready <- ok
		for sc.Scan() {
		}
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.signal(t, syscall.SIGKILL)
		if t.Failed() {
			b, _ := os.ReadFile(p.log)
			t.Logf("%s (pid %d) log:\n%s", spec.ID, p.cmd.Process.Pid, tail(string(b), 4000))
		}
	})
	if !testenv.Receive(testenv.ContextTimeout(t, 30*time.Second), t, ready, spec.ID+" ready") {
		t.Fatalf("%s did not say ready", spec.ID)
	}
	return p
}

// signal sends sig to the child (by its pid) and waits until it is reaped.
func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	select {
	case <-p.done:
		return
	default:
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("signal pid %d: %v", p.cmd.Process.Pid, err)
	}
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Errorf("pid %d did not exit within 60s of %s", p.cmd.Process.Pid, sig)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Three processes run the same two schedules (a Redis and a durable topic)
// each second; one is killed with SIGKILL half-way. Every tick of the run
// is enqueued exactly once: its job's first attempt runs once, none is
// missing. The short variant runs 5 s; DELAYQ_CHAOS=long runs 60 s.
func TestThreeProcessesOneJobPerTick(t *testing.T) {
	run := 5 * time.Second
	if os.Getenv("DELAYQ_CHAOS") == "long" {
		run = 60 * time.Second
	}
	rdb, ns := testenv.Redis(t)
	dsn := testenv.MySQLDSN(t)
	db, err := gorm.Open(mysql.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	led, err := ledger.New(db, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	if err := led.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	addr := rdb.(*redis.Client).Options().Addr
	var procs []*proc
	for i := range 3 {
		procs = append(procs, startChild(t, childSpec{RedisAddr: addr, Namespace: ns, DSN: dsn, ID: "p" + strconv.Itoa(i)}))
	}
	// The window: the ticks after all three run, to those before the stop.
	first := time.Now().Truncate(time.Second).Add(time.Second)
	killAt := time.NewTimer(run / 2)
	end := time.NewTimer(run)
	<-killAt.C
	procs[1].signal(t, syscall.SIGKILL)
	<-end.C
	last := time.Now().Truncate(time.Second).Add(-time.Second)
	var want []string
	for tk := first; !tk.After(last); tk = tk.Add(time.Second) {
		want = append(want, "t/"+scheduler.JobID("r", tk), "dur/"+scheduler.JobID("d", tk))
	}
	runs := func() map[string]string {
		m, err := rdb.HGetAll(ctx, firstRuns(ns)).Result()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	testenv.WaitFor(ctx, t, "every tick of the window run", func() bool {
		m := runs()
		for _, id := range want {
			if m[id] == "" {
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprint(runs()) })
	for _, p := range []*proc{procs[0], procs[2]} {
		p.signal(t, syscall.SIGTERM)
	}
	m := runs()
	for id, n := range m {
		if n != "1" {
			t.Errorf("%s: first attempt ran %s times", id, n)
		}
	}
	t.Logf("%d ticks in the window, %d jobs run in all", len(want)/2, len(m))
}

package main_test

import (
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/delayq/delayq/app/cli"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// Three worker processes on two topics (the smoke check's and the orders
// module's order_close) are listed by `delayq workers` with their topics;
// one SIGKILLed shows as gone within two heartbeat intervals (1.5, by
// design), one stopped with SIGTERM leaves the registry at once.
func TestWorkersListsProcessesAndTheKilledOne(t *testing.T) {
	bin := buildBinary(t)
	rdb, ns := testenv.Redis(t)
	dsn := testenv.MySQLDSN(t)
	const every = 300 * time.Millisecond
	env := serveEnv(ns, dsn, testenv.FreePort(t),
		"DELAYQ_ORDERS_ENABLED=true", "DELAYQ_ORDERS_SWEEPER_SPEC=@every 1h",
		"DELAYQ_WORKER_REGISTRY_EVERY="+every.String(), "DELAYQ_RECOVERY_SPEC=@every 1h")
	if out, code := run(t, bin, env, "migrate"); code != 0 {
		t.Fatalf("migrate: exit %d: %s", code, out)
	}
	procs := make([]*proc, 3)
	for i := range procs {
		procs[i] = start(t, bin, append(env, fmt.Sprintf("DELAYQ_WORKER_ID=w%d", i)), "worker")
	}
	list := func() []queue.WorkerInfo {
		t.Helper()
		out, code := run(t, bin, env, "workers", "--json")
		if code != 0 {
			t.Fatalf("workers: exit %d: %s", code, out)
		}
		var l []queue.WorkerInfo
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("workers --json: %v: %s", err, out)
		}
		return l
	}
	ctx := testenv.Context(t)
	var l []queue.WorkerInfo
	testenv.WaitFor(ctx, t, "three live workers", func() bool {
		l = list()
		return len(l) == 3 && l[0].State == queue.WorkerLive && l[1].State == queue.WorkerLive && l[2].State == queue.WorkerLive
	})
	for i, w := range l {
		pid := procs[i].cmd.Process.Pid
		if w.ID != fmt.Sprintf("w%d", i) || w.PID != pid || len(w.Topics) != 2 || w.Topics[0].Topic != cli.SmokeTopic ||
			w.Topics[1].Topic != "order_close" || w.Topics[0].Concurrency < 1 || w.EveryMs != every.Milliseconds() {
			t.Errorf("worker %d: %+v; want w%d, pid %d, on order_close and smoke", i, w, i, pid)
		}
	}

	// SIGKILL: no word to the registry; the entry ages into gone.
	if err := procs[1].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-procs[1].done
	killed, err := rdb.Time(ctx).Result() // on the registry's clock
	if err != nil {
		t.Fatal(err)
	}
	// Two heartbeat intervals after its death, on Redis's clock, the first
	// listing shows it gone, and the others live.
	testenv.WaitFor(ctx, t, "two intervals past the kill", func() bool {
		now, err := rdb.Time(ctx).Result()
		return err == nil && now.Sub(killed) >= 2*every
	})
	l = list()
	if len(l) != 3 || l[1].ID != "w1" || l[1].State != queue.WorkerGone || l[0].State != queue.WorkerLive || l[2].State != queue.WorkerLive {
		t.Fatalf("two intervals after w1's SIGKILL: %+v; want w1 gone, w0 and w2 live", l)
	}

	// SIGTERM: the worker removes its entry as it stops.
	if code := procs[2].stop(t); code != 0 {
		t.Fatalf("w2 exit %d", code)
	}
	l = list()
	if len(l) != 2 || l[0].ID != "w0" || l[1].ID != "w1" {
		t.Errorf("after w2 stopped: %+v", l)
	}
}

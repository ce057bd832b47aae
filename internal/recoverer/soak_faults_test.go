package recoverer_test

import (
	"fmt"
	"math/rand"
	"syscall"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/tcpproxy"
	"github.com/delayq/delayq/internal/testenv"
)

// The soak's fault injector: one fault at a time, at random moments, of
// four kinds. Every fault is logged with the window it covered, which is
// what may explain a job running twice.

type faultKind string

const (
	faultKillWorker   faultKind = "SIGKILL a worker"
	faultRestartRedis faultKind = "restart Redis (SIGKILL, AOF)"
	faultCutMariaDB   faultKind = "cut MariaDB (proxy)"
	faultPauseWorker  faultKind = "SIGSTOP a worker past its lease"
)

var faultKinds = []faultKind{faultKillWorker, faultRestartRedis, faultCutMariaDB, faultPauseWorker}

// faultEvent is one injected fault: its kind, its target and the window
// (Unix ms) during which it was in effect.
type faultEvent struct {
	kind       faultKind
	target     string
	start, end int64
}

// soakCluster is what the injector acts on: the Redis server, the proxy in
// front of MariaDB on the workers' ledger links, and the worker slots (a
// killed worker is replaced by a new process in its slot).
type soakCluster struct {
	redis   *testenv.RedisServer
	proxy   *tcpproxy.Proxy
	spec    soakSpec // the workers' spec but for their ids
	workers []*child
	gens    []int
	mem     *memSampler
	lease   time.Duration
}

// startWorker starts (or restarts) the worker of slot i.
func (c *soakCluster) startWorker(t *testing.T, i int) {
	c.gens[i]++
	spec := c.spec
	spec.WorkerID = fmt.Sprintf("soak-w%d.%d", i, c.gens[i])
	w := startChild(t, spec.WorkerID, "soakworker", spec)
	c.workers[i] = w
	c.mem.watch(spec.WorkerID, w.pid())
}

// inject runs one fault of kind to its end and says what it did.
func (c *soakCluster) inject(t *testing.T, kind faultKind, rng *rand.Rand) faultEvent {
	ev := faultEvent{kind: kind, start: time.Now().UnixMilli()}
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int63n(int64(hi-lo))) }
	switch kind {
	case faultKillWorker:
		i := rng.Intn(len(c.workers))
		ev.target = c.workers[i].name
		c.workers[i].kill(t)
		time.Sleep(between(300*time.Millisecond, 2*time.Second)) // the fault itself: no worker in the slot
		c.startWorker(t, i)
	case faultRestartRedis:
		ev.target = fmt.Sprintf("redis-server pid %d", c.redis.Pid())
		c.redis.Kill(t)
		time.Sleep(between(100*time.Millisecond, time.Second))
		c.redis.Restart(t)
		c.mem.watch(fmt.Sprintf("redis-server.%d", c.redis.Pid()), c.redis.Pid())
	case faultCutMariaDB:
		ev.target = "the workers' ledger links"
		c.proxy.Cut()
		time.Sleep(between(500*time.Millisecond, 4*time.Second))
		c.proxy.Restore()
	case faultPauseWorker:
		i := rng.Intn(len(c.workers))
		w := c.workers[i]
		ev.target = w.name
		if err := w.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatalf("SIGSTOP %s: %v", w.name, err)
		}
		time.Sleep(between(c.lease*3/2, c.lease*5/2))
		if err := w.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatalf("SIGCONT %s: %v", w.name, err)
		}
	}
	ev.end = time.Now().UnixMilli()
	t.Logf("fault: %s (%s) for %d ms", ev.kind, ev.target, ev.end-ev.start)
	return ev
}

// explains reports whether fault e can account for a job's run r2 after
// its run r1 (start times, Unix ms): the fault began before r2 and ended
// after r1 began, and r1 was recent enough at the fault's start to have
// still been in flight (within slack).
func (e faultEvent) explains(r1, r2, slack int64) bool {
	return e.start <= r2 && e.end >= r1 && e.start-r1 <= slack
}

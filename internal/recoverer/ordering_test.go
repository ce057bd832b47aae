package recoverer_test

import (
	"testing"
	"time"

	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// A key whose holder a path that knows nothing of ordering keys removed
// (a worker of the release before them acks it: its envelope and lease
// go, its hold stays) is handed on by the next recovery run, which
// reports it; a run with nothing stranded hands nothing on.
func TestRecoveryHandsOnAStrandedKey(t *testing.T) {
	e := newREnv(t)
	ctx := testenv.Context(t)
	for _, id := range []string{"k1", "k2"} {
		if _, err := e.c.Enqueue(ctx, "t", queue.NewJob{ID: id, OrderingKey: "K"}); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := e.c.Claim(ctx, "t", 10, time.Minute)
	if err != nil || len(cl.Jobs) != 1 {
		t.Fatalf("claim: %+v %v", cl, err)
	}
	rec := e.recoverer(t, recoverer.Config{})
	if rep, err := rec.RunOnce(ctx); err != nil || rep.KeysHandedOn != 0 {
		t.Fatalf("a run while k1 runs: %+v %v, want no key handed on", rep, err)
	}
	// The older release's ack of k1.
	p := e.ns + ":{t}:"
	if err := e.rdb.ZRem(ctx, p+"lease", "k1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.HDel(ctx, p+"job", "k1").Err(); err != nil {
		t.Fatal(err)
	}
	if cl, err := e.c.Claim(ctx, "t", 10, time.Minute); err != nil || len(cl.Jobs) != 0 {
		t.Fatalf("claim before the run: %+v %v, want nothing (k2 parked)", cl, err)
	}
	rep, err := rec.RunOnce(ctx)
	if err != nil || rep.KeysHandedOn != 1 {
		t.Fatalf("the run: %+v %v, want K handed on", rep, err)
	}
	cl, err = e.c.Claim(ctx, "t", 10, time.Minute)
	if err != nil || len(cl.Jobs) != 1 || cl.Jobs[0].ID != "k2" {
		t.Fatalf("claim after the run: %+v %v, want [k2]", cl, err)
	}
}

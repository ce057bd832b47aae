package dataplane_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/redis/go-redis/v9"
)

// A job Redis lost comes back from its ledger row: an in-progress one due at
// once, a retrying one due at its planned time, each with the row's attempt,
// max attempts, last error and (binary-safe) payload; the next claim bumps
// the attempt as after a lease expiry.
func TestRestoreRecreatesLostJobs(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		now := redisNow(t, e)
		payload := []byte("a|b\x00c|{\"n\":1}")
		rows := []dataplane.RestoreRow{
			{Topic: "t", ID: "running", RunAt: now - 5000, Attempt: 2, MaxAttempts: 5, LastError: "boom|x", Payload: payload},
			{Topic: "t", ID: "waiting", State: dataplane.StateRetrying, RunAt: now + time.Hour.Milliseconds(), Attempt: 1, MaxAttempts: 3, LastError: "failed once"},
		}
		out, err := e.c.Restore(ctx, rows, dataplane.RestoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(out, []dataplane.RestoreOutcome{dataplane.RestoreCreated, dataplane.RestoreCreated}) {
			t.Fatalf("outcomes %v", out)
		}
		// The topics set lists the topic, as after an enqueue: a durable
		// topic's jobs reach Redis only by Restore.
		if topics, err := e.c.Topics(ctx); err != nil || !slices.Equal(topics, []string{"t"}) {
			t.Fatalf("topics after a restore: %v, %v", topics, err)
		}
		info := mustGet(t, e, "t", "running")
		if info.State != dataplane.StateRetrying || info.Score != now-5000 {
			t.Fatalf("running: %s at %d, want retrying at its run time %d", info.State, info.Score, now-5000)
		}
		j := info.Job
		if j.Attempt != 2 || j.MaxAttempts != 5 || j.LastError != "boom|x" || !bytes.Equal(j.Payload, payload) || j.RunAt != now-5000 {
			t.Fatalf("running envelope %+v", j)
		}
		info = mustGet(t, e, "t", "waiting")
		if info.State != dataplane.StateRetrying || info.Score != rows[1].RunAt || info.Job.Attempt != 1 || info.Job.LastError != "failed once" {
			t.Fatalf("waiting: %+v %+v", info, info.Job)
		}
		c := mustClaim(t, e, "t", 10, time.Minute)
		if len(c.Jobs) != 1 || c.Jobs[0].ID != "running" || c.Jobs[0].Attempt != 3 {
			t.Fatalf("claim after restore: %v (attempt %v)", ids(c.Jobs), c.Jobs)
		}
	})
}

// An in-progress row whose run time lies ahead (a clock mistake) is still
// due at once; a retrying row whose run time passed is due at once too.
func TestRestoreDueTimes(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		now := redisNow(t, e)
		rows := []dataplane.RestoreRow{
			{Topic: "t", ID: "ahead", RunAt: now + time.Hour.Milliseconds(), Attempt: 1, MaxAttempts: 3},
			{Topic: "t", ID: "late-retry", State: dataplane.StateRetrying, RunAt: now - 1000, Attempt: 1, MaxAttempts: 3},
		}
		if _, err := e.c.Restore(testenv.Context(t), rows, dataplane.RestoreOptions{}); err != nil {
			t.Fatal(err)
		}
		if info := mustGet(t, e, "t", "ahead"); info.Score > now+5000 {
			t.Fatalf("in-progress row restored due at %d, %d ms ahead", info.Score, info.Score-now)
		}
		if c := mustClaim(t, e, "t", 10, time.Minute); len(c.Jobs) != 2 {
			t.Fatalf("claimed %v, want both", ids(c.Jobs))
		}
	})
}

// A job Redis still tracks (waiting, leased, waiting for a retry, dead) is
// left exactly as it is.
func TestRestoreLeavesTrackedJobsAlone(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "due", Delay: time.Hour})
		claimOne(t, e, "t", "leased", time.Minute)
		r := claimOne(t, e, "t", "retrying", time.Minute)
		if _, err := e.c.Retry(ctx, []dataplane.RetryRequest{{Ref: r.Ref(), Delay: time.Hour, Error: "x"}}); err != nil {
			t.Fatal(err)
		}
		d := claimOne(t, e, "t", "dead", time.Minute)
		if _, _, err := e.c.Bury(ctx, []dataplane.DeadJob{{Job: d, Error: "r"}}); err != nil {
			t.Fatal(err)
		}
		before := dumpNamespace(t, e)
		var rows []dataplane.RestoreRow
		for _, id := range []string{"due", "leased", "retrying", "dead"} {
			rows = append(rows, dataplane.RestoreRow{Topic: "t", ID: id, RunAt: 1, Attempt: 7, MaxAttempts: 9, Payload: []byte("other")})
		}
		out, err := e.c.Restore(ctx, rows, dataplane.RestoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range out {
			if o != dataplane.RestoreTracked {
				t.Fatalf("%s: %s, want tracked", rows[i].ID, o)
			}
		}
		if after := dumpNamespace(t, e); after != before {
			t.Fatalf("Redis changed:\nbefore %s\nafter  %s", before, after)
		}
	})
}

// A waiting row (a durable job's first push) replaces the envelope of a
// dead job with its id only when the job died before the row was seen or
// before the row was written: SQL then holds a new job (a requeue). A death
// at or after seen-at and after the row's enqueue is the row's own job, read
// before the worker settled it, and stays dead (the relay once pushed such a
// row and revived the job it had just buried).
func TestRestoreWaitingRowAndADeadJob(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		d := claimOne(t, e, "t", "d", time.Minute)
		_, diedAt, err := e.c.Bury(ctx, []dataplane.DeadJob{{Job: d, Error: "r"}})
		if err != nil {
			t.Fatal(err)
		}
		row := func(enqueuedAt int64) []dataplane.RestoreRow {
			return []dataplane.RestoreRow{{Topic: "t", ID: "d", State: dataplane.StateWaiting, RunAt: 1, MaxAttempts: 3, EnqueuedAt: enqueuedAt, Payload: []byte("new")}}
		}
		before := dumpNamespace(t, e)
		// The dead job's own row (written before the death), seen before
		// the death or in its millisecond.
		for _, seen := range []int64{diedAt - 1, diedAt} {
			for _, enq := range []int64{0, diedAt - 1} {
				out, err := e.c.Restore(ctx, row(enq), dataplane.RestoreOptions{SeenAt: seen})
				if err != nil || out[0] != dataplane.RestoreGone {
					t.Fatalf("a row enqueued at %d seen %d ms before the death: %v %v, want gone", enq, diedAt-seen, out, err)
				}
			}
		}
		if after := dumpNamespace(t, e); after != before {
			t.Fatalf("Redis changed:\nbefore %s\nafter  %s", before, after)
		}
		// Seen after the death: SQL holds a new job.
		out, err := e.c.Restore(ctx, row(0), dataplane.RestoreOptions{DryRun: true, SeenAt: diedAt + 1})
		if err != nil || out[0] != dataplane.RestoreCreated {
			t.Fatalf("seen after the death: %v %v, want created", out, err)
		}
		// A requeue's own push: seen-at lies a second before its insert,
		// which is in the death's millisecond or after it.
		out, err = e.c.Restore(ctx, row(diedAt), dataplane.RestoreOptions{SeenAt: diedAt - 1000})
		if err != nil || out[0] != dataplane.RestoreCreated {
			t.Fatalf("a row written after the death: %v %v, want created", out, err)
		}
		if info := mustGet(t, e, "t", "d"); info.State == dataplane.StateDead || string(info.Job.Payload) != "new" {
			t.Fatalf("the new job: %s, payload %q", info.State, info.Job.Payload)
		}
	})
}

// A dry run reports what it would re-create and writes nothing.
func TestRestoreDryRunWritesNothing(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		mustEnqueue(t, e, "t", dataplane.NewJob{ID: "kept", Delay: time.Hour})
		before := dumpNamespace(t, e)
		rows := []dataplane.RestoreRow{
			{Topic: "t", ID: "kept", Attempt: 1, MaxAttempts: 3, RunAt: 1},
			{Topic: "t", ID: "lost", Attempt: 1, MaxAttempts: 3, RunAt: 1},
			{Topic: "u", ID: "lost", State: dataplane.StateRetrying, Attempt: 1, MaxAttempts: 3, RunAt: 1},
		}
		out, err := e.c.Restore(testenv.Context(t), rows, dataplane.RestoreOptions{DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		want := []dataplane.RestoreOutcome{dataplane.RestoreTracked, dataplane.RestoreCreated, dataplane.RestoreCreated}
		if !slices.Equal(out, want) {
			t.Fatalf("outcomes %v, want %v", out, want)
		}
		if after := dumpNamespace(t, e); after != before {
			t.Fatalf("a dry run changed Redis:\nbefore %s\nafter  %s", before, after)
		}
	})
}

// Many rows over several topics, in small chunks: every row is decided once,
// in input order; a second pass finds every job tracked. Duplicate ids in
// one call are re-created once.
func TestRestoreChunksAcrossTopics(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		var rows []dataplane.RestoreRow
		for i := 0; i < 1250; i++ {
			topic := []string{"a", "b", "c"}[i%3]
			rows = append(rows, dataplane.RestoreRow{Topic: topic, ID: fmt.Sprintf("j%d", i), Attempt: 1, MaxAttempts: 3,
				RunAt: 1, Payload: bytes.Repeat([]byte("x"), 100)})
		}
		rows = append(rows, rows[0]) // the same job twice in one call
		out, err := e.c.Restore(ctx, rows, dataplane.RestoreOptions{Chunk: 100, ChunkBytes: 5000})
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range out[:1250] {
			if o != dataplane.RestoreCreated {
				t.Fatalf("row %d: %s", i, o)
			}
		}
		if out[1250] != dataplane.RestoreTracked {
			t.Fatalf("repeated row: %s, want tracked", out[1250])
		}
		out, err = e.c.Restore(ctx, rows, dataplane.RestoreOptions{Chunk: 100})
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range out {
			if o != dataplane.RestoreTracked {
				t.Fatalf("second pass, row %d: %s", i, o)
			}
		}
		for topic, want := range map[string]int64{"a": 417, "b": 417, "c": 416} {
			st, err := e.c.Stats(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			if st.Due != want {
				t.Fatalf("topic %s: %d due, want %d", topic, st.Due, want)
			}
		}
	})
}

// Two restores of the same rows at once re-create each job exactly once:
// the check and the write are one atomic step.
func TestRestoreConcurrentCreatesOnce(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		var rows []dataplane.RestoreRow
		for i := 0; i < 2000; i++ {
			rows = append(rows, dataplane.RestoreRow{Topic: "t", ID: fmt.Sprintf("j%d", i), Attempt: 1, MaxAttempts: 3, RunAt: 1})
		}
		ctx := testenv.Context(t)
		var wg sync.WaitGroup
		created := make([]int, 4)
		for g := range created {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := e.c.Restore(ctx, rows, dataplane.RestoreOptions{Chunk: 50})
				if err != nil {
					t.Error(err)
				}
				for _, o := range out {
					if o == dataplane.RestoreCreated {
						created[g]++
					}
				}
			}()
		}
		wg.Wait()
		total := 0
		for _, n := range created {
			total += n
		}
		if total != len(rows) {
			t.Fatalf("created %v = %d jobs for %d rows", created, total, len(rows))
		}
	})
}

// After Redis forgot its scripts (a restart), Restore loads its script
// again by itself.
func TestRestoreAfterScriptFlush(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		rows := []dataplane.RestoreRow{{Topic: "t", ID: "a", Attempt: 1, MaxAttempts: 3, RunAt: 1}}
		if _, err := e.c.Restore(ctx, rows, dataplane.RestoreOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := e.rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		rows[0].ID = "b"
		out, err := e.c.Restore(ctx, rows, dataplane.RestoreOptions{})
		if err != nil || out[0] != dataplane.RestoreCreated {
			t.Fatalf("after SCRIPT FLUSH: %v, %v", out, err)
		}
	})
}

// A bad row is reported and skipped; the others are restored.
func TestRestoreReportsBadRows(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		rows := []dataplane.RestoreRow{
			{Topic: "t", ID: "ok", Attempt: 1, MaxAttempts: 3, RunAt: 1},
			{Topic: "t", ID: "bad id", Attempt: 1, MaxAttempts: 3, RunAt: 1},
			{Topic: "{bad}", ID: "x", Attempt: 1, MaxAttempts: 3, RunAt: 1},
		}
		out, err := e.c.Restore(testenv.Context(t), rows, dataplane.RestoreOptions{})
		if err == nil {
			t.Fatal("no error for bad rows")
		}
		want := []dataplane.RestoreOutcome{dataplane.RestoreCreated, dataplane.RestoreFailed, dataplane.RestoreFailed}
		if !slices.Equal(out, want) {
			t.Fatalf("outcomes %v, want %v", out, want)
		}
	})
}

// dumpNamespace renders every key of the test's namespace with its content,
// to compare Redis before and after.
func dumpNamespace(t *testing.T, e env) string {
	t.Helper()
	ctx := testenv.Context(t)
	keys := keysOf(t, e)
	slices.Sort(keys)
	var b bytes.Buffer
	for _, k := range keys {
		typ, err := e.rdb.Type(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		var v any
		switch typ {
		case "zset":
			v, err = e.rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
		case "hash":
			v, err = e.rdb.HGetAll(ctx, k).Result()
		case "set":
			var m []string
			m, err = e.rdb.SMembers(ctx, k).Result()
			slices.Sort(m)
			v = m
		default:
			v, err = e.rdb.Get(ctx, k).Result()
		}
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s=%v;", k, v)
	}
	return b.String()
}

// evalCounter counts the script calls a client sends, pipelined or not.
type evalCounter struct{ n atomic.Int64 }

func (h *evalCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *evalCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}
func (h *evalCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.count(cmd)
		}
		return next(ctx, cmds)
	}
}
func (h *evalCounter) count(cmd redis.Cmder) {
	if cmd.Name() == "evalsha" || cmd.Name() == "eval" {
		h.n.Add(1)
	}
}

// On a Redis that is not a cluster, the rows of several names (a batch
// spread over a topic's partitions) go in one script call up to a chunk,
// as one name's do: partitions cost no more calls than one partition.
// Each name's jobs land in its own keys.
func TestRestoreGroupsNamesInOneCall(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	if _, cluster := rdb.(*redis.ClusterClient); cluster {
		t.Skip("a cluster splits the calls by name")
	}
	calls := &evalCounter{}
	rdb.AddHook(calls)
	c, err := dataplane.New(rdb, dataplane.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	var rows []dataplane.RestoreRow
	for i := range 40 {
		rows = append(rows, dataplane.RestoreRow{Topic: fmt.Sprintf("p%d", i%8), ID: fmt.Sprintf("j%d", i),
			Attempt: 1, MaxAttempts: 3, RunAt: 1, Payload: []byte("x")})
	}
	for _, c2 := range []struct{ chunk, calls int }{{500, 1}, {10, 4}} {
		before := calls.n.Load()
		out, err := c.Restore(ctx, rows, dataplane.RestoreOptions{Chunk: c2.chunk, DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := calls.n.Load() - before; got != int64(c2.calls) {
			t.Errorf("40 rows of 8 names, chunks of %d: %d script calls, want %d", c2.chunk, got, c2.calls)
		}
		for i, o := range out {
			if o != dataplane.RestoreCreated {
				t.Fatalf("dry run, row %d: %s", i, o)
			}
		}
	}
	out, err := c.Restore(ctx, rows, dataplane.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o != dataplane.RestoreCreated {
			t.Fatalf("row %d: %s", i, o)
		}
	}
	for p := range 8 {
		st, err := c.Stats(ctx, fmt.Sprintf("p%d", p))
		if err != nil {
			t.Fatal(err)
		}
		if st.Due != 5 {
			t.Errorf("p%d: %d due, want 5", p, st.Due)
		}
	}
}

// On a Redis that is not a cluster, a batch to a redis topic of 8
// partitions is one script call: each job in the partition of its key,
// duplicates (inside the batch and of a job already there) answered as
// such, every result in the caller's order.
func TestEnqueueSpreadIsOneCall(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	if _, cluster := rdb.(*redis.ClusterClient); cluster {
		t.Skip("a cluster splits a batch by partition")
	}
	calls := &evalCounter{}
	rdb.AddHook(calls)
	c, err := dataplane.New(rdb, dataplane.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	if _, err := c.SetPartitions(ctx, "t", 8); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, "t", dataplane.NewJob{ID: "old", PartitionKey: "k3", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	var jobs []dataplane.NewJob
	for i := range 30 {
		jobs = append(jobs, dataplane.NewJob{ID: fmt.Sprintf("j%d", i), PartitionKey: fmt.Sprintf("k%d", i%10), Delay: time.Hour})
	}
	jobs = append(jobs, dataplane.NewJob{ID: "j4", PartitionKey: "k4", Delay: time.Hour}, dataplane.NewJob{ID: "old", PartitionKey: "k3", Delay: time.Hour})
	before := calls.n.Load()
	res, err := c.EnqueueBatch(ctx, "t", jobs)
	if err != nil {
		t.Fatal(err)
	}
	if got := calls.n.Load() - before; got != 1 {
		t.Errorf("a batch over 8 partitions: %d script calls, want 1", got)
	}
	for i, r := range res {
		want := dataplane.BatchCreated
		if i >= 30 {
			want = dataplane.BatchDuplicate
		}
		if r.Err != nil || r.ID != jobs[i].ID || r.Status != want {
			t.Errorf("job %d (%s): %+v, want %s", i, jobs[i].ID, r, want)
		}
	}
	for i := range 30 {
		info, err := c.Get(ctx, "t", fmt.Sprintf("j%d", i))
		if err != nil {
			t.Fatal(err)
		}
		want := dataplane.PartitionName("t", 8, dataplane.PartitionOf(fmt.Sprintf("k%d", i%10), "", 8))
		if info.Job == nil || info.Job.Partition != want {
			t.Errorf("j%d: partition %v, want %s", i, info.Job, want)
		}
	}
	st, err := c.Stats(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if st.Due != 31 {
		t.Errorf("%d due, want 31", st.Due)
	}
}

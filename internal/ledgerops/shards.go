package ledgerops

import (
	"context"
	"errors"
	"fmt"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/unavailable"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// Shards is a ledger spread over several SQL servers (docs/design.md §7.1,
// "Ledger shards"): the rows of a topic or partition name live on shard
// dataplane.ShardOf(name, n). Shard 0 is the home shard: it also keeps
// the topics' state (pauses and partition layouts), which every shard's
// relay and recoverer read. Shards routes the steps of a job's life (the
// data plane's enqueue, the worker's record and settlements, the
// coordinators' lookups and reschedules, periodic ticks) to the shard of
// the name they concern. Scans (the relay's and the recoverer's) are each
// shard's own: Shard gives them one shard with the home shard's state.
type Shards struct {
	ledgers []*ledger.Ledger
	ops     []Ops
}

// The data plane's views of a ledger that Shards routes.
var (
	_ dataplane.Ledger           = (*Shards)(nil)
	_ dataplane.RescheduleLedger = (*Shards)(nil)
	_ dataplane.TickStore        = (*Shards)(nil)
	_ queue.PartitionStore       = (*Shards)(nil)
	_ queue.PauseStore           = (*Shards)(nil)
	_ queue.LayoutStore          = (*Shards)(nil)
	_ dataplane.ShardedStore     = (*Shards)(nil)
	_ Router                     = (*Shards)(nil)
)

// NewShards routes over ledgers, shard 0 first (the home shard). Every
// shard needs the same table names; each is migrated on its own.
func NewShards(ledgers ...*ledger.Ledger) (*Shards, error) {
	if len(ledgers) == 0 {
		return nil, errors.New("ledger shards: none given")
	}
	s := &Shards{ledgers: ledgers, ops: make([]Ops, len(ledgers))}
	for i, l := range ledgers {
		if l == nil {
			return nil, fmt.Errorf("ledger shards: shard %d is nil", i)
		}
		if l.LedgerTable() != ledgers[0].LedgerTable() {
			return nil, fmt.Errorf("ledger shards: shard %d's tables (%s) are not shard 0's (%s)", i, l.LedgerTable(), ledgers[0].LedgerTable())
		}
		s.ops[i] = Of(l)
	}
	return s, nil
}

// N is the number of shards.
func (s *Shards) N() int { return len(s.ops) }

// LedgerShards is N, for the data plane (dataplane.ShardedStore): one
// relay per shard.
func (s *Shards) LedgerShards() int { return len(s.ops) }

// Ledger returns shard i's ledger.
func (s *Shards) Ledger(i int) *ledger.Ledger { return s.ledgers[i] }

// Of returns the shard that holds name's rows (a topic's or a partition's).
func (s *Shards) Of(name string) int { return dataplane.ShardOf(name, len(s.ops)) }

// Shard returns shard i's steps for its own relay and recoverer: its rows,
// with the topics' state (pauses, layouts) read from the home shard.
func (s *Shards) Shard(i int) Ops { return homeState{Ops: s.ops[i], home: s.ops[0]} }

// homeState is one shard's steps with the topics' state from the home
// shard.
type homeState struct {
	Ops
	home Ops
}

func (h homeState) TopicStates(ctx context.Context) ([]queue.PauseState, error) {
	return h.home.TopicStates(ctx)
}

func (h homeState) Layouts(ctx context.Context) (map[string][]int, error) {
	return h.home.Layouts(ctx)
}

// byShard groups the items of a call by the shard of the name each
// concerns and runs f once per shard with its items, in shard order. The
// shards' errors are joined: an item of a shard that failed may be
// retried with the rest, which every routed step allows (each is
// idempotent per row, as the worker's retries of one shard already need).
func byShard[T any](s *Shards, items []T, name func(T) string, f func(o Ops, part []T) error) error {
	if len(s.ops) == 1 {
		return f(s.ops[0], items)
	}
	var errs []error
	for i, idx := range s.split(len(items), func(k int) string { return name(items[k]) }) {
		if len(idx) == 0 {
			continue
		}
		part := make([]T, len(idx))
		for k, j := range idx {
			part[k] = items[j]
		}
		if err := f(s.ops[i], part); err != nil {
			errs = append(errs, fmt.Errorf("shard %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// split is the indexes 0 to n-1, by the shard of the name of each.
func (s *Shards) split(n int, name func(int) string) [][]int {
	at := make([][]int, len(s.ops))
	for k := range n {
		i := s.Of(name(k))
		at[i] = append(at[i], k)
	}
	return at
}

func jobName(j *queue.Job) string     { return j.Ref().Topic }
func refName(r queue.Ref) string      { return r.Topic }
func deadName(d queue.DeadJob) string { return d.Job.Ref().Topic }

// Record writes the claims of jobs, each on its shard.
func (s *Shards) Record(ctx context.Context, jobs []*queue.Job, worker string) error {
	return byShard(s, jobs, jobName, func(o Ops, part []*queue.Job) error { return o.Record(ctx, part, worker) })
}

func (s *Shards) Complete(ctx context.Context, refs []queue.Ref) error {
	return byShard(s, refs, refName, func(o Ops, part []queue.Ref) error { return o.Complete(ctx, part) })
}

// CompleteResults is Complete with the handlers' results, one per ref.
func (s *Shards) CompleteResults(ctx context.Context, refs []queue.Ref, results [][]byte) error {
	if len(results) != len(refs) {
		return fmt.Errorf("ledger shards: %d results for %d refs", len(results), len(refs))
	}
	type item struct {
		ref    queue.Ref
		result []byte
	}
	items := make([]item, len(refs))
	for i := range refs {
		items[i] = item{refs[i], results[i]}
	}
	return byShard(s, items, func(it item) string { return it.ref.Topic }, func(o Ops, part []item) error {
		rs, res := make([]queue.Ref, len(part)), make([][]byte, len(part))
		for i, it := range part {
			rs[i], res[i] = it.ref, it.result
		}
		return o.CompleteResults(ctx, rs, res)
	})
}

func (s *Shards) CancelRows(ctx context.Context, refs []queue.Ref) error {
	return byShard(s, refs, refName, func(o Ops, part []queue.Ref) error { return o.CancelRows(ctx, part) })
}

func (s *Shards) Cancelled(ctx context.Context, jobs []*queue.Job) error {
	return byShard(s, jobs, jobName, func(o Ops, part []*queue.Job) error { return o.Cancelled(ctx, part) })
}

func (s *Shards) DropRows(ctx context.Context, refs []queue.Ref) error {
	return byShard(s, refs, refName, func(o Ops, part []queue.Ref) error { return o.DropRows(ctx, part) })
}

func (s *Shards) DropClaim(ctx context.Context, ref queue.Ref, worker string) error {
	return s.ops[s.Of(ref.Topic)].DropClaim(ctx, ref, worker)
}

func (s *Shards) Unclaim(ctx context.Context, refs []queue.Ref) error {
	return byShard(s, refs, refName, func(o Ops, part []queue.Ref) error { return o.Unclaim(ctx, part) })
}

func (s *Shards) Extend(ctx context.Context, refs []queue.Ref, leaseUntil int64) error {
	return byShard(s, refs, refName, func(o Ops, part []queue.Ref) error { return o.Extend(ctx, part, leaseUntil) })
}

func (s *Shards) MarkRetrying(ctx context.Context, retries []dataplane.RetryRequest) error {
	return byShard(s, retries, func(r dataplane.RetryRequest) string { return r.Topic },
		func(o Ops, part []dataplane.RetryRequest) error { return o.MarkRetrying(ctx, part) })
}

func (s *Shards) Bury(ctx context.Context, dead []queue.DeadJob) error {
	return byShard(s, dead, deadName, func(o Ops, part []queue.DeadJob) error { return o.Bury(ctx, part) })
}

func (s *Shards) Lookup(ctx context.Context, topic, id string) (*dataplane.RestoreRow, error) {
	return s.ops[s.Of(topic)].Lookup(ctx, topic, id)
}

func (s *Shards) Reschedule(ctx context.Context, ref queue.Ref, from, runAt int64) (bool, error) {
	return s.ops[s.Of(ref.Topic)].Reschedule(ctx, ref, from, runAt)
}

// EnqueueTick claims a periodic tick and writes its job on the shard of
// topic: the tick's row and the job's commit together.
func (s *Shards) EnqueueTick(ctx context.Context, q *dataplane.Client, topic, name string, tick int64, j queue.NewJob) (queue.TickResult, error) {
	return s.ops[s.Of(topic)].EnqueueTick(ctx, q, topic, name, tick, j)
}

// LastTicks reads every shard (a schedule's ticks are on its topic's
// shard) and keeps each schedule's latest.
func (s *Shards) LastTicks(ctx context.Context, names ...string) (map[string]int64, error) {
	out := map[string]int64{}
	for i, o := range s.ops {
		m, err := o.LastTicks(ctx, names...)
		if err != nil {
			return nil, fmt.Errorf("shard %d: %w", i, err)
		}
		for k, v := range m {
			out[k] = max(out[k], v)
		}
	}
	return out, nil
}

// Schedule writes topic's jobs on its shard.
func (s *Shards) Schedule(ctx context.Context, topic string, jobs []queue.NewJob) ([]queue.EnqueueResult, int64, error) {
	return s.ledgers[s.Of(topic)].Schedule(ctx, topic, jobs)
}

// ScheduleEach writes each partition's jobs on its shard: one commit per
// shard the call touches, so not atomic across shards. A failed shard
// fails the call; the shards written before it keep their rows (a retry
// finds them as duplicates: an id is unique within its partition, which
// is on one shard), and the error then wraps
// unavailable.ErrPartlyCommitted, an outcome the data plane treats as
// unknown: it asks the relay for a recheck (a full pass), so those rows
// are pushed though the call failed. The clock returned is the earliest
// of the shards' (each shard's rows are timed by its own server).
func (s *Shards) ScheduleEach(ctx context.Context, topics []string, jobs [][]queue.NewJob) ([][]queue.EnqueueResult, int64, error) {
	if len(topics) != len(jobs) {
		return nil, 0, fmt.Errorf("ledger shards: schedule: %d topics for %d lists of jobs", len(topics), len(jobs))
	}
	if len(s.ops) == 1 {
		return s.ledgers[0].ScheduleEach(ctx, topics, jobs)
	}
	out := make([][]queue.EnqueueResult, len(topics))
	var now int64
	committed := false
	for i, idx := range s.split(len(topics), func(p int) string { return topics[p] }) {
		if len(idx) == 0 {
			continue
		}
		ts, js := make([]string, len(idx)), make([][]queue.NewJob, len(idx))
		for k, p := range idx {
			ts[k], js[k] = topics[p], jobs[p]
		}
		res, at, err := s.ledgers[i].ScheduleEach(ctx, ts, js)
		if err != nil && committed {
			return nil, 0, fmt.Errorf("shard %d: %w (%w)", i, err, unavailable.ErrPartlyCommitted)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("shard %d: %w", i, err)
		}
		committed = true
		for k, p := range idx {
			out[p] = res[k]
		}
		if now == 0 || at < now {
			now = at
		}
	}
	return out, now, nil
}

// SetPaused, TopicState and TopicStates keep the pauses on the home shard.
func (s *Shards) SetPaused(ctx context.Context, topic string, paused bool, actor string) (queue.PauseState, bool, error) {
	return s.ledgers[0].SetPaused(ctx, topic, paused, actor)
}

func (s *Shards) TopicState(ctx context.Context, topic string) (queue.PauseState, error) {
	return s.ledgers[0].TopicState(ctx, topic)
}

func (s *Shards) TopicStates(ctx context.Context) ([]queue.PauseState, error) {
	return s.ledgers[0].TopicStates(ctx)
}

// AddLayouts and Layouts keep the partition layouts on the home shard.
func (s *Shards) AddLayouts(ctx context.Context, topic string, counts []int) ([]int, error) {
	return s.ledgers[0].AddLayouts(ctx, topic, counts)
}

func (s *Shards) Layouts(ctx context.Context) (map[string][]int, error) {
	return s.ledgers[0].Layouts(ctx)
}

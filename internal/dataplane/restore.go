package dataplane

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// RestoreRow is one job the ledger holds, to be put back if Redis has no
// trace of it (the recoverer builds these from stale ledger rows).
type RestoreRow struct {
	Topic string
	ID    string
	// State is the row's: retrying goes back due at RunAt; in_flight (its
	// worker died) goes back due at once; waiting (a durable job waiting
	// for its first run, §4.11) goes in due at RunAt, and a dead job's
	// envelope with the same id is replaced (SQL, the truth, says a new
	// job exists).
	State       State
	RunAt       int64 // Unix ms
	EnqueuedAt  int64 // Unix ms; 0 means RunAt
	Attempt     int   // claims so far, kept: the next claim bumps it
	MaxAttempts int
	LastError   string
	Payload     []byte
	// TraceParent is the trace the row keeps (a durable job's, §4.21): a
	// restore writes its key back unless one is there.
	TraceParent string
	// Priority is the job's (0-MaxPriority): it goes back at its level.
	Priority int
	// OrderingKey is the job's ("" for none): it holds the key again or
	// is parked behind its holder. A row in flight or retrying held its
	// key, and takes it back from a holder that has not started.
	OrderingKey string
}

// RestoreOutcome is what Restore did with one row.
type RestoreOutcome uint8

// The outcomes of Restore, per row.
const (
	// RestoreFailed: the script call carrying the row failed (see the
	// error Restore returned); nothing is known about the job.
	RestoreFailed RestoreOutcome = iota
	// RestoreTracked: Redis still tracks the job (due, leased, dead);
	// nothing was written.
	RestoreTracked
	// RestoreCreated: Redis had no trace of the job; its envelope and due
	// entry were re-created (in a dry run: would have been).
	RestoreCreated
	// RestoreGone: the job was acked (durable topic) or cancelled since
	// RestoreOptions.SeenAt, or died since then and after the row's
	// EnqueuedAt (a waiting row), so the row was read before its removal; or
	// SeenAt is older than Config.TombstoneTTL and that cannot be told.
	// Nothing was written.
	RestoreGone
)

func (o RestoreOutcome) String() string {
	switch o {
	case RestoreTracked:
		return "tracked"
	case RestoreCreated:
		return "created"
	case RestoreGone:
		return "gone"
	}
	return "failed"
}

// RestoreOptions tune one Restore call.
type RestoreOptions struct {
	// DryRun decides every row but writes nothing.
	DryRun bool
	// Chunk is the most rows one script call carries. Default 500.
	Chunk int
	// ChunkBytes closes a chunk early once its payloads and error texts
	// reach this many bytes, so big payloads never make one huge call.
	// Default 4 MiB.
	ChunkBytes int
	// SeenAt is Redis's clock (Unix ms) read before the rows were read from
	// SQL: a job removed at or after it (acked on a durable topic, or
	// cancelled: the tombstones of docs/design.md §4.11) is not re-created,
	// since its row was read before the removal. 0 means any tombstone
	// counts. A SeenAt older than Config.TombstoneTTL decides nothing
	// (RestoreGone): read the rows again.
	SeenAt int64

	// note is the relay's note (relayinbox.go) that the push of a durable
	// enqueue removes in its round trip.
	note noteRef
}

// Restore puts back the jobs of rows that Redis has no trace of, each at
// once (in progress) or at its run time (retrying), and leaves alone those it
// still tracks: per row, the check and the write are one atomic step, so
// concurrent Restores of the same rows re-create each job once. Rows are
// grouped by topic into chunks, one restore.lua call each, and all the calls
// go in one pipeline: one round trip (two after Redis forgot its scripts) for
// the whole slice. It returns one outcome per row, in order; rows of a
// failed call are RestoreFailed and the error says why.
//
// Plumbing: a step of the recoverer's and the relay's, exported for
// delayq's own packages; a service runs jobs through engine.Engine (or a
// Worker), never by calling it.
func (c *Client) Restore(ctx context.Context, rows []RestoreRow, opts RestoreOptions) ([]RestoreOutcome, error) {
	if opts.Chunk <= 0 {
		opts.Chunk = 500
	}
	if opts.ChunkBytes <= 0 {
		opts.ChunkBytes = 4 << 20
	}
	out := make([]RestoreOutcome, len(rows))
	var bad error
	calls := c.restoreCalls(rows, opts, func(err error) { bad = errors.Join(bad, err) })
	if len(calls) == 0 {
		return out, bad
	}
	mode := "write"
	if opts.DryRun {
		mode = "check"
	}

	head := []any{mode, opts.SeenAt, c.cfg.TombstoneTTL.Milliseconds()}
	var note func(redis.Pipeliner)
	if opts.note.member != "" {
		note = func(pipe redis.Pipeliner) { c.dropNote(ctx, pipe, opts.note) }
	}
	var traces func(redis.Pipeliner)
	if !opts.DryRun {
		traces = func(pipe redis.Pipeliner) { c.restoreTraces(ctx, pipe, rows) }
	}
	groups := c.restoreGroups(calls, opts)
	cmds := c.runEachAround(ctx, c.scripts.restore, c.restoreScriptCalls(calls, groups, head), traces, note)

	var errs []error
	if bad != nil {
		errs = append(errs, bad)
	}
	for i, cmd := range cmds {
		group := groups[i]
		rows := 0
		for _, g := range group {
			rows += len(calls[g].rows)
		}
		reply, err := cmd.Int64Slice()
		if err == nil && len(reply) != 1+rows {
			err = fmt.Errorf("reply of %d values for %d rows", len(reply), rows)
		}
		if err != nil {
			for _, g := range group {
				errs = append(errs, fmt.Errorf("queue: restore %d jobs of %s: %w", len(calls[g].rows), calls[g].topic, err))
			}
			continue
		}
		reply = reply[1:]
		for _, g := range group {
			call := calls[g]
			created := false
			for k, at := range call.rows {
				switch reply[k] {
				case 1:
					out[at] = RestoreCreated
					created = true
				case 2:
					out[at] = RestoreGone
				default:
					out[at] = RestoreTracked
				}
			}
			reply = reply[len(call.rows):]
			// A durable topic's jobs reach Redis only this way (the push
			// after the commit, the relay): the topics set must list the
			// topic, as an enqueue would, for the stats, the metrics and
			// the dashboard.
			if created && !opts.DryRun {
				if err := c.noteTopic(ctx, call.topic); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return out, errors.Join(errs...)
}

// restoreGroups are the script calls' restore calls, by index: each call
// alone unless every key is on one node (oneNode: on a Redis Cluster each
// name's keys have a slot of their own), and there consecutive calls of
// other names together up to a chunk's rows and bytes, so that a batch
// spread over a topic's partitions costs one call, as it does on one
// partition. A grouped call that fails part way has written the names
// before the failure, yet reports every row failed: a retry checks each
// row before it writes, so it creates nothing twice.
func (c *Client) restoreGroups(calls []restoreCall, opts RestoreOptions) [][]int {
	groups := make([][]int, 0, len(calls))
	cluster := !c.oneNode()
	rows, size := 0, 0
	for i, call := range calls {
		last := len(groups) - 1
		if cluster || last < 0 || rows+len(call.rows) > opts.Chunk || size+call.size > opts.ChunkBytes {
			groups = append(groups, []int{i})
			rows, size = len(call.rows), call.size
			continue
		}
		groups[last] = append(groups[last], i)
		rows += len(call.rows)
		size += call.size
	}
	return groups
}

// restoreCall is one restore.lua call: rows (indexes into the caller's
// slice) of one topic.
type restoreCall struct {
	topic string
	rows  []int
	args  []any // nine per row
	size  int   // bytes of the rows' payloads and error texts
}

// restoreCalls groups valid rows by topic into chunks; invalid rows are
// reported to bad and left out.
func (c *Client) restoreCalls(rows []RestoreRow, opts RestoreOptions, bad func(err error)) []restoreCall {
	var calls []restoreCall
	open := make(map[string]int) // topic -> index in calls of its open chunk
	size := make(map[string]int) // topic -> bytes in its open chunk
	for i, r := range rows {
		if err := validateName(r.Topic); err != nil {
			bad(fmt.Errorf("queue: restore row %d: %w", i, err))
			continue
		}
		if err := ValidateID(r.ID); err != nil {
			bad(fmt.Errorf("queue: restore row %d: %w", i, err))
			continue
		}
		if r.OrderingKey != "" && ValidateID(r.OrderingKey) != nil {
			bad(fmt.Errorf("queue: restore row %d: ordering key %q: want an id's characters", i, truncateKey(r.OrderingKey)))
			continue
		}
		at, ok := open[r.Topic]
		if !ok || len(calls[at].rows) >= opts.Chunk || size[r.Topic] >= opts.ChunkBytes {
			calls = append(calls, restoreCall{topic: r.Topic, args: make([]any, 0, 10*min(opts.Chunk, len(rows)-i))})
			at = len(calls) - 1
			open[r.Topic] = at
			size[r.Topic] = 0
		}
		mode := "p"
		switch {
		case r.State == StateWaiting:
			mode = "s"
		case r.State == StateRetrying:
			mode = "r"
		}
		call := &calls[at]
		call.rows = append(call.rows, i)
		if opts.DryRun { // a check reads ids only: the bulky fields stay home
			call.args = append(call.args, r.ID, mode, r.RunAt, r.Attempt, r.MaxAttempts, r.EnqueuedAt, "", "", 0, "")
			continue
		}
		call.args = append(call.args, r.ID, mode, r.RunAt, r.Attempt, r.MaxAttempts, r.EnqueuedAt, r.LastError, r.Payload,
			min(max(r.Priority, 0), MaxPriority), r.OrderingKey)
		size[r.Topic] += len(r.Payload) + len(r.LastError)
		call.size += len(r.Payload) + len(r.LastError)
	}
	return calls
}

// restoreScriptCalls are the restore.lua calls of groups (restoreGroups),
// each call's rows with their count in front; head are the arguments
// before them (mode, seen at, tombstone TTL).
func (c *Client) restoreScriptCalls(calls []restoreCall, groups [][]int, head []any) []scriptCall {
	out := make([]scriptCall, len(groups))
	for i, group := range groups {
		n := len(head)
		for _, g := range group {
			n += 1 + len(calls[g].args)
		}
		keys := make([]string, 0, 14*len(group))
		args := make([]any, 0, n)
		args = append(args, head...)
		for _, g := range group {
			// restoreCalls left invalid topics out, so this cannot fail;
			// the error is checked all the same.
			k, err := c.keysFor(calls[g].topic)
			if err != nil {
				out[i].err = err
				break
			}
			keys = append(keys, k.due, k.lease, k.job, k.wake, k.dead, k.gone)
			keys = append(keys, k.ordered()...)
			args = append(args, len(calls[g].rows))
			args = append(args, calls[g].args...)
		}
		if out[i].err == nil {
			out[i] = scriptCall{keys: keys, args: args}
		}
	}
	return out
}

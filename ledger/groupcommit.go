package ledger

import (
	"context"
	"database/sql/driver"
	"errors"
	"net"
	"time"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/coalesce"
)

// Group commit: the worker's writes (Record, Complete, Unclaim, Extend,
// MarkRetrying, bury) that arrive while the ledger's commits are in flight
// (Options.GroupCommitDepth of them, 2 by default) wait for one to end,
// then go to SQL together in one transaction. A commit waits for the log's
// flush, so on a database whose commits are slow, the
// number of commits, not of statements, bounds what a worker can do: one
// commit for a batch's record and the previous batches' settlements costs
// what either alone did. A lone write still goes at once, as one
// autocommit statement: nothing waits for company (docs/design.md §4.5).

// DefaultGroupCommit is Options.GroupCommit when it is 0: the most writes
// one commit carries.
const DefaultGroupCommit = 64

// groupCommitBytes bounds what one grouped transaction carries (payloads
// and keys, roughly), so that many large records do not make one huge
// transaction the server must hold and the other writes wait on; a single
// write over it still runs, alone.
const groupCommitBytes = 4 << 20

// DefaultGroupCommitDepth is Options.GroupCommitDepth when it is 0. With
// one commit in flight a record that arrives during a commit waits for it
// and then for its own (1.5 commits on average); with two it waits for
// its own alone. Measured on a 50,000-job backlog at 50 handlers
// (docs/benchmarks.md): drain 17-19k -> 20-24k jobs/s for 2.7 -> 4.8 commits
// per 1,000 jobs, and the classic preset's median lateness 18 -> 10 ms.
const DefaultGroupCommitDepth = 2

// DefaultGroupLinger is Options.GroupLinger when it is 0.
const DefaultGroupLinger = 5 * time.Millisecond

// recordsFlowFor is how recently a Record must have come for settlements to
// linger for the next one: a worker that records nothing (idle, or only
// settling) gets its settlements written at once.
const recordsFlowFor = 100 * time.Millisecond

// write is one call's statements, ready to run on a transaction (grouped)
// or on the ledger's connections (alone).
type write struct {
	run func(db *gorm.DB) error
	// atomic: the write is several statements that must commit together,
	// so alone it needs a transaction of its own.
	atomic bool
	// bytes is roughly what its statements send.
	bytes int
	// urgent: a handler waits for this write (Record); the others are
	// settlements, which may linger for the next urgent write's commit.
	urgent bool
}

// newGroupCommit returns the batcher of l's writes, or nil when group
// commit is off (Options.GroupCommit < 0).
func (l *Ledger) newGroupCommit() *coalesce.Batcher[write, error] {
	if l.opts.GroupCommit < 0 {
		return nil
	}
	return coalesce.New(coalesce.Limits[write]{
		Items:  l.opts.GroupCommit,
		Cost:   groupCommitBytes,
		CostOf: func(w write) int { return w.bytes },
		// A few commits in flight: whatever arrives while they are waits
		// for one to end and goes in the next, which is the whole point.
		Depth: l.opts.GroupCommitDepth,
		// While records flow, a settlement that finds no commit in flight
		// waits up to the linger for the next record and rides with it,
		// instead of taking a commit of its own that the record would
		// then wait behind.
		Lazy: func(w write) bool {
			return !w.urgent && time.Since(time.Unix(0, l.lastRecord.Load())) < recordsFlowFor
		},
		Linger: l.opts.GroupLinger,
	}, l.runGroup)
}

// commit runs w, grouped with the writes of other goroutines that arrive
// while a commit is in flight, and returns once it is committed (or
// failed: then nothing of w is written).
func (l *Ledger) commit(ctx context.Context, w write) error {
	l.writes.called()
	if w.urgent {
		l.lastRecord.Store(time.Now().UnixNano())
	}
	if l.group == nil {
		return l.runAlone(ctx, w)
	}
	errs, err := l.group.Do(ctx, []write{w})
	if err != nil {
		return err
	}
	return errs[0]
}

// runGroup runs the writes of one group commit, in arrival order, in one
// transaction. If the transaction fails for a reason other than the
// database being out of reach (a statement of one write was refused),
// each write runs again alone, so that it fails its own caller only.
func (l *Ledger) runGroup(ctx context.Context, ws []write) ([]error, error) {
	errs := make([]error, len(ws))
	if len(ws) == 1 {
		errs[0] = l.runAlone(ctx, ws[0])
		return errs, nil
	}
	err := l.transaction(ctx, func(tx *gorm.DB) error {
		for _, w := range ws {
			if err := w.run(tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		return errs, nil
	}
	if ctx.Err() != nil || unreachable(err) {
		for i := range errs {
			errs[i] = err
		}
		return errs, nil
	}
	for i, w := range ws {
		errs[i] = l.runAlone(ctx, w)
	}
	return errs, nil
}

// runAlone runs w in a commit of its own: one autocommit statement, or a
// transaction when it is several.
func (l *Ledger) runAlone(ctx context.Context, w write) error {
	if w.atomic {
		return l.transaction(ctx, w.run)
	}
	return l.autocommit(ctx, func() error { return w.run(l.conn(ctx)) })
}

// unreachable says whether err is the database being out of reach rather
// than a statement refused: running the writes again one by one would
// only fail each of them again.
func unreachable(err error) bool {
	var ne net.Error
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled) || errors.As(err, &ne) || isNotReady(err)
}

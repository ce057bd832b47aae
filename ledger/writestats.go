package ledger

import "sync/atomic"

// WriteStats counts what the ledger wrote since it was made: the figure
// that bounds a worker on a database whose commits are slow (each commit
// waits for the log's flush), whatever the machine's CPU.
type WriteStats struct {
	// Commits is the write transactions the ledger committed on its own
	// connections: an autocommit write statement counts one, an explicit
	// transaction one. Writes inside a caller's transaction (Tx, SQLTx,
	// Transactional) are the caller's commit and are not counted.
	Commits int64 `json:"commits"`
	// Writes is the calls of the worker's write methods (Record, Complete,
	// Unclaim, Extend, MarkRetrying, Bury): Writes / Commits is how many of
	// them one commit carried on average (group commit).
	Writes int64 `json:"writes"`
	// Deadlocks is how many of those commits the server chose as a
	// deadlock victim (each then ran again, up to five times in all): two
	// grouped commits in flight hold row locks at once, so a rising count
	// says they meet (docs/design.md §4.5).
	Deadlocks int64 `json:"deadlocks"`
	// NotReady is how many write attempts a Galera node refused because
	// it was out of the cluster's primary component (error 1047), each
	// then tried again for up to Options.NotReadyWait.
	NotReady int64 `json:"not_ready"`
}

// writeCounter is the ledger's live WriteStats.
type writeCounter struct {
	commits, writes, deadlocks, notReady atomic.Int64
}

// refused counts one write attempt a node refused as not ready.
func (c *writeCounter) refused() { c.notReady.Add(1) }

// deadlocked counts one commit attempt lost to a deadlock.
func (c *writeCounter) deadlocked() { c.deadlocks.Add(1) }

// committed counts one commit.
func (c *writeCounter) committed() { c.commits.Add(1) }

// called counts one call of a write method.
func (c *writeCounter) called() { c.writes.Add(1) }

// WriteStats returns the ledger's write counts so far.
func (l *Ledger) WriteStats() WriteStats {
	return WriteStats{Commits: l.writes.commits.Load(), Writes: l.writes.writes.Load(),
		Deadlocks: l.writes.deadlocks.Load(), NotReady: l.writes.notReady.Load()}
}

package queue

import (
	"context"
	"errors"
)

// ErrNotDurable is what the transactional enqueue returns for a topic that
// is not durable: only a durable topic's jobs live in SQL.
var ErrNotDurable = errors.New("topic is not durable")

// DurableStore is the SQL side of durable topics. *ledger.Ledger is one
// (each call its own statement, committed when it returns); ledger.Ledger.Tx
// and SQLTx give one bound to a caller's transaction.
type DurableStore interface {
	// Schedule writes one waiting row per job of topic and returns one
	// result per job, in order, and the SQL server's clock (Unix ms) that
	// the due times were computed on. A job whose id has a row already (or
	// is earlier in jobs) is a Duplicate and is not written: RunAt is the
	// waiting job's due time, 0 when a worker holds it. The jobs are
	// validated already (MaxAttempts filled in).
	Schedule(ctx context.Context, topic string, jobs []NewJob) (results []EnqueueResult, now int64, err error)
}

// PartitionStore is a DurableStore that writes the jobs of several
// partitions of a topic in one commit (*ledger.Ledger and its Tx, SQLTx):
// a partitioned durable topic's enqueue then costs the commits of one
// partition's, whatever its partition count.
type PartitionStore interface {
	DurableStore
	// ScheduleEach is Schedule of jobs[i] on topics[i], for every i, all
	// in one commit (or in the caller's transaction): results[i] are
	// jobs[i]'s; now is the earliest of the SQL clock readings.
	ScheduleEach(ctx context.Context, topics []string, jobs [][]NewJob) (results [][]EnqueueResult, now int64, err error)
}

// PushObserver is an EnqueueObserver that also hears of the pushes of
// durable jobs to Redis right after their commit: how many went in, and how
// many did not (Redis down or refusing: left to the relay; or there
// already). Optional.
type PushObserver interface {
	Pushed(topic string, pushed, notPushed int)
}

package recoverer

import (
	"context"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// Store is what the recoverer reads from the SQL ledger; *ledger.Ledger is
// one, and the statements are its own. Tests wrap it to inject faults.
type Store interface {
	// Stale lists rows whose lease_until is before olderThan (Unix ms) and
	// whose id is greater than afterID, by id, at most limit of them
	// (ledger.Ledger.Stale).
	Stale(ctx context.Context, olderThan, afterID int64, limit int) ([]ledger.Entry, error)
	// TopicCounts returns how many rows each topic has (topics without rows
	// are absent).
	TopicCounts(ctx context.Context) (map[string]int64, error)
	// Claims reads again the rows with the given ids (ledger.Entry.ID),
	// without their payloads; rows gone are absent from the map.
	Claims(ctx context.Context, ids []int64) (map[int64]ledger.Claim, error)
	// TopicStates are the operators' pauses (queue.PauseStore): a run
	// applies them to Redis before it restores any job.
	TopicStates(ctx context.Context) ([]queue.PauseState, error)
	// Layouts are the topics' partition layouts (queue.LayoutStore),
	// applied to Redis before the pauses (which go to every partition).
	Layouts(ctx context.Context) (map[string][]int, error)
	// PurgeHistoryWith deletes the job history rows that finished before their
	// topic's cutoff, cutoffs for the topics given and def for the others
	// (0: keep), in bounded batches resting as o says
	// (ledger.Ledger.PurgeHistoryWith).
	PurgeHistoryWith(ctx context.Context, def int64, cutoffs map[string]int64, o ledger.PurgeOptions) (int64, error)
}

// applyPauses writes to Redis the operators' partition layouts and pauses
// it lacks (and removes the pauses lifted since), from SQL, where they
// survive a Redis data loss (docs/design.md §4.13, §7.1). The layouts go
// first: a partitioned topic's pause goes to every partition its layouts
// name, before any job can be pushed there. Two reads of the small topic
// state table and, when it has rows, pipelined reads of Redis; writes only
// where Redis differs.
func applyPauses(ctx context.Context, q *dataplane.Client, store interface {
	TopicStates(ctx context.Context) ([]queue.PauseState, error)
	Layouts(ctx context.Context) (map[string][]int, error)
}, log logrus.FieldLogger) error {
	layouts, err := store.Layouts(ctx)
	if err != nil {
		return err
	}
	listed, err := q.ApplyLayouts(ctx, layouts)
	if len(listed) > 0 {
		log.WithField("topics", listed).Warn("partition layouts re-applied to Redis from SQL (Redis lost them)")
	}
	if err != nil {
		return err
	}
	states, err := store.TopicStates(ctx)
	if err != nil {
		return err
	}
	changed, err := q.ApplyPauses(ctx, states)
	if len(changed) > 0 {
		log.WithField("topics", changed).Warn("operators' pause state re-applied to Redis from SQL (Redis lost it, or a pause/resume failed at its Redis step)")
	}
	return err
}

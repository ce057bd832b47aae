package ledger

import (
	"cmp"
	"slices"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/queue"
)

// Batches are written in (topic, job_id) order, the order of the unique key
// (byte order, as the binary collation compares), so that two statements on
// overlapping keys take their row locks in the same order instead of
// deadlocking. The caller's slices are never reordered.

func byKey(at, aid, bt, bid string) int {
	return cmp.Or(cmp.Compare(at, bt), cmp.Compare(aid, bid))
}

func sortedRefs(refs []queue.Ref) []queue.Ref {
	out := slices.Clone(refs)
	slices.SortFunc(out, func(a, b queue.Ref) int { return byKey(a.Topic, a.ID, b.Topic, b.ID) })
	return out
}

func sortRetries(retries []dataplane.RetryRequest) {
	slices.SortFunc(retries, func(a, b dataplane.RetryRequest) int { return byKey(a.Topic, a.ID, b.Topic, b.ID) })
}

func sortEntries(rows []Entry) {
	slices.SortFunc(rows, func(a, b Entry) int { return byKey(a.Topic, a.JobID, b.Topic, b.JobID) })
}

func sortDead(rows []DeadLetter) {
	slices.SortFunc(rows, func(a, b DeadLetter) int { return byKey(a.Topic, a.JobID, b.Topic, b.JobID) })
}

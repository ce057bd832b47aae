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

// sortedWithResults is sortedRefs carrying results (nil, or one per ref)
// along.
func sortedWithResults(refs []queue.Ref, results [][]byte) ([]queue.Ref, [][]byte) {
	if results == nil {
		return sortedRefs(refs), nil
	}
	idx := make([]int, len(refs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return byKey(refs[a].Topic, refs[a].ID, refs[b].Topic, refs[b].ID) })
	outRefs, outResults := make([]queue.Ref, len(refs)), make([][]byte, len(refs))
	for i, j := range idx {
		outRefs[i], outResults[i] = refs[j], results[j]
	}
	return outRefs, outResults
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

package recoverer

import (
	"cmp"
	"context"
	"math"
	"slices"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// confirmCandidates bounds how many untracked rows of a topic are read again
// to confirm a loss.
const confirmCandidates = 50

// suspect is a topic whose epoch marker is missing while the ledger holds
// rows of it.
type suspect struct {
	untracked  int            // rows Redis had no trace of when checked
	candidates []ledger.Entry // the first few of them, to re-read
}

// detectLoss decides which of the topics whose epoch marker is missing lost
// data, logs and counts each, and adds it to the report.
//
// A missing marker alone does not tell a loss from a topic the recoverer has
// not seen yet (its first jobs were claimed before any run wrote its marker).
// So the topic's rows are checked against Redis, with the restore script in
// dry-run mode: Redis keeps tracking every job the ledger holds (the ledger
// row is written after the claim and deleted before the ack), so a row Redis
// has no trace of is a loss, provided the row is still there, unchanged,
// when read again: a row read just before its job completed (ledger delete,
// then Redis ack) looks untracked for a moment, but is gone when re-read.
// The claim's attempt and claimed_at name the claim: only a new claim, which
// needs Redis to track the job, changes them.
func (r *Recoverer) detectLoss(ctx context.Context, missing []string, counts map[string]int64, rep *Report) (map[string]bool, error) {
	suspects := make(map[string]*suspect)
	for _, t := range missing {
		if counts[t] > 0 {
			suspects[t] = &suspect{}
		}
	}
	if len(suspects) == 0 {
		return nil, nil
	}
	err := r.pages(ctx, math.MaxInt64, func(rows []ledger.Entry) error {
		var check []ledger.Entry
		for _, e := range rows {
			// A waiting row (a durable topic's waiting job) proves
			// nothing: it may be beyond the horizon, or not pushed yet. The
			// relay reloads those when Redis loses its mark.
			if suspects[e.Topic] != nil && e.State != queue.StateWaiting {
				check = append(check, e)
			}
		}
		if len(check) == 0 {
			return nil
		}
		out, err := r.q.Restore(ctx, restoreRows(check), dataplane.RestoreOptions{DryRun: true, Chunk: r.cfg.Chunk})
		if err != nil {
			return err
		}
		for i, o := range out {
			if o == dataplane.RestoreCreated {
				s := suspects[check[i].Topic]
				s.untracked++
				if len(s.candidates) < confirmCandidates {
					s.candidates = append(s.candidates, check[i])
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	lost := make(map[string]bool)
	for topic, s := range suspects {
		log := r.log.WithFields(logrus.Fields{"topic": topic, "rows": counts[topic], "untracked": s.untracked})
		confirmed, err := r.confirm(ctx, s.candidates)
		if err != nil {
			return nil, err
		}
		if !confirmed {
			log.Info("epoch marker missing, but Redis tracks every claimed job of the topic that the ledger holds " +
				"(a topic new to the recoverer, most likely); writing the marker. A durable topic's waiting jobs " +
				"are not part of this check: the relay reloads them")
			continue
		}
		lost[topic] = true
		r.dataLoss.Add(1)
		rep.DataLoss = append(rep.DataLoss, TopicLoss{Topic: topic, Rows: counts[topic], Untracked: s.untracked})
		log.Error("Redis lost data: the topic's epoch marker is gone and Redis has no trace of jobs the ledger holds; recovering the topic now")
	}
	slices.SortFunc(rep.DataLoss, func(a, b TopicLoss) int { return cmp.Compare(a.Topic, b.Topic) })
	return lost, nil
}

// confirm reports whether one of the rows found untracked is still in the
// ledger, for the same claim.
func (r *Recoverer) confirm(ctx context.Context, candidates []ledger.Entry) (bool, error) {
	if len(candidates) == 0 {
		return false, nil
	}
	ids := make([]int64, len(candidates))
	for i, c := range candidates {
		ids[i] = c.ID
	}
	claims, err := r.store.Claims(ctx, ids)
	if err != nil {
		return false, err
	}
	for _, c := range candidates {
		if now, ok := claims[c.ID]; ok && now.Attempt == c.Attempt && now.ClaimedAt == c.ClaimedAt {
			return true, nil
		}
	}
	return false, nil
}

package ledger

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/queue"
)

// The recoverer's queries (recoverer.Store): Stale pages through the rows
// (audit.go), TopicCounts and Claims below.

// Claim is the part of a row that changes while its job is in flight;
// attempt and claimed_at together name one claim of the job (a new claim
// rewrites both).
type Claim struct {
	Attempt    int
	ClaimedAt  int64
	RunAt      int64
	LeaseUntil int64
	State      queue.State
	LastError  string
}

// claimsBatch is how many ids one Claims statement looks up.
const claimsBatch = 5000

// Claims reads again the rows with the given ids (Entry.ID), without their
// payloads; rows gone are absent from the map. It looks them up by primary
// key, claimsBatch ids per statement, and scans them by hand: gorm's
// reflection would cost more than the query.
func (l ops) Claims(ctx context.Context, ids []int64) (map[int64]Claim, error) {
	out := make(map[int64]Claim, len(ids))
	for lo := 0; lo < len(ids); lo += claimsBatch {
		part := ids[lo:min(lo+claimsBatch, len(ids))]
		rows, err := l.conn(ctx).Table(l.ledgerTable).
			Select("id, attempt, claimed_at, run_at, lease_until, state, last_error").
			Where("id IN ?", part).Rows()
		if err != nil {
			return nil, fmt.Errorf("ledger: read %d rows again: %w", len(part), err)
		}
		for rows.Next() {
			var id int64
			var c Claim
			if err := rows.Scan(&id, &c.Attempt, &c.ClaimedAt, &c.RunAt, &c.LeaseUntil, &c.State, &c.LastError); err != nil {
				_ = rows.Close()
				return nil, fmt.Errorf("ledger: read rows again: %w", err)
			}
			out[id] = c
		}
		err = rows.Err()
		_ = rows.Close()
		if err != nil {
			return nil, fmt.Errorf("ledger: read rows again: %w", err)
		}
	}
	return out, nil
}

// TopicCounts returns how many rows each topic has (topics without rows are
// absent): one statement, answered from the (topic, job_id) unique index.
func (l *Ledger) TopicCounts(ctx context.Context) (map[string]int64, error) {
	var rows []struct {
		Topic string
		N     int64
	}
	err := l.conn(ctx).Table(l.ledgerTable).
		Select("topic, COUNT(*) AS n").Group("topic").Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("ledger: count rows by topic: %w", err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Topic] = r.N
	}
	return out, nil
}

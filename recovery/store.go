package recovery

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/ledger"
)

// Store is what the recoverer reads from the SQL ledger. LedgerStore
// adapts a *ledger.Ledger.
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
	Claims(ctx context.Context, ids []int64) (map[int64]Claim, error)
}

// Claim is the part of a ledger row that changes while its job is in
// flight; attempt and claimed_at together name one claim of the job (a new
// claim rewrites both).
type Claim struct {
	Attempt    int
	ClaimedAt  int64
	RunAt      int64
	LeaseUntil int64
	State      string
	LastError  string
}

// LedgerStore returns the Store of l.
func LedgerStore(l *ledger.Ledger) Store { return ledgerStore{l} }

type ledgerStore struct{ *ledger.Ledger }

// claimsBatch is how many ids one Claims statement looks up.
const claimsBatch = 5000

// Claims looks rows up by primary key, claimsBatch ids per statement, and
// scans them by hand: gorm's reflection would cost more than the query.
func (s ledgerStore) Claims(ctx context.Context, ids []int64) (map[int64]Claim, error) {
	out := make(map[int64]Claim, len(ids))
	for lo := 0; lo < len(ids); lo += claimsBatch {
		part := ids[lo:min(lo+claimsBatch, len(ids))]
		rows, err := s.DB().WithContext(ctx).Table(s.LedgerTable()).
			Select("id, attempt, claimed_at, run_at, lease_until, state, last_error").
			Where("id IN ?", part).Rows()
		if err != nil {
			return nil, fmt.Errorf("recovery: read %d ledger rows again: %w", len(part), err)
		}
		for rows.Next() {
			var id int64
			var c Claim
			if err := rows.Scan(&id, &c.Attempt, &c.ClaimedAt, &c.RunAt, &c.LeaseUntil, &c.State, &c.LastError); err != nil {
				_ = rows.Close()
				return nil, fmt.Errorf("recovery: read ledger rows again: %w", err)
			}
			out[id] = c
		}
		err = rows.Err()
		_ = rows.Close()
		if err != nil {
			return nil, fmt.Errorf("recovery: read ledger rows again: %w", err)
		}
	}
	return out, nil
}

// TopicCounts groups the ledger's rows by topic: one statement, answered
// from the (topic, job_id) unique index.
func (s ledgerStore) TopicCounts(ctx context.Context) (map[string]int64, error) {
	var rows []struct {
		Topic string
		N     int64
	}
	err := s.DB().WithContext(ctx).Table(s.LedgerTable()).
		Select("topic, COUNT(*) AS n").Group("topic").Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("recovery: count ledger rows by topic: %w", err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Topic] = r.N
	}
	return out, nil
}

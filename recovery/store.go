package recovery

import (
	"context"

	"github.com/delayq/delayq/ledger"
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
}

var _ Store = (*ledger.Ledger)(nil)

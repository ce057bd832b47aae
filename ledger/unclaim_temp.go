package ledger

import (
	"context"
	"errors"

	"github.com/delayq/delayq/queue"
)

// Unclaim is a placeholder so that the package compiles until the durable
// topics' ledger side lands; it is replaced by the real implementation.
func (l *Ledger) Unclaim(ctx context.Context, refs []queue.Ref) error {
	if len(refs) == 0 {
		return nil
	}
	return errors.New("ledger: Unclaim not implemented yet")
}

package queue

import (
	"context"
)

// Pinger is a Ledger that can tell cheaply whether its database answers
// (*ledger.Ledger is one). After a failed ledger write the worker pings it
// every ErrorBackoffMin and writes again as soon as it answers; a Ledger
// without Ping is tried again after the error backoff alone.
type Pinger interface {
	Ping(ctx context.Context) error
}

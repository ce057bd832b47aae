package queue

import (
	"context"
	"errors"
)

// ErrNotApplied is wrapped, with Redis's error, by a Pause or Resume whose
// SQL step succeeded and whose Redis step failed: the operator's intent is
// saved, and the relay (its full pass after Redis answers again) or the
// next recovery run applies it to Redis (docs/design.md §4.13). Calling
// again is safe, and applies it at once.
var ErrNotApplied = errors.New("saved in SQL, not applied to Redis yet")

// PauseState is a topic's pause state as an operator last set it. Times
// are Unix ms on the SQL server's clock.
type PauseState struct {
	Topic  string `json:"-"`
	Paused bool   `json:"-"`
	// At is when the state last changed (0: never paused); By is who
	// changed it ("token:1a2b3c4d", "anonymous", "cli:ops@host", ...).
	At int64  `json:"at"`
	By string `json:"by"`
	// Changed is set by Pause and Resume: whether the call changed the
	// state (false: the topic was in that state already).
	Changed bool `json:"-"`
}

// PauseStore keeps the operator's pause intent where a Redis data loss
// cannot reach it (the SQL ledger: *ledger.Ledger is one). Pause and
// Resume write it first, then Redis; the relay and the recoverer apply it
// to Redis again after a loss (ApplyPauses).
type PauseStore interface {
	// SetPaused records topic's state and returns the state now held.
	// Setting the state a topic is in already changes nothing and returns
	// the state as it was (who and when of the pause in force), changed
	// false.
	SetPaused(ctx context.Context, topic string, paused bool, actor string) (st PauseState, changed bool, err error)
	// TopicState returns topic's state; the zero state (not paused, At
	// 0) when it was never set.
	TopicState(ctx context.Context, topic string) (PauseState, error)
	// TopicStates returns the state of every topic it was ever set for,
	// paused or not, by topic.
	TopicStates(ctx context.Context) ([]PauseState, error)
}

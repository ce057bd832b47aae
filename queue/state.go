package queue

import (
	"database/sql/driver"
	"fmt"
)

// State is where a job is in its lifecycle. It is the one vocabulary of
// the library, the ledger's rows, the HTTP API, the CLI and the
// dashboard; how each store's position maps onto it is written below and
// nowhere else (docs/design.md §4.1).
//
//	waiting    not claimed yet: in Redis's due set with no attempt so far,
//	           or a durable job's ledger row (in SQL only while it is due
//	           beyond the horizon)
//	retrying   waiting again after an attempt: a failure's backoff, or put
//	           back after its worker's lease expired
//	in_flight  claimed: a worker holds its lease and its ledger row
//	dead       out of attempts or failed for good; kept until requeued or
//	           purged
//	cancelled  only in the answer of a cancel: the job is gone
//	unknown    no trace: never enqueued, finished, cancelled or purged
type State string

// The states of a job.
const (
	StateWaiting   State = "waiting"
	StateRetrying  State = "retrying"
	StateInFlight  State = "in_flight"
	StateDead      State = "dead"
	StateCancelled State = "cancelled"
	StateUnknown   State = "unknown"
)

// States are the states a job can be found in, in lifecycle order.
var States = []State{StateWaiting, StateRetrying, StateInFlight, StateDead, StateUnknown}

// ParseState reads a state given on input: a State's name, or an older
// name of one (see State).
func ParseState(s string) (State, error) {
	for _, st := range States {
		if string(st) == s {
			return st, nil
		}
	}
	if st, ok := renamedStates[s]; ok {
		return st, nil
	}
	return "", fmt.Errorf("state %q: want waiting, retrying, in_flight or dead", s)
}

// Column is how the ledger's state column spells s; "" for a state no row
// is in (dead, cancelled, unknown: those jobs have no row).
func (s State) Column() string {
	switch s {
	case StateWaiting:
		return columnWaiting
	case StateInFlight:
		return columnInFlight
	case StateRetrying:
		return columnRetrying
	}
	return ""
}

// Value writes s to the ledger's state column (database/sql's
// driver.Valuer).
func (s State) Value() (driver.Value, error) {
	c := s.Column()
	if c == "" {
		return nil, fmt.Errorf("queue: state %q has no ledger row", s)
	}
	return c, nil
}

// Scan reads the ledger's state column (database/sql's Scanner).
func (s *State) Scan(src any) error {
	var c string
	switch v := src.(type) {
	case string:
		c = v
	case []byte:
		c = string(v)
	default:
		return fmt.Errorf("queue: scan state from %T", src)
	}
	switch c {
	case columnWaiting:
		*s = StateWaiting
	case columnInFlight:
		*s = StateInFlight
	case columnRetrying:
		*s = StateRetrying
	default:
		return fmt.Errorf("queue: ledger state %q is none of %s, %s, %s", c, columnWaiting, columnInFlight, columnRetrying)
	}
	return nil
}

// renamedStates are the older names of states, accepted on input until
// the release after next (docs/design.md §4.1): "scheduled" was the
// API's and the ledger's name of waiting, "in_progress" (and the CLI's
// "in-progress") the ledger's name of in flight.
var renamedStates = map[string]State{
	"scheduled":   StateWaiting,
	"in_progress": StateInFlight,
	"in-progress": StateInFlight,
}

// A ledger row's state column spells the three states a row can be in
// with the names the column had before State was one vocabulary, so that
// processes of the previous release, sharing the database during a
// rolling upgrade, read and write the same rows. Value and Scan convert;
// Column gives the spelling to SQL built as text.
const (
	columnWaiting  = "scheduled"
	columnInFlight = "in_progress"
	columnRetrying = "retrying"
)

package ledger

import "errors"

// ErrNotFound reports that a ledger row asked for does not exist. Callers test
// for it with errors.Is.
var ErrNotFound = errors.New("ledger: row not found")

// ErrClaimLost reports that a job's ledger row is gone or belongs to a later
// claim (another worker took the job over after this one's lease expired, or
// the job was cancelled). A transactional handler that gets it must not
// commit its business writes: the job's current owner will do the work.
var ErrClaimLost = errors.New("ledger: claim lost (row gone or re-claimed)")

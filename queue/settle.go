package queue

// DeadJob is a failed claim that died: out of attempts, or failed for good.
// Client.Bury moves it to the dead set, Ledger.Bury archives it with its
// payload.
type DeadJob struct {
	Job   *Job
	Error string
	// DiedAt is the time of death (Unix ms) the ledger archives; 0: the
	// ledger's clock. Client.Bury stamps Redis's own time instead.
	DiedAt int64
}

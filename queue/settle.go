package queue

// DeadJob is a failed claim that died: out of attempts, or failed for good.
// The worker moves it to the topic's dead set in Redis, and the ledger
// archives it with its payload.
type DeadJob struct {
	Job   *Job
	Error string
	// DiedAt is the time of death (Unix ms) the ledger archives; 0: the
	// ledger's clock. The dead set in Redis takes Redis's own time instead.
	DiedAt int64
}

package queue

// JobInfo is one job's state as Get reports it.
type JobInfo struct {
	State State
	// Score is the due time (waiting, retrying), lease deadline (in
	// flight) or time of death (dead), Unix ms; 0 when unknown.
	Score int64
	Job   *Job // nil when unknown
	// Parked: a waiting job of an ordering key parked behind the key's
	// earlier job (NewJob.OrderingKey), which runs or waits first.
	Parked bool
	// SQLOnly: a durable job that waits in the SQL ledger only (due beyond
	// the horizon, or not pushed yet); Find reports these, Get never.
	SQLOnly bool
	// CancelRequestedAt is when a cancel of the job's run was first asked
	// (Unix ms, Redis's clock) while a worker holds it: its handler's
	// context is cancelled, and the state stays in flight until the
	// handler returns (Engine.CancelRunning). 0 otherwise.
	CancelRequestedAt int64
}

// Stats are the counts of one topic at one instant of Redis's clock.
type Stats struct {
	Topic    string
	Now      int64 // Redis's clock, Unix ms
	Due      int64 // waiting, due or not
	DueNow   int64 // waiting and already due: the overdue backlog
	InFlight int64 // leased to workers
	Dead     int64
	// OldestOverdueMs is how long the earliest overdue job has waited past
	// its due time (0 when nothing is overdue).
	OldestOverdueMs int64
	// NextDue is the earliest due time waiting, Unix ms (0 if none).
	NextDue int64
	// ByPriority splits Due by the jobs' priority (NewJob.Priority): index
	// l counts the waiting jobs of priority l.
	ByPriority [MaxPriority + 1]int64
	// Parked counts the waiting jobs parked behind an earlier job of their
	// ordering key (NewJob.OrderingKey); they are in Due, not in DueNow.
	Parked int64
}

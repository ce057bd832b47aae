package dataplane

// Where Redis holds a job, as get.lua and list.lua name its set.
const (
	inDue   = "due"
	inLease = "lease"
	inDead  = "dead"
)

// stateInRedis maps a job's set in Redis onto its State: the due set holds
// first runs (waiting) and jobs that ran before (retrying) alike, told
// apart by the envelope's attempt count.
func stateInRedis(set string, attempt int) State {
	switch set {
	case inLease:
		return StateInFlight
	case inDead:
		return StateDead
	case inDue:
		if attempt > 0 {
			return StateRetrying
		}
		return StateWaiting
	}
	return StateUnknown
}

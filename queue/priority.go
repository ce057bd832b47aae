package queue

// Priorities within a topic (docs/design.md §4.23). A job's priority is
// 0 (the default) to MaxPriority; of a topic's due jobs, those of the
// highest priority are claimed first, and among equals the one due
// longest. Raising a job's priority costs nothing for the others: jobs of
// priority 0 are claimed by due time as before, and a topic without a job
// of raised priority waiting pays nothing for the feature.
//
// No due job waits forever: of every OldestEvery jobs claimed from a topic
// (TopicConfig.OldestEvery, default DefaultOldestEvery) while jobs of
// raised priority wait, one is the job due longest, whatever its priority.
// A job with k jobs due before it is claimed within OldestEvery × (k + 1)
// claims, however many jobs of higher priority keep coming.
const (
	// MaxPriority is the highest priority a job may have.
	MaxPriority = 3
	// DefaultOldestEvery is TopicConfig.OldestEvery's default: one claim
	// in 10 (10%) goes to the job due longest.
	DefaultOldestEvery = 10
	// MaxOldestEvery bounds TopicConfig.OldestEvery.
	MaxOldestEvery = 1000
)

package queue

// Partitions is a topic's partition layout (docs/design.md §7.1): the
// count enqueues use, and every count whose partitions may still hold jobs,
// ascending (Current last).
type Partitions struct {
	Current int
	Layouts []int
}

// MaxPartitions bounds a topic's partition count.
const MaxPartitions = 256

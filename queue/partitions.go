package queue

import (
	"context"
	"strings"
)

// Partitions is a topic's partition layout (docs/design.md §7.1): the
// count enqueues use, and every count whose partitions may still hold jobs,
// ascending (Current last).
type Partitions struct {
	Current int
	Layouts []int
}

// MaxPartitions bounds a topic's partition count.
const MaxPartitions = 256

// LayoutStore keeps topics' partition layouts where a Redis data loss
// cannot reach them (the ledger's topic state), as PauseStore keeps their
// pauses: a raise writes here before Redis, and the relay and the
// recoverer write Redis's layout keys again from here.
type LayoutStore interface {
	// AddLayouts adds counts to topic's stored layouts (a union: a count
	// is never removed) and returns them all, ascending.
	AddLayouts(ctx context.Context, topic string, counts []int) ([]int, error)
	// Layouts returns the stored layouts of every topic partitioned.
	Layouts(ctx context.Context) (map[string][]int, error)
}

// TopicOf returns the topic that name, a topic's or a partition's
// ("topic~k.p~n"), belongs to: the part before "~", or name itself. "~"
// is not in a topic's alphabet.
func TopicOf(name string) string {
	if i := strings.IndexByte(name, '~'); i >= 0 {
		return name[:i]
	}
	return name
}

package ledger

import (
	"github.com/delayq/delayq/internal/dataplane"
)

// topicMatch is the condition (with its values) that selects the rows of
// topic in a listing. A partitioned topic's rows carry their partition's
// name, topic~K.p~n (docs/design.md §7.1), so a topic's listing takes those
// too: the exact name, and the names in the byte range [topic~,
// topic\x7f), which are exactly those that begin with "topic~" ("~" is
// 0x7e). A range, not LIKE: both dialects compare the column byte-wise
// (utf8mb4_bin, SQLite's BINARY), where SQLite's LIKE ignores case and
// would take another topic's rows; and it needs no escaping. A
// partition's own name selects its rows only.
func topicMatch(topic string) (string, []any) {
	if dataplane.IsPartition(topic) {
		return "topic = ?", []any{topic}
	}
	lo, hi := partitionRange(topic)
	return "(topic = ? OR (topic > ? AND topic < ?))", []any{topic, lo, hi}
}

// partitionRange is the open byte range of topic's partitions' names:
// exactly the names that begin with "topic~".
func partitionRange(topic string) (lo, hi string) { return topic + "~", topic + "\x7f" }

// SplitPartition reads a row's topic column: the topic a user named and,
// for a row of a topic of several partitions, the partition's name
// (topic~K.p~n), which the column holds.
func SplitPartition(stored string) (topic, partition string) {
	if dataplane.IsPartition(stored) {
		return dataplane.TopicOf(stored), stored
	}
	return stored, ""
}

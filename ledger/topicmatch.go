package ledger

import (
	"strings"

	"github.com/delayq/delayq/internal/dataplane"
)

// topicMatch is the condition (with its values) that selects the rows of
// topic in a listing. A partitioned topic's rows carry their partition's
// name, topic~K.p~n (docs/design.md §7.1), so a topic's listing takes those
// too: an exact match and a prefix range of the topic index, LIKE's
// wildcards escaped ("_" is allowed in names). A partition's own name
// selects its rows only.
func topicMatch(topic string) (string, []any) {
	if dataplane.IsPartition(topic) {
		return "topic = ?", []any{topic}
	}
	return "(topic = ? OR topic LIKE ? ESCAPE '!')", []any{topic, likeEscaper.Replace(topic) + "~%"}
}

var likeEscaper = strings.NewReplacer("!", "!!", "%", "!%", "_", "!_")

// SplitPartition reads a row's topic column: the topic a user named and,
// for a row of a topic of several partitions, the partition's name
// (topic~K.p~n), which the column holds.
func SplitPartition(stored string) (topic, partition string) {
	if dataplane.IsPartition(stored) {
		return dataplane.TopicOf(stored), stored
	}
	return stored, ""
}

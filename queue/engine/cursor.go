package engine

import (
	"hash/fnv"
	"strconv"
	"strings"
)

// A keyset cursor of the job browser (JobPage.NextAfter) names the listing
// it came from, "<listing>~<tag>~<position>": the listing's state (or
// "prefix"), a hash of its topic (and prefix), and where its page ended (a
// ledger.Cursor, or the last id of a prefix search). A cursor passed to
// another topic, state or prefix would resume at a position that means
// nothing there, silently skipping or repeating jobs, so it is refused.
const cursorSep = "~"

// listingTag names one listing of one topic (and prefix) in a cursor: 8
// hex digits of FNV-1a, enough to tell listings apart, short in a URL.
func listingTag(topic, prefix string) string {
	h := fnv.New32a()
	h.Write([]byte(topic))
	h.Write([]byte{0})
	h.Write([]byte(prefix))
	return strconv.FormatUint(uint64(h.Sum32())|1<<32, 16)[1:]
}

// makeCursor is the cursor of position in listing of topic (and prefix).
func makeCursor(listing, topic, prefix, position string) string {
	return listing + cursorSep + listingTag(topic, prefix) + cursorSep + position
}

// cursorPosition returns the position of cursor c, or ok false when c is
// not a cursor of listing of topic (and prefix).
func cursorPosition(c, listing, topic, prefix string) (position string, ok bool) {
	l, rest, ok1 := strings.Cut(c, cursorSep)
	tag, pos, ok2 := strings.Cut(rest, cursorSep)
	if !ok1 || !ok2 || l != listing || tag != listingTag(topic, prefix) {
		return "", false
	}
	return pos, true
}

package ledger

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// checkText rejects a value that MySQL would refuse for a VARCHAR(max)
// utf8mb4 column. SQLite would store it anyway; checking here keeps the two
// backends alike and names the culprit instead of failing the whole batch
// with a bare "data too long".
func checkText(field, v string, max int) error {
	if !utf8.ValidString(v) {
		return fmt.Errorf("ledger: %s %q is not valid UTF-8", field, v)
	}
	if n := utf8.RuneCountInString(v); n > max {
		return fmt.Errorf("ledger: %s is %d characters long, at most %d fit", field, n, max)
	}
	return nil
}

func checkKey(topic, id string) error {
	if topic == "" || id == "" {
		return fmt.Errorf("ledger: empty topic or job id (topic %q, id %q)", topic, id)
	}
	if err := checkText("topic", topic, maxTopicLen); err != nil {
		return err
	}
	return checkText("job id", id, maxJobIDLen)
}

// cleanError makes an error message storable: valid UTF-8 (utf8mb4 columns
// reject anything else) and at most maxErrorBytes long, cut on a character
// boundary. An error message is diagnostics; it must never be the reason a
// batch cannot be written.
func cleanError(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxErrorBytes {
		return s
	}
	const mark = " …[truncated]"
	cut := maxErrorBytes - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// nonNil stores an empty payload as zero bytes, not NULL: the payload
// columns are NOT NULL so that "no payload" has one spelling.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// refKey identifies a job across topics, for de-duplicating a batch.
type refKey struct{ topic, id string }

// nullText stores "" as NULL, for a nullable text column whose absence
// has one spelling.
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

package ledger

import (
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/delayq/delayq/queue"
)

// DefaultTablePrefix is the prefix of the ledger's tables when Options leaves
// it empty: dq_ledger and dq_dead_letter.
const DefaultTablePrefix = "dq_"

// Options tune a Ledger. The zero value is ready to use.
type Options struct {
	// TablePrefix lets several deployments (tenants, tests) share one
	// database; "" means DefaultTablePrefix. Letters, digits and underscores
	// only, at most 32 characters, so every table and index name stays within
	// MySQL's 64-character identifier limit.
	TablePrefix string
	// Now is the clock for claimed_at and updated_at; nil means time.Now.
	// Lease deadlines come from the caller (Redis's clock), never from here.
	Now func() time.Time
	// MaxPlaceholders caps the bind variables of one statement; 0 means the
	// dialect's limit (65,535 on MySQL, 32,766 on SQLite). A batch that would
	// exceed it is split into several statements in one transaction. Tests
	// lower it to exercise the split.
	MaxPlaceholders int
	// GroupCommit is the most worker writes (Record, Complete, Unclaim,
	// Extend, MarkRetrying, Bury) that one transaction carries when they
	// arrive while a commit is in flight: they wait for it and then commit
	// together (docs/design.md §4.5). 0 means DefaultGroupCommit; -1 turns
	// group commit off, so that each write commits on its own.
	GroupCommit int
	// GroupLinger is how long a settlement (Complete, Unclaim, Extend,
	// MarkRetrying, Bury) that finds no commit in flight waits for the
	// next Record to share its commit, while records flow (one came in the
	// last 100ms); a worker that records nothing writes its settlements at
	// once. 0 means DefaultGroupLinger; negative: never wait.
	GroupLinger time.Duration
	// GroupCommitDepth is how many grouped commits may be in flight at
	// once: with 2, the writes that arrive while one commit waits for the
	// disk start the next at once instead of waiting for it, which halves
	// what a record waits under load for a few more commits (docs/design.md
	// §4.5). 0 means DefaultGroupCommitDepth; at most 16. On SQLite,
	// which has one writer, it is always 1.
	GroupCommitDepth int
	// NoHistory lists the topics whose finished jobs leave no history row
	// (docs/design.md §4.18); every other topic's do. Default none.
	NoHistory []string
	// UniqueFor is the uniqueness window of durable topics (docs/design.md
	// §4.2.1): Schedule answers an id whose job finished less than the
	// window ago (its history row) as a Duplicate with Finished set, so
	// that a producer retrying an enqueue does not run the job twice, also
	// after Redis lost its data. Give the same windows as
	// queue.Config.TopicUniqueFor. A topic with a window keeps its history
	// (not in NoHistory), and recovery.history_retention must be at least
	// the window. At most queue.MaxUniqueFor. Default none.
	UniqueFor map[string]time.Duration
	// NotReadyWait is how long a write of the ledger's own that a Galera
	// node refused as not ready (error 1047: out of the primary component)
	// is tried again before its error is returned, retryable (a 503 for an
	// API caller). 0 means DefaultNotReadyWait (3 s); negative: not tried
	// again.
	NotReadyWait time.Duration
}

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9_]{1,32}$`)

// withDefaults returns o with its zero fields filled in, or an error naming
// the bad field.
func (o Options) withDefaults() (Options, error) {
	if o.TablePrefix == "" {
		o.TablePrefix = DefaultTablePrefix
	}
	if !prefixRE.MatchString(o.TablePrefix) {
		return o, fmt.Errorf("ledger: Options.TablePrefix %q: want 1-32 letters, digits or underscores", o.TablePrefix)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.GroupLinger == 0 {
		o.GroupLinger = DefaultGroupLinger
	}
	if o.GroupCommit == 0 {
		o.GroupCommit = DefaultGroupCommit
	}
	if o.GroupCommit < -1 {
		return o, fmt.Errorf("ledger: Options.GroupCommit %d: want -1 (off), 0 (default %d) or a positive number", o.GroupCommit, DefaultGroupCommit)
	}
	if o.GroupCommitDepth == 0 {
		o.GroupCommitDepth = DefaultGroupCommitDepth
	}
	if o.GroupCommitDepth < 1 || o.GroupCommitDepth > 16 {
		return o, fmt.Errorf("ledger: Options.GroupCommitDepth %d: want 0 (default %d) or 1-16", o.GroupCommitDepth, DefaultGroupCommitDepth)
	}
	if o.NotReadyWait == 0 {
		o.NotReadyWait = DefaultNotReadyWait
	}
	for topic, w := range o.UniqueFor {
		if w < 0 || w > queue.MaxUniqueFor {
			return o, fmt.Errorf("ledger: Options.UniqueFor[%s] %s: want 0 (none) up to %s", topic, w, queue.MaxUniqueFor)
		}
		if w > 0 && slices.Contains(o.NoHistory, topic) {
			return o, fmt.Errorf("ledger: Options.UniqueFor[%s]: the topic's history is off (Options.NoHistory), and its window is read from it", topic)
		}
	}
	if o.MaxPlaceholders < 0 {
		return o, fmt.Errorf("ledger: Options.MaxPlaceholders %d: must not be negative", o.MaxPlaceholders)
	}
	return o, nil
}

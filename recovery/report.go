package recovery

import (
	"time"
)

// Report is what one run found and did. It is logged, kept (the latest
// Config.KeepReports of them, see Recoverer.Reports) and passed to
// Config.OnReport.
type Report struct {
	// Start is when the run began; Duration how long it took.
	Start    time.Time     `json:"start"`
	Duration time.Duration `json:"duration_ns"`
	// Trigger says what started the run: "start", "schedule", "manual",
	// "redis-reconnect" or "trigger".
	Trigger string `json:"trigger"`
	// Recoverer names the process that ran it (host:pid).
	Recoverer string `json:"recoverer"`
	// Skipped: another recoverer held the lock; this run did nothing.
	Skipped bool `json:"skipped"`
	// DryRun: the run changed nothing; Reenqueued counts what it would
	// have re-enqueued.
	DryRun bool `json:"dry_run"`
	// Topics is how many topics were checked (ledger rows' topics and the
	// queue's topics set).
	Topics int `json:"topics"`
	// Scanned is how many ledger rows were looked at: the stale ones, and
	// the retrying ones of topics that lost data.
	Scanned int `json:"scanned"`
	// StillTracked is how many of them Redis still tracks (their lease
	// expiry redelivers them); Reenqueued how many it had no trace of and
	// were put back.
	StillTracked int `json:"still_tracked"`
	Reenqueued   int `json:"reenqueued"`
	// Moved is how many rows looked lost but had changed when read again:
	// their job finished, or was claimed again, while the run looked at
	// them. They are left alone.
	Moved int `json:"moved"`
	// Errors counts what went wrong (rows not restored, failed reads);
	// ErrorMessages holds the first few messages.
	Errors        int      `json:"errors"`
	ErrorMessages []string `json:"error_messages,omitempty"`
	// DataLoss lists the topics found to have lost data in Redis.
	DataLoss []TopicLoss `json:"data_loss,omitempty"`
	// ByTopic breaks Scanned, StillTracked, Reenqueued and Moved down by topic
	// (topics with no scanned row are left out).
	ByTopic map[string]TopicCounts `json:"by_topic,omitempty"`
	// Sample names the first few re-enqueued jobs, "topic/id".
	Sample []string `json:"sample,omitempty"`
	// HistoryDeleted is how many job history rows past their retention the
	// run deleted (docs/design.md §4.18).
	HistoryDeleted int64 `json:"history_deleted"`
	// EpochsWritten lists the topics whose epoch marker this run wrote
	// (new topics, and topics that lost data).
	EpochsWritten []string `json:"epochs_written,omitempty"`
	// KeysHandedOn is how many ordering keys held by a job that is gone
	// from Redis (a path that knows nothing of ordering keys removed it)
	// the run handed on to their next jobs (docs/design.md §4.24).
	KeysHandedOn int `json:"keys_handed_on,omitempty"`
	// Err joins every error of the run (ErrorMessages keeps the first few
	// as text).
	Err error `json:"-"`
}

// TopicLoss is one topic whose epoch marker was gone while the ledger held
// rows of it that Redis had no trace of.
type TopicLoss struct {
	Topic string `json:"topic"`
	// Rows is how many ledger rows the topic had; Untracked how many of
	// them Redis had no trace of when checked.
	Rows      int64 `json:"rows"`
	Untracked int   `json:"untracked"`
}

// TopicCounts are one topic's share of a report.
type TopicCounts struct {
	Scanned      int `json:"scanned"`
	StillTracked int `json:"still_tracked"`
	Reenqueued   int `json:"reenqueued"`
	Moved        int `json:"moved"`
}

// DataLossDetected reports whether the run found a topic that lost data.
func (r Report) DataLossDetected() bool { return len(r.DataLoss) > 0 }
